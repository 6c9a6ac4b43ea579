"""A real MCP server behind OAuth 2.1, for the end-to-end login tests.

The SDK's own server auth: `MCPServer` with an authorization server provider serves the
protected resource metadata, the authorization server metadata, dynamic registration,
/authorize and /token next to /mcp, and checks the bearer token on every MCP request.
The provider keeps everything in memory and approves every authorization at once (there
is no person to ask), and the test can expire access tokens or revoke refresh tokens.
Refresh tokens rotate: each is taken once. The faults a hostile or broken login server
shows are switches on the authority: metadata naming other endpoints (`metadata_patch`),
metadata sent one byte a second (`trickle_metadata`), a refused code (`refuse_codes`),
and refreshes held until several have arrived (`hold_refreshes`), to make runs race.
The client side the tests share: `vault_config` (the server as `vault` in an mcp.json) and
`run_login` (`run_mcp.py --login vault` with a given `$BROWSER`, such as `FOLLOW_BROWSER`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    TokenError,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.types import ToolAnnotations
from pydantic import AnyHttpUrl

from tests.support.cli import mcp_json, run_cli
from tests.support.servers import SUPPORT

ACCESS_TTL = 3600
SCOPE = "mcp:tools"
METADATA_PATH = "/.well-known/oauth-authorization-server"
FOLLOW_BROWSER = f"{sys.executable} {SUPPORT / 'follow_browser.py'} %s"  # follows the login URL
HOLD_LIMIT = 5.0  # seconds a held refresh waits for the others (they may be locked out)


@dataclass
class MemoryAuthority(
    OAuthAuthorizationServerProvider[AuthorizationCode, RefreshToken, AccessToken]
):
    """An authorization server provider that says yes to everyone, and remembers."""

    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    issued: list[str] = field(default_factory=list)  # every token and secret handed out
    refreshes: int = 0
    authorizations: int = 0
    refuse_codes: bool = False  # the token endpoint answers invalid_grant
    metadata_patch: dict[str, str] = field(default_factory=dict)  # fields of AS metadata
    trickle_metadata: bool = False  # AS metadata at one byte a second
    metadata_requests: int = 0
    hold_refreshes: int = 0  # refreshes wait until this many arrived (or HOLD_LIMIT)
    refresh_arrivals: int = 0
    refused_refreshes: int = 0
    _refreshed: asyncio.Event | None = None
    _hold_base: int = 0

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        if client_info.client_secret:
            self.issued.append(client_info.client_secret)

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        self.authorizations += 1
        code = "code-" + secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        query = {"code": code, **({"state": params.state} if params.state else {})}
        return f"{params.redirect_uri}?{urlencode(query)}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        if self.refuse_codes:
            raise TokenError("invalid_grant", "the code was refused")
        return self._issue(client.client_id or "", authorization_code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        if self.hold_refreshes:
            await self._refresh_turn()
        found = self.refresh.get(refresh_token)
        self.refused_refreshes += found is None
        return found

    async def _refresh_turn(self) -> None:
        """Hold refreshes until `hold_refreshes` arrived, then let them in one at a time
        in arrival order: the later ones then present a token the first one rotated."""
        if not self.refresh_arrivals:
            self._hold_base = self.refreshes
        self.refresh_arrivals += 1
        ticket = self._hold_base + self.refresh_arrivals
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HOLD_LIMIT
        while self.refresh_arrivals < self.hold_refreshes or self.refreshes < ticket - 1:
            if loop.time() >= deadline:
                return
            self._refreshed = self._refreshed or asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._refreshed.wait(), 0.05)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refreshes += 1
        self.refresh.pop(refresh_token.token, None)
        if self._refreshed is not None:
            self._refreshed.set()
            self._refreshed = None
        return self._issue(client.client_id or "", scopes or refresh_token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str]) -> OAuthToken:
        access, refresh = "at-" + secrets.token_urlsafe(24), "rt-" + secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + ACCESS_TTL,
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        self.issued += [access, refresh]
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=ACCESS_TTL,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )

    # -- what the tests do to it

    def expire_access_tokens(self) -> None:
        """Every access token stops working (as if its lifetime ended early)."""
        self.access.clear()

    def revoke_refresh_tokens(self) -> None:
        self.access.clear()
        self.refresh.clear()


def build(origin: str, authority: MemoryAuthority) -> Any:
    server = MCPServer(
        "protected",
        auth_server_provider=authority,
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(origin),
            resource_server_url=AnyHttpUrl(f"{origin}/mcp"),
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
            required_scopes=[SCOPE],
            validate_token_resource=False,
        ),
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def secret_number() -> str:
        """A number only a logged-in client may read."""
        return "the secret number is 4217"

    return Faults(server.streamable_http_app(), authority)


class Faults:
    """ASGI middleware: the authorization server metadata as the authority's switches say."""

    def __init__(self, app: Any, authority: MemoryAuthority) -> None:
        self.app = app
        self.authority = authority

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(METADATA_PATH):
            return await self.app(scope, receive, send)
        self.authority.metadata_requests += 1
        start: dict[str, Any] = {}
        body = bytearray()

        async def keep(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            else:
                body.extend(message.get("body", b""))

        await self.app(scope, receive, keep)
        if self.authority.metadata_patch and start.get("status") == 200:
            body[:] = json.dumps(json.loads(body) | self.authority.metadata_patch).encode()
        headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": start["status"], "headers": headers})
        if not self.authority.trickle_metadata:
            return await send({"type": "http.response.body", "body": bytes(body)})
        await _trickle(bytes(body), receive, send)


async def _trickle(body: bytes, receive: Any, send: Any) -> None:
    """One byte a second, until the body is sent or the client goes away."""

    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(gone())
    try:
        for i in range(len(body)):
            if watcher.done():
                return
            more = i + 1 < len(body)
            await send({"type": "http.response.body", "body": body[i : i + 1], "more_body": more})
            await asyncio.wait({watcher}, timeout=1.0)  # the server's pace, not a test's wait
    finally:
        watcher.cancel()


@contextlib.contextmanager
def serve_protected() -> Iterator[tuple[str, MemoryAuthority]]:
    """Yield (MCP URL, authority) of a protected server on a free loopback port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    origin = f"http://127.0.0.1:{sock.getsockname()[1]}"
    authority = MemoryAuthority()
    config = uvicorn.Config(
        build(origin, authority), log_level="critical", lifespan="on", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the protected test server did not start")
            time.sleep(0.01)
        yield f"{origin}/mcp", authority
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def vault_config(tmp_path: Path, url: str, **extra: object) -> Path:
    """An mcp.json naming the protected server `vault` (extra keys such as timeout added)."""
    return mcp_json(tmp_path, {"vault": {"type": "http", "url": url, **extra}})


def run_login(
    config: Path, tmp_path: Path, browser: str, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """`run_mcp.py --login vault` with `browser` as `$BROWSER`; no model is needed to log in."""
    args = ["--mcp-config", str(config), "--login", "vault"]
    return run_cli(args, tmp_path, base_url=None, extra_env={"BROWSER": browser}, **kw)
