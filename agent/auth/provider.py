"""One server's OAuth: the SDK's provider, with what a terminal agent needs around it.

The SDK's `OAuthClientProvider` (and its client-credentials sibling) runs the protocol:
metadata discovery, issuer checks, PKCE, `state`, `iss`, the resource parameter, scopes and
step-up, client ID metadata documents, dynamic registration, refresh. What we add:

- the headless rule: a flow that would need a person fails at once with `LoginRequired`;
- the loopback listener, bound just before the flow registers a client or asks for a code,
  so `redirect_uris` names the port in use, and logins that take turns;
- token expiry and the authorization server's metadata kept across restarts (see store);
- an error that names the step that failed and what the server answered.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import AsyncGenerator, Callable
from typing import Any
from urllib.parse import urlparse

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.exceptions import OAuthRegistrationError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyHttpUrl, AnyUrl

import agent
from agent.auth.endpoints import InsecureEndpoint, check_metadata, require_https
from agent.auth.login import (
    NEEDS_LOGIN,
    CallbackListener,
    LoginFailed,
    LoginHost,
    LoginRequired,
    may_open_browser,
    open_browser,
)
from agent.auth.store import FileTokenStorage
from agent.common.sdk_private import ProviderHooks
from agent.config.settings import OAuthConfig, ServerConfig

CLIENT_NAME = "mcp-agent"
ANSWER_LIMIT = 300  # characters of a failing server answer quoted in an error


class NoLoginOffered(Exception):
    """A 401 that names no way to log in, in a run that may not explore one."""


class _AgentFlow(ProviderHooks):
    """Mixed into the SDK's providers (see module docstring); the SDK's private steps reach
    these hooks through agent.common.sdk_private."""

    context: Any

    def _setup(self, name: str, config: OAuthConfig, storage: FileTokenStorage, host: LoginHost):
        self.server_name = name
        self.oauth = config
        self.storage = storage
        self.host = host
        self.problem: str | None = None  # the last failure, phrased for the user
        self.waiting_on_person = False
        self.on_waiting: Callable[[bool], None] | None = None
        self.step = ""  # the login step in flight, for a connect that takes long
        # The MCP endpoint answered 401: only then does this server need a login at all
        # (FastMCP, mcp-proxy, supergateway take requests without one).
        self.challenged = False
        self._holding_turn = False
        self._listener: CallbackListener | None = None
        self._authorization_url = ""
        # A login step whose request never got an answer (the token endpoint unreachable):
        # httpx closes the flow without telling it why, so `explain` finds the cause.
        self._unanswered: tuple[str, str] | None = None

    # -- restoring what the SDK forgets across restarts

    async def after_initialize(self) -> None:
        self.context.token_expiry_time = self.storage.expires_at()
        if self.context.oauth_metadata is None:
            self.context.oauth_metadata = self.storage.metadata()

    def after_token_response(self) -> None:
        self.storage.set_metadata(self.context.oauth_metadata)

    def before_authorization(self) -> None:
        """Configured scopes are asked for on top of the ones the server names."""
        check_metadata(self.context.oauth_metadata)  # before the URL is shown or opened
        if self.oauth.scope:
            chosen = self.context.client_metadata.scope
            self.context.client_metadata.scope = union_scopes(self.oauth.scope, chosen)

    async def before_refresh(self) -> None:
        """Refresh under the store's lock, with the freshest refresh token: another run may
        have used ours meanwhile, and a server that rotates them takes each one once."""
        await self.storage.lock()
        stored = await self.storage.get_tokens()
        current = self.context.current_tokens
        if (
            stored is not None
            and stored.refresh_token
            and (current is None or stored.refresh_token != current.refresh_token)
        ):
            self.context.current_tokens = stored
            self.context.token_expiry_time = self.storage.expires_at()

    def after_refresh(self) -> None:
        self.storage.unlock()  # the new tokens are stored (or the refresh failed)

    # -- the flow, watched

    async def watch_flow(
        self, request: httpx2.Request, flow: AsyncGenerator[httpx2.Request, httpx2.Response]
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        step, answer = "request", ""
        asked = refreshed = False
        self._unanswered = None
        try:
            outgoing = await flow.__anext__()
            while True:
                step = _step_of(outgoing, request, self.context)
                self.step = "" if outgoing is request else step
                if outgoing is not request:  # to the login server: https only
                    check_metadata(self.context.oauth_metadata)
                    if step != _PROTECTED_RESOURCE:  # the MCP server's own address
                        require_https(str(outgoing.url), step)
                try:
                    response = yield outgoing
                except GeneratorExit:  # httpx could not send it (or the caller left)
                    if outgoing is not request:
                        self._unanswered = (step, str(outgoing.url))
                    raise
                if outgoing is request and response.status_code == 401:
                    self.challenged = True
                if (
                    outgoing is request
                    and response.status_code == 401
                    and not refreshed
                    and self.context.can_refresh_token()
                ):
                    # The server no longer takes the access token (expired early, or we
                    # lost track of its expiry): a refresh token still beats a new login.
                    refreshed, step = True, "token refresh"
                    if await self.take_refresh_response((yield await self.refresh_request())):
                        self.add_auth_header(request)
                        response = yield request
                if outgoing is request and not asked and _needs_person(response):
                    asked = True
                    await self._before_person(response)
                elif outgoing is not request and not response.is_success:
                    await response.aread()
                    answer = f"HTTP {response.status_code} {response.text[:ANSWER_LIMIT]}".strip()
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except LoginRequired as exc:
            self.problem = str(exc)
            raise
        except NoLoginOffered:
            self.problem = None  # the endpoint's own 401 is the news
            raise
        except Exception as exc:
            self.problem = _phrase(exc, step, answer)
            raise
        finally:
            self.step = ""
            self.storage.unlock()  # a refresh whose answer never came
            await flow.aclose()
            await self._after_person()

    def explain(self, failure: BaseException) -> str | None:
        """The connect `failure` in the login's words, if the login is what failed: the
        step's own problem, or the login server that was never reached (its URL and the
        transport's error), rather than the MCP endpoint's 401 that started the login
        and whose advice would be to log in again."""
        if self.problem:
            return self.problem
        if self._unanswered is None:
            return None
        step, url = self._unanswered
        cause = _transport_error(failure)
        why = f"{type(cause).__name__}: {cause}" if cause is not None else "no answer"
        return f"login failed at {step}: could not reach {url} ({why})"

    def _grant(self) -> str:
        return self.oauth.grant

    async def _before_person(self, response: httpx2.Response) -> None:
        """A 401 that only a person can answer: refuse when headless, else get ready."""
        if self._grant() != "authorization_code":
            return
        if not self.host.interactive and "www-authenticate" not in response.headers:
            raise NoLoginOffered  # a static-token server, most likely: its 401 says so
        if not self.host.interactive:
            raise LoginRequired(
                f"{NEEDS_LOGIN}: run `run_mcp.py --login {self.server_name}` at a terminal"
            )
        # Another server's login may hold the turn: a person is busy with it, so the
        # connect clock waits too. Once it is ours the clock runs again until our own
        # login is shown (`_redirect`): discovery and registration need no person.
        self._set_waiting(True)
        try:
            await self.host.turn.acquire()
        finally:
            self._set_waiting(False)
        self._holding_turn = True
        await self._listen()  # on failure `_after_person` gives the turn back

    async def _after_person(self) -> None:
        self._set_waiting(False)
        if self._listener is not None:
            with anyio.CancelScope(shield=True):
                await self._listener.aclose()
            self._listener = None
        if self._holding_turn:
            self._holding_turn = False
            self.host.turn.release()

    def _set_waiting(self, waiting: bool) -> None:
        self.waiting_on_person = waiting
        if self.on_waiting is not None:
            self.on_waiting(waiting)

    async def _listen(self) -> None:
        """Bind the callback listener; a stored registration keeps its port if it can
        (otherwise the client registers afresh on a port of the OS's choosing)."""
        fixed = self.oauth.redirect_port
        port = fixed or _registered_port(self.context.client_info)
        listener = CallbackListener(port)
        try:
            await listener.bind()
        except LoginFailed:
            if fixed or not port:
                raise
            self.context.client_info = None
            listener = CallbackListener(0)
            await listener.bind()
        self._listener = listener
        self.context.client_metadata.redirect_uris = [AnyUrl(listener.redirect_uri)]

    async def _redirect(self, url: str) -> None:
        """Show the URL; the browser is opened by `_callback`, once the callback is served
        (a console browser command runs until our callback has answered it)."""
        self.host.notify(f"Log in to '{self.server_name}' in your browser: {url}")
        self._authorization_url = url
        self._set_waiting(True)  # a person is involved from here on

    async def _open(self, url: str) -> None:
        if self.host.browser is not None:
            await self.host.browser(url)
        elif may_open_browser():
            with contextlib.suppress(Exception):  # printing the URL is enough
                await open_browser(url)

    async def _callback(self) -> AuthorizationCodeResult:
        listener, url = self._listener, self._authorization_url
        if listener is None:
            raise LoginFailed("the login callback listener is not running")
        async with anyio.create_task_group() as tg:
            if url:
                tg.start_soon(self._open, url)
            result = await listener.wait(self.host.timeout, self.host.paste)
            tg.cancel_scope.cancel()
        self._set_waiting(False)  # the token exchange is the login server's alone again
        return result


class AgentOAuthProvider(_AgentFlow, OAuthClientProvider):
    """Authorization code with PKCE: a person logs in once, refresh tokens do the rest."""

    def __init__(
        self, config: ServerConfig, oauth: OAuthConfig, storage: FileTokenStorage, host: LoginHost
    ) -> None:
        metadata = OAuthClientMetadata(
            client_name=CLIENT_NAME,
            client_uri=AnyHttpUrl("https://github.com/modelcontextprotocol"),
            software_id=CLIENT_NAME,
            software_version=agent.__version__,
            redirect_uris=[AnyUrl(f"http://127.0.0.1:{oauth.redirect_port or 0}/callback")],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope=oauth.scope,
        )
        super().__init__(
            server_url=config.url or "",
            client_metadata=metadata,
            storage=storage,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=oauth.client_metadata_url,
        )
        self._setup(config.name, oauth, storage, host)

    async def after_initialize(self) -> None:
        await super().after_initialize()
        if self.oauth.client_id:  # pre-registered: the configured client, never registration
            secret = self.oauth.client_secret
            self.context.client_info = OAuthClientInformationFull(
                client_id=self.oauth.client_id,
                client_secret=secret,
                redirect_uris=self.context.client_metadata.redirect_uris,
                token_endpoint_auth_method="client_secret_basic" if secret else "none",
                issuer=self.oauth.issuer,
            )


class AgentClientCredentialsProvider(_AgentFlow, ClientCredentialsOAuthProvider):
    """Machine to machine: client ID and secret, no person, works headless."""

    def __init__(
        self, config: ServerConfig, oauth: OAuthConfig, storage: FileTokenStorage, host: LoginHost
    ) -> None:
        if not oauth.client_id or not oauth.client_secret:
            raise ValueError("grant client_credentials needs client_id and client_secret")
        with warnings.catch_warnings():  # no issuer: discovery decides, as the SDK allows
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            super().__init__(
                server_url=config.url or "",
                storage=storage,
                client_id=oauth.client_id,
                client_secret=oauth.client_secret,
                scope=oauth.scope,
                issuer=oauth.issuer,
            )
        self._setup(config.name, oauth, storage, host)


Provider = AgentOAuthProvider | AgentClientCredentialsProvider


def build_provider(config: ServerConfig, storage: FileTokenStorage, host: LoginHost) -> Provider:
    """The provider for a server that logs in (`config.oauth_config()` is not None)."""
    oauth = config.oauth_config()
    assert oauth is not None
    if oauth.grant == "client_credentials":
        return AgentClientCredentialsProvider(config, oauth, storage, host)
    return AgentOAuthProvider(config, oauth, storage, host)


def _needs_person(response: httpx2.Response) -> bool:
    if response.status_code == 401:
        return True
    return (
        response.status_code == 403
        and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )


def _registered_port(client: OAuthClientInformationFull | None) -> int:
    uris = (client.redirect_uris or []) if client is not None else []
    port = urlparse(str(uris[0])).port if uris else None
    return port or 0


_PROTECTED_RESOURCE = "metadata discovery (protected resource)"


def _step_of(outgoing: httpx2.Request, original: httpx2.Request, context: Any) -> str:
    if outgoing is original:
        return "request"
    path = outgoing.url.path
    if "/.well-known/oauth-protected-resource" in path:
        return _PROTECTED_RESOURCE
    if "/.well-known/" in path:
        return "metadata discovery (authorization server)"
    metadata = context.oauth_metadata
    registration = str(metadata.registration_endpoint) if metadata else ""
    if str(outgoing.url) == registration or path.endswith("/register"):
        return "registration"
    return "token"


def _transport_error(failure: BaseException) -> BaseException | None:
    """The httpx transport error (or OSError) behind `failure`: through ExceptionGroups,
    causes and contexts, as the SDK's transport wraps it."""
    seen: set[int] = set()
    todo = [failure]
    while todo:
        exc = todo.pop(0)
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, httpx2.TransportError | OSError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            todo.extend(exc.exceptions)
        todo.extend(e for e in (exc.__cause__, exc.__context__) if e is not None)
    return None


def _phrase(exc: Exception, step: str, answer: str) -> str:
    if isinstance(exc, InsecureEndpoint):
        return f"login refused at {exc.step}: {exc}"
    if isinstance(exc, LoginFailed):
        step = "authorization"
    elif isinstance(exc, OAuthRegistrationError):
        step = "registration"
    elif isinstance(exc, OAuthTokenError):
        step = "token"
    elif isinstance(exc, OAuthFlowError) and "issuer" in str(exc).lower():
        step = "metadata discovery" if "metadata" in str(exc).lower() else "authorization"
    elif isinstance(exc, OAuthFlowError) and "state" in str(exc).lower():
        step = "authorization"
    elif isinstance(exc, httpx2.HTTPError):
        return f"login failed at {step}: {type(exc).__name__}: {exc}"
    text = str(exc).strip() or type(exc).__name__
    said = answer.split(" ", 2)[2:]  # the body after "HTTP <status>", if any
    if answer and not (said and said[0] in text):
        text = f"{text} (the server answered {answer})"
    return f"login failed at {step}: {text}"


def expires_in_words(expires_at: float | None) -> str:
    if expires_at is None:
        return "no expiry given"
    left = expires_at - time.time()
    stamp = time.strftime("%H:%M", time.localtime(expires_at))
    return f"expired at {stamp}" if left <= 0 else f"expires at {stamp}"


def forget(provider: Provider, *, delete: bool) -> bool:
    """Drop the tokens in memory and on disk (`delete`: the client registration too, as
    /logout does); whether there was anything to drop."""
    provider.context.clear_tokens()
    provider.reread_store()
    dropped = provider.storage.delete() if delete else provider.storage.forget_tokens()
    provider.challenged = provider.challenged or dropped  # it had tokens: it takes logins
    return dropped


def auth_words(
    config: ServerConfig, storage: FileTokenStorage | None, challenged: bool = True
) -> str:
    """A server's login as /servers shows it; `challenged`: it answered 401 (a server
    that never asked for credentials needs no login, whatever `oauth` allows)."""
    if config.type not in ("http", "sse"):
        return ""
    if any(k.lower() == "authorization" for k in config.headers):
        return "static header"
    oauth = config.oauth_config()
    if oauth is None or storage is None:
        return "none"
    state = storage.state()
    if oauth.grant == "client_credentials":
        return "client credentials" + (
            f", {expires_in_words(state.expires_at)}" if state.logged_in else ""
        )
    if not state.logged_in:
        return "needs login" if challenged else "none"
    return f"logged in, {expires_in_words(state.expires_at)}"
