"""A stdio MCP server whose one tool asks its client to fill in a form (elicitation).

What a front end that nobody answers at a terminal (acp, serve) must decline, and say why
in its own words: `confirm(action)` asks "Really ACTION?" and returns the answer's action
(accept, decline, cancel). Run as `python tests/support/form_server.py`.
"""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel


class Confirm(BaseModel):
    approve: bool


def main() -> None:
    server = MCPServer("form")

    @server.tool()
    async def confirm(action: str, ctx: Context) -> str:
        """Ask the user to confirm an action."""
        answer = await ctx.elicit(f"Really {action}?", Confirm)
        return f"the form was answered: {answer.action}"

    server.run("stdio")


if __name__ == "__main__":
    main()
