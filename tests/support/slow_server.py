"""An MCP stdio server with two slow tools: `wait(seconds)` (annotated read-only) and
`write(seconds)` (may change state). Each answers "START END" (epoch seconds), so a test or
the bench can tell whether calls of one reply overlapped."""

from __future__ import annotations

import time

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("slow", log_level="WARNING")


async def _span(seconds: float) -> str:
    start = time.time()
    await anyio.sleep(seconds)
    return f"{start:.6f} {time.time():.6f}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
async def wait(seconds: float) -> str:
    """Wait, reading nothing and changing nothing."""
    return await _span(seconds)


@server.tool(annotations=ToolAnnotations(read_only_hint=False))
async def write(seconds: float) -> str:
    """Pretend to change something, slowly."""
    return await _span(seconds)


if __name__ == "__main__":
    server.run("stdio")
