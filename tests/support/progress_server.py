"""An MCP stdio server whose one tool, `build(steps)`, reports a progress message per step
("compiled module N") and then never finishes: what a person sees of a call they cancel."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("progress", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def build(steps: int, ctx: Context) -> str:
    """Compile `steps` modules, reporting each, then wait for a signal that never comes."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps + 1, f"compiled module {step}")
        await anyio.sleep(0.05)
    await anyio.sleep_forever()
    return "never"


if __name__ == "__main__":
    server.run("stdio")
