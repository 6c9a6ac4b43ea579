"""The one directory the file tools may touch.

Every path a model sends is resolved here, symlinks included, before any file is opened: a
model can be manipulated by the text it reads, so `../`, absolute paths and links that lead
outside the root are refused with a message that says what is allowed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def at(cls, root: str | os.PathLike[str]) -> Workspace:
        path = Path(root).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"workspace root {path} is not a directory")
        return cls(path)

    def resolve(self, path: str) -> Path:
        """The real path of `path` (relative to the root), or ToolError if it leaves the root."""
        if "\x00" in path:
            raise ToolError("the path contains a NUL byte")
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        real = candidate.resolve()  # follows every symlink that exists, like open() would
        if real != self.root and not real.is_relative_to(self.root):
            raise ToolError(
                f"'{path}' is outside the workspace {self.root}; "
                "use a path relative to the workspace root"
            )
        return real

    def show(self, path: Path) -> str:
        """A path as the model should write it back: relative to the root."""
        return "." if path == self.root else str(path.relative_to(self.root))
