"""A server that speaks only the 2026-07-28 protocol: it refuses the legacy `initialize`.

The SDK's MCPServer serves both eras; a middleware that refuses the handshake the way a
modern-only server does (-32022 naming the versions it speaks) makes it modern-only. Run as
a script it serves stdio (with `both-eras`: answering `initialize` too, the bench's legacy
baseline); `app()` gives the streamable HTTP app for `tests.support.asgi_thread.serve`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


class RefuseHandshake:
    """Server middleware: `initialize` is answered with an unsupported-version error."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "initialize":
            raise MCPError(
                code=UNSUPPORTED_PROTOCOL_VERSION,
                message="Unsupported protocol version",
                data={"supported": list(MODERN_PROTOCOL_VERSIONS)},
            )
        return await call_next(ctx)


def build(modern_only: bool = True) -> MCPServer:
    """`modern_only=False`: the same server, answering both eras (the bench's baseline)."""
    middleware = [RefuseHandshake()] if modern_only else []
    server = MCPServer("modern-only" if modern_only else "both-eras", middleware=middleware)

    @server.tool()
    def greet(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    @server.tool()
    def client_extensions(ctx: Context) -> str:
        """The extensions the calling client declared in this request, sorted, as JSON."""
        declared = ctx.client_capabilities.extensions if ctx.client_capabilities else None
        return json.dumps(sorted(declared or {}))

    @server.resource("notes://today", mime_type="text/plain")
    def today() -> str:
        """Today's note."""
        return "the note of today"

    @server.resource("notes://day/{day}")
    def day_note(day: str) -> str:
        """The note of one day."""
        return f"the note of {day}"

    @server.prompt()
    def welcome(who: str) -> str:
        """A welcome for someone."""
        return f"Please welcome {who} warmly."

    return server


def app() -> Any:
    return build().streamable_http_app()


if __name__ == "__main__":
    build(modern_only="both-eras" not in sys.argv[1:]).run("stdio")
