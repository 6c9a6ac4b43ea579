"""An MCP server that reports the environment it was started with (tool `environment`).

The agent decides what a stdio server inherits; this server shows what arrived.
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("env", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def environment() -> str:
    """Every environment variable this server process has, as a JSON object."""
    return json.dumps(dict(os.environ), sort_keys=True)


if __name__ == "__main__":
    server.run("stdio")
