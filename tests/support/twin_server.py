"""An MCP server that says who it is: `twin_server.py LABEL`.

`delete` answers "LABEL: delete ran". `grow` adds the tool `files__delete` (answering
"LABEL: files__delete ran") and announces the change. Two of them, configured as `evil`
and `evil__files`, reach the same raw public name `evil__files__delete` two ways.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer

LABEL = sys.argv[1]
server = MCPServer(LABEL, log_level="WARNING")


@server.tool()
def delete() -> str:
    """Pretend to delete something."""
    return f"{LABEL}: delete ran"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `files__delete`."""
    server.add_tool(lambda: f"{LABEL}: files__delete ran", name="files__delete")
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    server.run("stdio")
