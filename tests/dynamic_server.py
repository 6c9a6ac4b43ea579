"""A tiny MCP server whose tool list changes at runtime: `add_tool` adds `dynamic_tool`.

It announces the change both ways: a `subscriptions/listen` event for 2026-07-28 clients and
a `notifications/tools/list_changed` for handshake (legacy) sessions.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("dynamic", log_level="WARNING")


@server.tool()
async def add_tool(ctx: Context) -> str:
    """Add `dynamic_tool` to this server's tools."""
    server.add_tool(lambda: "new!", name="dynamic_tool", description="added at runtime")
    await ctx.notify_tools_changed()
    if ctx.protocol_version != "2026-07-28":
        await ctx.session.send_tool_list_changed()
    return "added"


if __name__ == "__main__":
    server.run("stdio")
