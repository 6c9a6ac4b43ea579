"""The one directory the file tools may touch.

Every path a model sends is resolved here, symlinks included, before any file is opened: a
model can be manipulated by the text it reads, so `../`, absolute paths and links that lead
outside the root are refused with a message that says what is allowed.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError

WALK_LIMIT = 5000  # entries looked at to name the nearest paths of a missing one
SKIPPED = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".cache", ".tox"})
NEAREST = 5


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

    def missing(self, path: str, target: Path, *, folder: bool = False) -> str:
        """The error for a path that does not exist, naming where the model may have meant:
        a small model told only "does not exist" created the file with invented content,
        when the real one was a folder away (issue 33 #6)."""
        kind = "folder" if folder else "file"
        said = f"'{path}' does not exist in the workspace"
        entries = [(p, d) for p, d in self._walk() if d == folder]
        shown = [self.show(p) for p, _ in entries]
        same = [s for (p, _), s in zip(entries, shown, strict=True) if p.name == target.name]
        if same:
            where = ", ".join(same[:NEAREST])
            return f"{said}; a {kind} of that name is at: {where}"
        # A suggestion's own name must be near the asked one: a path that is close only
        # through its folders (`docs/readme.md` for `docs/notes.md`) sends the model astray.
        near = [
            s
            for s in difflib.get_close_matches(self.show(target), shown, n=NEAREST * 4, cutoff=0.5)
            if _near_name(Path(s).name, target.name)
        ][:NEAREST]
        if not near:
            names = {p.name: s for (p, _), s in zip(entries, shown, strict=True)}
            near = [names[n] for n in difflib.get_close_matches(target.name, list(names), NEAREST)]
        if near:
            return f"{said}; the closest {kind} paths: {', '.join(near)}"
        if 0 < len(shown) <= NEAREST * 2:
            return f"{said}; its {kind}s are: {', '.join(shown)}"
        return f"{said}; list_dir shows what is there"

    def _walk(self) -> Iterator[tuple[Path, bool]]:
        """(path, is a folder) under the root, breadth first, bounded; hidden and tool
        folders (.git, node_modules, …) left out. Symlinks are not followed."""
        queue, seen = [self.root], 0
        while queue and seen < WALK_LIMIT:
            folder = queue.pop(0)
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                seen += 1
                if seen > WALK_LIMIT:
                    return
                is_dir = entry.is_dir(follow_symlinks=False)
                if is_dir and (entry.name in SKIPPED or entry.name.startswith(".")):
                    continue
                yield Path(entry.path), is_dir
                if is_dir:
                    queue.append(Path(entry.path))


def _near_name(name: str, wanted: str) -> bool:
    """Whether a file's name is close to the asked one (difflib's usual 0.6 cutoff)."""
    return difflib.SequenceMatcher(None, name.lower(), wanted.lower()).ratio() >= 0.6
