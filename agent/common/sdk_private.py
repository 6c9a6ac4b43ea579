"""Every private name of the mcp SDK this project touches: the one seam past its public API.

The rest of agent/ uses only the SDK's public surface (tests/test_architecture.py fails
when a module other than this one reaches a private SDK name); tests/test_sdk_contract.py
fails when any name below is gone or changes shape; pyproject pins the SDK to the minor
version that test passed on. Nothing here patches an SDK module: each touch is a call,
an attribute read, or a method override on a subclass of our own.

The touches, and why each is needed:

1. `ClientSession._dispatcher.send_raw_request(method, params, opts)` sends a request whose
   answer the SDK would reject or has no type for: a 2025-11-25 task-augmented `tools/call`
   (answered with a `CreateTaskResult`, which the session validates as a `CallToolResult`),
   the `tasks/*` methods, and a `tools/list` page read again as raw JSON when one tool in
   it is malformed (so the rest of the page is kept).
2. `ClientSession._stamp(data, opts)` puts the session's own per-era `_meta` and headers on
   such a raw request, so it leaves exactly as the session would send it.
3. `ClientSession._absorb_tool_listing(result, complete=)` hands a page read raw back to
   the session, which builds its per-tool state from it (structured-output checks, the
   2026-07-28 x-mcp-header filter). Skipped when the session has no such method.
4. `OAuthClientProvider` (and `ClientCredentialsOAuthProvider`) run the OAuth protocol in
   private steps, with no public hooks; `ProviderHooks` overrides these and hands each to a
   public method of ours (agent/auth/provider.py fills them in):
   - `_initialize` -> `after_initialize`: restore what the SDK forgets across restarts
     (the token's expiry, the authorization server's metadata);
   - `_handle_token_response` -> `after_token_response`: keep that metadata on disk;
   - `_perform_authorization` -> `before_authorization`: check the endpoints are https
     before a URL is shown, add the configured scopes;
   - `_refresh_token` / `_handle_refresh_response` -> `before_refresh` / `after_refresh`:
     refresh under the token store's lock with the freshest refresh token;
   - `_auth_flow` -> `watch_flow`: see each request of the flow, to name the failing step,
     refuse a login when headless, and try a refresh before a new login after a 401;
   - `_refresh_token`, `_handle_refresh_response`, `_add_auth_header` called by the
     watcher (`refresh_request`, `take_refresh_response`, `add_auth_header`), and
     `_initialized` reset by `reread_store` (after /logout the store is read again).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx2
import mcp.types as types
from mcp.client.session import ClientSession


async def send_raw_request(
    mcp_session: ClientSession,
    method: str,
    params: Mapping[str, Any] | None,
    opts: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One request on the MCP session's dispatcher; its answer as raw JSON (touch 1)."""
    dispatcher: Any = mcp_session._dispatcher
    result: dict[str, Any] = await dispatcher.send_raw_request(method, params, opts or {})
    return result


async def send_stamped_request(
    mcp_session: ClientSession,
    method: str,
    params: Mapping[str, Any],
    *,
    timeout: float,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A request as the MCP session itself would send it (touches 1 and 2): its era's `_meta`
    and headers, then `headers` on top; the answer as raw JSON."""
    data: dict[str, Any] = {"method": method, "params": dict(params)}
    opts: dict[str, Any] = {}
    mcp_session._stamp(data, opts)  # type: ignore[arg-type]
    if headers:
        opts.setdefault("headers", {}).update(headers)
    opts["timeout"] = timeout
    return await send_raw_request(mcp_session, method, data["params"], opts)


def absorb_tool_listing(
    mcp_session: ClientSession, page: types.ListToolsResult, *, complete: bool
) -> None:
    """Give the MCP session a tools page it did not read itself (touch 3)."""
    absorb = getattr(mcp_session, "_absorb_tool_listing", None)
    if absorb is not None:
        absorb(page, complete=complete)


class ProviderHooks:
    """Mixed in before an SDK OAuth provider: each private step it overrides calls a public
    hook (touch 4). The hooks do nothing here; agent/auth/provider.py fills them in."""

    # -- hooks

    async def after_initialize(self) -> None:
        """The stored tokens and client are loaded."""

    def after_token_response(self) -> None:
        """Tokens arrived from the token endpoint (a login)."""

    def before_authorization(self) -> None:
        """A person is about to be sent to the authorization URL."""

    async def before_refresh(self) -> None:
        """A refresh request is about to be built."""

    def after_refresh(self) -> None:
        """The refresh answer was handled (or failed)."""

    def watch_flow(
        self, request: httpx2.Request, flow: AsyncGenerator[httpx2.Request, httpx2.Response]
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The flow that sends `request`, as the SDK runs it; may wrap it."""
        return flow

    # -- the SDK's steps the watcher drives

    async def refresh_request(self) -> httpx2.Request:
        """The refresh request the SDK would send now."""
        return await self._refresh_token()

    async def take_refresh_response(self, response: httpx2.Response) -> bool:
        """Handle the answer to `refresh_request`: whether new tokens came."""
        return await self._handle_refresh_response(response)

    def add_auth_header(self, request: httpx2.Request) -> None:
        self._add_auth_header(request)  # type: ignore[attr-defined]

    def reread_store(self) -> None:
        """The next request reads the tokens and client from the store again."""
        self._initialized = False

    # -- the overrides (the SDK's private names)

    async def _initialize(self) -> None:
        await super()._initialize()  # type: ignore[misc]
        await self.after_initialize()

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)  # type: ignore[misc]
        self.after_token_response()

    async def _perform_authorization(self) -> httpx2.Request:
        self.before_authorization()
        request: httpx2.Request = await super()._perform_authorization()  # type: ignore[misc]
        return request

    async def _refresh_token(self) -> httpx2.Request:
        await self.before_refresh()
        request: httpx2.Request = await super()._refresh_token()  # type: ignore[misc]
        return request

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        try:
            refreshed: bool = await super()._handle_refresh_response(response)  # type: ignore[misc]
            return refreshed
        finally:
            self.after_refresh()

    def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        return self.watch_flow(request, super()._auth_flow(request))  # type: ignore[misc]
