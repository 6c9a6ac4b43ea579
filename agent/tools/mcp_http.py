"""HTTP servers: status hints for connect errors, the per-caller record of session refusals (404)
and which JSON-RPC method a request carried. Split from agent/tools/mcp.py."""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass, field

import httpx2
from mcp import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT

_HTTP_HINTS = {
    401: " (the server wants credentials: set an Authorization header with -H or 'headers')",
    403: " (the server refused these credentials: check the Authorization header)",
    404: " (nothing at this URL: check --server-url / 'url'; streamable HTTP is usually /mcp)",
}
_ERA_NAMES = {
    "legacy": "legacy handshake (initialize)",
    "auto": "server/discover, then initialize",
    "2026-07-28": "2026-07-28 protocol (server/discover)",
}
_OAUTH_OFF_HINT = (
    " (the server wants a login: remove 'oauth': false, or set an Authorization header)"
)
_LOGIN_OR_HEADER_HINT = (
    " (the server wants credentials: `run_mcp.py --login {name}` if it offers a login,"
    " or an Authorization header with -H or 'headers')"
)
_NOT_SSE = " (not an SSE endpoint: a streamable HTTP one, often …/mcp, needs --connection http)"
_NOT_HTTP = ' (an SSE endpoint, often …/sse, needs --connection sse or "type": "sse")'
_SSE_HINTS = {
    **_HTTP_HINTS,
    404: " (nothing at this URL: check --server-url / 'url'; SSE is usually served at /sse)",
    400: _NOT_SSE,
    405: _NOT_SSE,
    406: _NOT_SSE,
}


def http_hint(transport: str, status: int, path: str) -> str:
    """What to fix after an HTTP refusal, by transport: a streamable HTTP client at an SSE
    endpoint gets 405 (a GET-only route) or 404 from servers that route only /sse."""
    if transport == "http" and (status == 405 or (status == 404 and path.endswith("/sse"))):
        return _NOT_HTTP
    return (_SSE_HINTS if transport == "sse" else _HTTP_HINTS).get(status, "")


def combined_eras(tried: list[tuple[str, str]]) -> str:
    """Each protocol era's failure; one cause said once when every era met the same one."""
    causes = {cause for _, cause in tried}
    if len(causes) == 1:
        eras = " and ".join(era for era, _ in tried)
        return f"{tried[0][1]} (tried: {eras})"
    return "; ".join(f"{era}: {cause}" for era, cause in tried)


@dataclass
class _HttpReplies:
    """HTTP refusals of the requests one caller sent on our session: (JSON-RPC method,
    status). The SDK posts each request in a copy of its sender's context, so the response
    hook finds the caller's record there and statuses never mix between concurrent calls."""

    refused: list[tuple[str | None, int]] = field(default_factory=list)

    def session_unknown(self, method: str) -> bool:
        """The server answered `method` itself with 404: the session is gone, nothing ran."""
        return (method, 404) in self.refused

    def session_refused(self) -> int | None:
        """The status of the first refusal of a request on our session, if any."""
        return next((status for _, status in self.refused if status >= 400), None)


_http_replies: contextvars.ContextVar[_HttpReplies | None] = contextvars.ContextVar(
    "mcp_agent_http_replies", default=None
)


def _jsonrpc_method(request: httpx2.Request) -> str | None:
    """The JSON-RPC method a POST carried (None for a GET, a response, or an odd body)."""
    try:
        body = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    return body.get("method") if isinstance(body, dict) else None


def _era_refused(exc: BaseException, http_error: str | None) -> bool:
    """Whether the server answered the handshake with a refusal (it speaks another era),
    rather than being unreachable, gone, or asking for credentials."""
    if http_error is not None:
        return http_error.startswith("HTTP 400")
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return isinstance(exc, MCPError) and exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT)
