"""An MCP stdio server that opens files only inside the folders the client offers as roots,
as the reference PDF viewer does: `read_local(path)` fails with "… Allowed directories: …"
when the path is in none of them (or none are offered)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("roots", log_level="WARNING")


async def _allowed(ctx: Context) -> list[Path]:
    if not ctx.session.check_client_capability(
        types.ClientCapabilities(roots=types.RootsCapability())
    ):
        return []
    listed = await ctx.session.list_roots()
    return [Path(unquote(urlparse(str(root.uri)).path)) for root in listed.roots]


def _read_within(path: str, folders: list[Path]) -> str:
    wanted = Path(path).resolve()
    if not any(wanted.is_relative_to(folder.resolve()) for folder in folders):
        shown = ", ".join(str(f) for f in folders)
        raise ValueError(f"cannot open {path}: not allowed. Allowed directories: {shown}")
    return wanted.read_text(encoding="utf-8")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def read_local(path: str, ctx: Context) -> str:
    """Read a local file that lies in one of the client's roots."""
    return _read_within(path, await _allowed(ctx))


if __name__ == "__main__":
    server.run("stdio")
