"""One MCP server connection over stdio, SSE or streamable HTTP.

Everything the connection writes goes to `<state>/logs/<server>.log`, redacted: the
server's stderr (through a pipe we read, not straight to the file), its MCP log messages,
and the SDK's own log records for this connection. The end of the transport's receive
stream is the one signal that the server is gone, whatever the transport: the stdio
process exited, or the HTTP/SSE stream broke because the server stopped or restarted.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import mcp.types as types
import pydantic
from mcp import Client, MCPError
from mcp.client.session import ElicitationFnT, ListRootsFnT, MessageHandlerFnT, SamplingFnT
from mcp.client.streamable_http import MCP_SESSION_ID
from mcp.client.subscriptions import (
    ListenNotSupportedError,
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp_types.jsonrpc import METHOD_NOT_FOUND, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

import agent
from agent.auth.login import NEEDS_LOGIN, LoginHost
from agent.auth.provider import build_provider
from agent.auth.store import FileTokenStorage
from agent.common.redact import PATTERNS_ONLY, Redactor
from agent.config.settings import ServerConfig
from agent.tools import server_card
from agent.tools.base import DEFAULT_MAX_TOOLS, NO_HOOKS, ProgressFn, ServerHooks, ToolServer
from agent.tools.extensions import declared_extensions
from agent.tools.mcp_http import (
    _ERA_NAMES,
    _LOGIN_OR_HEADER_HINT,
    _OAUTH_OFF_HINT,
    _era_refused,
    _http_replies,
    _HttpReplies,
    _jsonrpc_method,
    combined_eras,
    http_hint,
)
from agent.tools.mcp_listing import ToolListing, all_pages
from agent.tools.mcp_stdio import StopGrace, ToolCap, _watch_end
from agent.tools.mcp_tasks import (
    call_as_legacy_task,
    declares_tasks_extension,
    follow_handle,
    legacy_task_tool,
    list_server_tasks,
)
from agent.tools.mcp_transports import OPENERS, Opening
from agent.tools.prestart import Prestarted
from agent.tools.sandbox import start_note as sandbox_start_note
from agent.tools.server_errors import ConnectProblem, ServerStopped, describe_exception
from agent.tools.server_log import ServerLog
from agent.tools.tasks import DEFAULT_TASK_LIMIT, TaskAccepted, TaskState, TaskWatch
from agent.tools.toolspec import ToolSpec

CLIENT_INFO = types.Implementation(name="mcp-agent", version=agent.__version__)
MessageHandler = MessageHandlerFnT

# 2026-07-28 servers send log messages only to requests that opt in, from this level up.
LOG_LEVEL: types.LoggingLevel = "info"
# `subscriptions/listen` events, as the notifications a handshake-era server would send.
_LISTEN_EVENTS: dict[type, Callable[[], Any]] = {
    ToolsListChanged: types.ToolListChangedNotification,
    PromptsListChanged: types.PromptListChangedNotification,
    ResourcesListChanged: types.ResourceListChangedNotification,
}


@dataclass(frozen=True)
class ClientCallbacks:
    """Server-to-client requests. Passing one is what advertises the capability."""

    sampling: SamplingFnT | None = None
    elicitation: ElicitationFnT | None = None
    list_roots: ListRootsFnT | None = None
    sampling_capabilities: types.SamplingCapability | None = None  # e.g. sampling.tools


def roots_callback(folders: Iterable[Path]) -> ListRootsFnT:
    """Offer these folders as the roots."""
    roots = [
        types.Root(uri=folder.resolve().as_uri(), name=folder.name or str(folder))  # type: ignore[arg-type]
        for folder in folders
    ]

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=list(roots))

    return list_roots


class MCPServerConnection(ToolServer):
    """A live MCP session. Server stderr and logs go to a per-server log file."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        connect_timeout: float,
        log_dir: Path,
        environ: Mapping[str, str] | None = None,
        message_handler: MessageHandler | None = None,
        callbacks: ClientCallbacks | None = None,
        redactor: Redactor = PATTERNS_ONLY,
        login: LoginHost | None = None,
        auth: httpx2.Auth | None = None,
        apps: bool = False,
        prestarted: Prestarted | None = None,
        hooks: ServerHooks = NO_HOOKS,
        max_tools: int = DEFAULT_MAX_TOOLS,
    ) -> None:
        """`auth` replaces the login `oauth` would configure (flows we do not configure)."""
        super().__init__(
            config,
            connect_timeout=connect_timeout,
            redactor=redactor,
            hooks=hooks,
            max_tools=max_tools,
        )
        self.prestarted = prestarted  # started before the imports, adopted by the first connect
        self.apps = apps  # this run shows MCP Apps' pages: declare the extension
        self._callbacks = callbacks or ClientCallbacks()
        # Roots come from the config (none unless set): the capability is declared only then.
        self.roots = config.offered_roots()
        if self.roots and self._callbacks.list_roots is None:
            self._callbacks = replace(self._callbacks, list_roots=roots_callback(self.roots))
        self._auth_override = auth
        self._login = login or LoginHost()
        self._set_auth(log_dir.parent)
        # `https://host` alone: the endpoint comes from the host's server card, read once.
        self.card: server_card.Lookup | None = None
        self.log = ServerLog(log_dir, config.name, lambda line: self.redact(line))
        self.status.log_path = str(self.log.path)
        self._environ = os.environ if environ is None else environ
        self._message_handler = message_handler
        self._client: Client | None = None
        self._http_error: str | None = None  # the last failed HTTP exchange (http transport)
        self._endpoint_path = httpx2.URL(config.url).path if config.url else ""
        self._cap = ToolCap(self.max_tools)
        self.stop_grace = StopGrace()  # a stdio server's, after its stdin closes
        self._task_support: dict[str, str | None] = {}  # execution.taskSupport (2025-11-25)

    def _set_auth(self, state_dir: Path) -> None:
        """OAuth for this endpoint when `oauth` asks for it (tokens kept per URL)."""
        if self._auth_override is None and self.config.oauth_config() is not None:
            self.token_store = FileTokenStorage(state_dir, self.config.url or "")
            self.token_store.on_secret.append(self._learn_secret)
            self.auth = build_provider(self.config, self.token_store, self._login)
            self.auth.on_waiting = self._on_waiting

    async def _read_card(self) -> None:
        """Take the endpoint and transport the host's server card names (SEP-2127)."""
        self.card = await server_card.discover(self.config.url or "", timeout=self.connect_timeout)
        card = self.card.card
        if card is None:
            return
        self.log.write(f"[agent] server card {card.source}: {card.endpoint} ({card.transport})")
        self.config = self.config.model_copy(update={"url": card.endpoint, "type": card.transport})
        self.status.transport, self.status.card = card.transport, card.summary()
        self._endpoint_path = httpx2.URL(card.endpoint).path
        self._set_auth(self.log.path.parent.parent)

    async def _open(self, stack: contextlib.AsyncExitStack) -> None:
        self.log.open(stack)
        if self.card is None and server_card.wants_card(self.config):
            await self._read_card()
        try:
            client = await self._handshake(stack)
        except Exception as exc:
            missing = self.card is not None and self.card.card is None and self.card.tried
            if not missing or (isinstance(exc, ConnectProblem) and exc.login_needed):
                raise
            assert self.card is not None
            raise ConnectProblem(f"{describe_exception(exc)}; {self.card.missing()}") from exc
        self.instructions = client.instructions
        self.status.protocol = client.protocol_version
        self.status.extensions = tuple(sorted(client.server_capabilities.extensions or {}))
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS and self._message_handler:
            # 2026-07-28 servers send no spontaneous list_changed: subscribe for them.
            listeners = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(listeners.cancel_scope.cancel)  # LIFO: before the group is exited
            listeners.start_soon(self._listen_for_changes, client)

    def _learn_secret(self, value: str) -> None:
        """A token or client secret that arrived during the run is masked from now on."""
        self.redact = Redactor.of((*self.redact.values, value))

    def _on_waiting(self, waiting: bool) -> None:
        self.set_waiting_on_person(waiting)

    def hasten_shutdown(self) -> None:
        self.stop_grace.hasten()

    def pending_step(self) -> str:
        step = self.auth.step if self.auth is not None else ""
        return f"login step: {step}" if step else ""

    async def _handshake(self, stack: contextlib.AsyncExitStack) -> Client:
        """Open the transport and shake hands in the configured era, or decide it.

        With no `mode`, the legacy `initialize` goes first (it works with every server
        released before 2026-07-28 and keeps their notifications); a server that answers it
        with a refusal is modern-only, and a second connection speaks 2026-07-28 to it. A
        refusal comes back at once on every transport, so neither kind waits on a probe.
        """
        modes = [self.config.mode] if self.config.mode else ["legacy", MODERN_PROTOCOL_VERSIONS[-1]]
        tried: list[tuple[str, str]] = []  # (era, cause)
        for mode in modes:
            client = Client(
                _watch_end(await self._transport(stack), self.loss_reporter()),
                mode=mode,
                client_info=CLIENT_INFO,
                logging_callback=self._on_log,
                log_level=LOG_LEVEL,
                message_handler=self._message_handler,
                sampling_callback=self._callbacks.sampling,
                sampling_capabilities=self._callbacks.sampling_capabilities,
                elicitation_callback=self._callbacks.elicitation,
                list_roots_callback=self._callbacks.list_roots,
                extensions=declared_extensions(apps=self.apps),
            )
            self._http_error = None
            if self.auth is not None:
                self.auth.problem = None
            try:
                self._client = await stack.enter_async_context(client)
                if mode in MODERN_PROTOCOL_VERSIONS:
                    await _discover(client)
                return client
            except Exception as exc:
                if self.auth is not None and (problem := self.auth.explain(exc)):
                    needed = problem.startswith(NEEDS_LOGIN)
                    raise ConnectProblem(problem, login_needed=needed, says_all=True) from exc
                http_error = self._http_error  # the SDK drops the status; we kept it
                cause = http_error or describe_exception(exc)
                tried.append((_ERA_NAMES.get(mode, mode), cause))
                if mode != modes[-1] and _era_refused(exc, http_error):
                    era = tried[-1][0]
                    self.log.write(f"[agent] {era}: {cause}; trying the 2026-07-28 protocol")
                    continue
                if len(tried) > 1 or self.config.mode:
                    raise ConnectProblem(combined_eras(tried)) from exc
                if http_error is not None:
                    raise ConnectProblem(http_error) from exc
                raise
        raise AssertionError("unreachable")

    async def _listen_for_changes(self, client: Client) -> None:
        """Turn `subscriptions/listen` events into the same notifications legacy servers send."""
        assert self._message_handler is not None
        try:
            async with client.listen(
                tools_list_changed=True,
                prompts_list_changed=self.supports("prompts"),
                resources_list_changed=self.supports("resources"),
            ) as subscription:
                async for event in subscription:
                    if (notification := _LISTEN_EVENTS.get(type(event))) is not None:
                        await self._message_handler(notification())
        except (ListenNotSupportedError, SubscriptionLost, MCPError, TimeoutError) as exc:
            self.log.write(f"[agent] list_changed subscription ended: {exc}")

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        started, self.prestarted = self.prestarted, None  # the first connect only
        opening = Opening(
            self.config,
            self.connect_timeout,
            self._environ,
            self.log,
            auth=self._auth_override or self.auth,
            on_response=self._note_http_error,
            prestarted=started,
            # Else the wanted ones may lie past the cap.
            tool_cap=self._cap if self.config.include_tools is None else None,
            stop=self.stop_grace,
        )
        return await OPENERS[self.config.type](opening, stack)

    async def _note_http_error(self, response: httpx2.Response) -> None:
        """Keep the status of a failed HTTP exchange: the SDK reports only that one failed.

        Only the MCP endpoint's own answers count: a login's discovery requests may well
        get a 404 that says nothing about the server's URL.
        """
        if response.is_success or response.request.url.path != self._endpoint_path:
            return
        status = response.status_code
        hint = http_hint(self.config.type, status, response.request.url.path)
        if status == 401 and self.config.oauth is False:
            hint = _OAUTH_OFF_HINT
        elif status == 401 and self.auth is not None:
            hint = _LOGIN_OR_HEADER_HINT.format(name=self.name)
        self._http_error = f"HTTP {status} {response.reason_phrase}".strip() + hint
        replies = _http_replies.get()
        if replies is not None and MCP_SESSION_ID in response.request.headers:
            replies.refused.append((_jsonrpc_method(response.request), status))

    def stderr_tail(self) -> list[str]:
        return self.log.tail()

    def start_note(self) -> str:
        return sandbox_start_note(self.config, self.log.recent())

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        source = f" {params.logger}:" if params.logger else ""
        line = self.redact(f"[{params.level}]{source} {params.data}")  # once, for both
        self.log.write(line, redacted=True)
        if self.hooks.on_log is not None:  # -v: the front end shows it too
            self.hooks.on_log(line)

    async def _connected(self) -> tuple[Client, int]:
        """The live client (reconnecting a lost one first) and its generation."""
        await self.ensure_connected()
        assert self._client is not None
        return self._client, self.generation

    async def _request(
        self, method: str, send: Callable[[Client], Awaitable[Any]], *, changes_nothing: bool
    ) -> Any:
        """Send one request, at most once unless the server provably never ran it.

        Only the transport decides that the connection is gone (its receive stream ended:
        the process exited, the stream broke); an error code or message from the server is
        the server's answer, never that signal. On streamable HTTP a server that restarted
        answers our old session id with HTTP 404, which the spec reserves for a session it
        no longer knows: it ran nothing, so the request is sent again on a new session.
        A server that rejects the session some other way (400) may or may not have run the
        request: the session is renewed, but only a request that `changes_nothing` (a
        listing, a read) is sent again.
        """
        for attempt in (1, 2):
            client, generation = await self._connected()
            replies = _HttpReplies()
            token = _http_replies.set(replies)  # the SDK posts in a copy of this context
            try:
                return await send(client)
            except MCPError:
                if self._died(generation):
                    self.connection_lost(generation, f"connection closed during {method}")
                    reason = "it exited or closed the connection during the call"
                    raise ServerStopped(self.name, reason, down=self._is_down()) from None
                unknown = replies.session_unknown(method)
                refused = None if unknown else await self._refusal_of_session(client, replies)
                if not unknown and refused is None:
                    raise
                why = "the server no longer knows our session (HTTP 404)"
                why = why if unknown else f"the server refuses our session (HTTP {refused})"
                self.connection_lost(generation, why)
                if attempt == 1 and (unknown or changes_nothing):
                    continue  # sent again on a new session
                raise ServerStopped(
                    self.name, f"{why}; it restarted?", down=self._is_down()
                ) from None
            finally:
                _http_replies.reset(token)
        raise AssertionError("unreachable")

    def _died(self, generation: int) -> bool:
        """Whether the transport of `generation` ended (only it decides that)."""
        return self.generation != generation or self._gen.lost

    def _is_down(self) -> bool:
        return self.status.state == "down"

    async def _refusal_of_session(self, client: Client, replies: _HttpReplies) -> int | None:
        """The HTTP status with which the server refuses our session, or None.

        A refusal of the request is not enough (a 400 may be about the request): a
        harmless tools/list on the same session must be refused too. server-everything
        answers an unknown session with 400, not the spec's 404.
        """
        if replies.session_refused() is None:
            return None
        probe = _HttpReplies()
        token = _http_replies.set(probe)
        try:
            with anyio.fail_after(self.connect_timeout):
                await client.list_tools(cache_mode="refresh")
        except (MCPError, TimeoutError):
            return probe.session_refused()
        finally:
            _http_replies.reset(token)
        return None

    async def list_tools(self) -> list[ToolSpec]:
        if not self.supports("tools"):  # a server of resources or prompts only
            return []
        return await self._request("tools/list", self._list_tools, changes_nothing=True)

    async def _list_tools(self, client: Client) -> list[ToolSpec]:
        listing = ToolListing(self.name, self.config, self.max_tools, self._cap)
        self.listing_cut, self.list_warnings = None, listing.warnings  # filled as it reads
        try:
            return await listing.read(client)
        finally:
            self.listing_cut = listing.cut
            self._task_support.update(listing.task_support)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        progress: ProgressFn | None = None,
        meta: dict[str, Any] | None = None,
        task: TaskWatch | None = None,
    ) -> types.CallToolResult:
        """A call, or a task when the tool asks for one (2025-11-25) or the server answers
        with one (the tasks extension); either way it is sent once."""

        async def send(client: Client) -> types.CallToolResult:
            return await client.call_tool(
                name,
                arguments,
                read_timeout_seconds=timeout,
                progress_callback=progress,
                # RequestParamsMeta is an open TypedDict (extra_items=Any): any str-keyed dict
                meta=cast(types.RequestParamsMeta | None, meta),
            )

        watch = task or TaskWatch(limit=DEFAULT_TASK_LIMIT)
        try:
            if legacy_task_tool(self._client, self._task_support.get(name)):
                return await call_as_legacy_task(
                    self, name, arguments, timeout=timeout, watch=watch, meta=meta
                )
            return await self._request("tools/call", send, changes_nothing=False)
        except TaskAccepted as accepted:
            return await follow_handle(self, name, accepted.handle, timeout=timeout, watch=watch)
        except MCPError as exc:
            if _timed_out(exc):
                raise TimeoutError from None  # our deadline, reported as such by the caller
            return error_result(self.redact(f"tool '{name}' failed: {exc}"))
        finally:
            self.log.flush()  # what the server logged during the call is on disk now

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        return await self._request(
            "resources/read", lambda c: c.read_resource(uri), changes_nothing=True
        )

    async def list_resources(self) -> list[types.Resource]:
        return await self._listing(
            "resources/list",
            lambda c, cursor: c.list_resources(cursor=cursor, cache_mode="refresh"),
            "resources",
        )

    async def list_prompts(self) -> list[types.Prompt]:
        return await self._listing(
            "prompts/list",
            lambda c, cursor: c.list_prompts(cursor=cursor, cache_mode="refresh"),
            "prompts",
        )

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return await self._listing(
            "resources/templates/list",
            lambda c, cursor: c.list_resource_templates(cursor=cursor, cache_mode="refresh"),
            "resource_templates",
        )

    async def _listing(
        self, what: str, page: Callable[[Client, str | None], Awaitable[Any]], field: str
    ) -> list[Any]:
        """Every page of one kind. A server that lacks the method (-32601) simply has none
        of that kind: mcp-server-sqlite has resources but no templates, and that is fine."""

        async def send(client: Client) -> list[Any]:
            return await all_pages(lambda cursor: page(client, cursor), field)

        try:
            return await self._request(what, send, changes_nothing=True)
        except MCPError as exc:
            if exc.code == METHOD_NOT_FOUND:
                return []
            raise

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        return await self._request(
            "prompts/get", lambda c: c.get_prompt(name, arguments), changes_nothing=True
        )

    async def subscribe(self, uri: str) -> bool:
        """Ask for `notifications/resources/updated` about `uri` (handshake-era servers that
        declare `resources.subscribe`); False when the server does not offer it."""
        client = self._client
        caps = client.server_capabilities if client is not None else None
        offered = caps is not None and caps.resources is not None and caps.resources.subscribe
        if not offered or client is None or client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return False
        with warnings.catch_warnings():  # deprecated in 2026-07-28, not in the era we speak
            warnings.simplefilter("ignore")
            await self._request(
                "resources/subscribe", lambda c: c.subscribe_resource(uri), changes_nothing=True
            )
        return True

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        name: str,
        value: str,
        context: dict[str, str] | None = None,
    ) -> list[str]:
        """The server's completions for one argument (`completion/complete`); none when the
        server does not offer completions."""
        if not self.supports("completions"):
            return []

        async def send(client: Client) -> Any:
            return await client.complete(ref, {"name": name, "value": value}, context or None)

        try:
            result = await self._request("completion/complete", send, changes_nothing=True)
        except MCPError as exc:
            if exc.code == METHOD_NOT_FOUND:
                return []
            raise
        return [str(v) for v in result.completion.values]

    def extension(self, identifier: str) -> dict[str, Any] | None:
        caps = self._client.server_capabilities if self._client is not None else None
        declared = caps.extensions if caps is not None else None
        return declared.get(identifier) if declared else None

    async def extension_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        async def send(client: Client) -> dict[str, Any]:
            request = _ExtensionRequest(method=method, params=params)
            # The SDK validates with any TypeAdapter; its TypeVar's BaseModel bound is too narrow.
            return await client.session.send_request(request, _JSON_OBJECT)  # type: ignore[type-var]

        return await self._request(method, send, changes_nothing=True)

    async def list_tasks(self) -> list[TaskState]:
        return await list_server_tasks(self, self._client)

    def may_become_task(self, tool: str) -> bool:
        client = self._client
        return legacy_task_tool(client, self._task_support.get(tool)) or declares_tasks_extension(
            client
        )

    @property
    def publishes(self) -> bool:
        return True

    def supports(self, feature: str) -> bool:
        caps = self._client.server_capabilities if self._client is not None else None
        return caps is not None and getattr(caps, feature, None) is not None


async def _discover(client: Client) -> None:
    """Ask a 2026-07-28 server what it offers (`server/discover`) and adopt its answer.

    A pinned modern era adopts a stand-in discover result with empty capabilities (the SDK
    does not probe when told the version), which would hide every tool, resource and prompt
    the server has: the spec makes `server/discover` mandatory for servers, so ask it.
    """
    mcp_session = client.session
    raw = await mcp_session.send_discover(client.protocol_version)
    mcp_session.adopt(types.DiscoverResult.model_validate(raw))


class _ExtensionRequest(types.Request[dict[str, Any] | None, str]):
    """A request of a method the SDK has no type for (an extension's)."""


_JSON_OBJECT = pydantic.TypeAdapter(dict[str, Any])


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _timed_out(exc: MCPError) -> bool:
    """The SDK's own request timeout (-32001), not a failure the server reported (whose
    text may well say "timed out" about something upstream)."""
    return exc.code == REQUEST_TIMEOUT
