"""An MCP stdio server with one tool whose result is as large as asked: `lines(count)`
returns `count` numbered 100-character lines (`big_text(count)`), 2 MB for 20,000."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("big", log_level="WARNING")


def big_text(count: int) -> str:
    filler = "abcdefghij" * 10
    return "".join(f"{i:07d}:{filler[:91]}\n" for i in range(count))


@server.tool()
def lines(count: int) -> str:
    """Return `count` numbered lines of 100 characters."""
    return big_text(count)


if __name__ == "__main__":
    server.run("stdio")
