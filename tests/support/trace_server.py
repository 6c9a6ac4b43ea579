"""A stdio MCP server whose one tool answers with the `_meta` its request carried, so a
test sees the trace context (`traceparent`, `tracestate`) the agent sent with the call."""

from __future__ import annotations

import json

from mcp.server import MCPServer
from mcp.server.mcpserver import Context


def build() -> MCPServer:
    server = MCPServer("trace-echo")

    @server.tool()
    def request_meta(ctx: Context) -> str:
        """The _meta of this request, as JSON."""
        params = ctx.request_context.params or {}
        meta = params.get("_meta") if isinstance(params, dict) else None
        return json.dumps(meta or {}, sort_keys=True)

    return server


if __name__ == "__main__":
    build().run()
