"""A third-party-style MCP server (stdio) with one tool that writes a file, unannotated.

What /undo must take back when a server other than ours changes the workspace: `write_note`
writes `text` to `path` under `--root` (default: its working directory). Run as
`python tests/support/writer_server.py [--root DIR]`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mcp.server.mcpserver import MCPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=".")
    root = Path(parser.parse_args().root)
    server = MCPServer("writer")

    @server.tool()
    def write_note(path: str, text: str) -> str:
        """Write a note to a file."""
        (root / path).write_text(text)
        return f"wrote {len(text)} characters to {path}"

    server.run("stdio")


if __name__ == "__main__":
    main()
