"""A tiny MCP server whose tools, prompts and resources change at runtime.

`add_tool` adds `dynamic_tool`; `add_things` adds the prompt `fresh` and the resource
`late://doc`; `say` sends an MCP log message. Changes are announced both ways: a
`subscriptions/listen` event for 2026-07-28 clients and a `notifications/*/list_changed`
for handshake (legacy) sessions.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("dynamic", log_level="WARNING")
MODERN = "2026-07-28"


@server.tool()
async def add_tool(ctx: Context) -> str:
    """Add `dynamic_tool` to this server's tools."""
    server.add_tool(lambda: "new!", name="dynamic_tool", description="added at runtime")
    await ctx.notify_tools_changed()
    if ctx.protocol_version != MODERN:
        await ctx.session.send_tool_list_changed()
    return "added"


@server.tool()
async def add_things(ctx: Context) -> str:
    """Add the prompt `fresh` and the resource `late://doc`."""

    def fresh(topic: str) -> str:
        """A prompt published at runtime."""
        return f"Talk about {topic}"

    def doc() -> str:
        return "LATE DOC BODY"

    server.prompt(name="fresh")(fresh)
    server.resource("late://doc", name="doc", mime_type="text/plain")(doc)
    await ctx.notify_prompts_changed()
    await ctx.notify_resources_changed()
    if ctx.protocol_version != MODERN:
        await ctx.session.send_prompt_list_changed()
        await ctx.session.send_resource_list_changed()
    return "added things"


@server.tool()
async def say(text: str, ctx: Context) -> str:
    """Send `text` as an MCP log message (info)."""
    await ctx.info(text)
    return "said"


@server.prompt()
def early() -> str:
    """A prompt there from the start."""
    return "early prompt text"


if __name__ == "__main__":
    server.run("stdio")
