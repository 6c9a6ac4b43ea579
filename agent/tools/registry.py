"""All tool servers at once: concurrent connects, namespaced names, calls by public name.

The names and the model's declarations are made in agent/tools/declarations.py; the registry
rebuilds them once per change of the tool set (connect, re-listing, /servers, /logout).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

import anyio
import mcp.types as types
from anyio.abc import TaskGroup

from agent.auth.login import LoginHost
from agent.auth.provider import auth_words
from agent.common.errors import ToolServerError
from agent.common.redact import PATTERNS_ONLY, Redactor
from agent.config.settings import ServerConfig, Settings
from agent.tools.base import (
    DEFAULT_MAX_TOOLS,
    MAX_ATTEMPTS,
    NO_HOOKS,
    ProgressFn,
    ServerHooks,
    ServerStatus,
    ToolServer,
)
from agent.tools.declarations import assign_names, openai_tool
from agent.tools.mcp import ClientCallbacks, MCPServerConnection, MessageHandler
from agent.tools.prestart import Prestarts
from agent.tools.results import Observation, error_observation, to_observation
from agent.tools.server_errors import ServerStopped, describe_exception
from agent.tools.tasks import TaskBoard, TaskFn, TaskState, TaskWatch
from agent.tools.toolspec import ToolSpec

REFRESH_DEBOUNCE = 0.25  # server-everything sends five list_changed in a burst at connect
TOOL_LIMIT = 128  # OpenAI's endpoint refuses more tools in one request
TASKS_LIST_TIMEOUT = 10.0  # seconds a server gets to list its tasks for /tasks
CALL_GRACE = 0.5  # seconds past tool_timeout before we stop waiting for a hung server
SETTLE_TIMEOUT = 10.0  # longest a model request waits for announced re-listings

T = TypeVar("T")
ListKind = Literal["tools", "prompts", "resources"]
ListListener = Callable[[str, ListKind], Awaitable[None]]
# Runs one (server, tool)'s call elsewhere: its result, or None to let the server run it.
ToolRoute = Callable[[dict[str, Any]], Awaitable[types.CallToolResult | None]]
_LIST_CHANGED: dict[type, ListKind] = {
    types.ToolListChangedNotification: "tools",
    types.PromptListChangedNotification: "prompts",
    types.ResourceListChangedNotification: "resources",
}


@dataclass(eq=False)
class _Refresh:
    """One server's coming re-listing: notifications coalesce here during the debounce."""

    kinds: set[ListKind]
    now: anyio.Event = field(default_factory=anyio.Event)  # skip the rest of the debounce
    done: anyio.Event = field(default_factory=anyio.Event)
    waited_out: bool = False  # a settle() gave up on it once: later ones do not wait again


def make_server(
    config: ServerConfig,
    *,
    connect_timeout: float,
    log_dir: Path,
    environ: Mapping[str, str],
    message_handler: MessageHandler | None = None,
    callbacks: Callable[[str], ClientCallbacks] | None = None,
    redactor: Redactor = PATTERNS_ONLY,
    login: LoginHost | None = None,
    apps: bool = False,
    prestarts: Prestarts | None = None,
    hooks: ServerHooks = NO_HOOKS,
    max_tools: int = DEFAULT_MAX_TOOLS,
) -> ToolServer:
    """The server `config` describes; a stdio server started before the imports is
    adopted from `prestarts`. `hooks`: what it tells its owner (agent/tools/base.py)."""
    if config.type == "openapi":
        from agent.tools.openapi import OpenAPIServer  # only loaded when used

        return OpenAPIServer(
            config,
            connect_timeout=connect_timeout,
            redactor=redactor,
            hooks=hooks,
            max_tools=max_tools,
        )
    return MCPServerConnection(
        config,
        connect_timeout=connect_timeout,
        log_dir=log_dir,
        environ=environ,
        message_handler=message_handler,
        callbacks=callbacks(config.name) if callbacks is not None else None,
        redactor=redactor,
        login=login,
        apps=apps,
        prestarted=prestarts.take(config) if prestarts is not None else None,
        hooks=hooks,
        max_tools=max_tools,
    )


def _unknown_trusted(server: str, unknown: list[str], tools: list[str]) -> str:
    """A `trust` entry that names no tool of the server: a typo approves nothing."""
    said = []
    for name in unknown:
        close = difflib.get_close_matches(name, tools, n=1, cutoff=0.6)
        said.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return f"server '{server}': trust names tools it does not have: {', '.join(said)}"


class ToolRegistry:
    """Owns every tool server connection for the lifetime of an `async with` block."""

    def __init__(
        self,
        settings: Settings,
        *,
        environ: Mapping[str, str] | None = None,
        reserved_names: Iterable[str] = (),
        callbacks: Callable[[str], ClientCallbacks] | None = None,
        prestarts: Prestarts | None = None,
        login: LoginHost | None = None,
        apps: bool = False,
        on_slow_start: Callable[[str], None] | None = None,
    ) -> None:
        """`callbacks(server_name)` answers that server's requests (sampling, ...);
        `prestarts` holds stdio servers started before the imports, for their connections;
        `login` says whether a server that needs a login may ask a person (default: never);
        `on_slow_start` is told why a server is slow to start (a launcher downloading it)."""
        self.settings = settings
        self._environ = os.environ if environ is None else environ
        self._reserved = frozenset(reserved_names)
        self.log_dir = settings.state_dir / "logs"
        # Every secret in the settings (and secret-named variables) is masked in what we write.
        self.redact = settings.redactor(self._environ)
        self._on_slow_start = on_slow_start
        # MCP log messages (server, line), for a front end that shows them (-v). Attached
        # once the front end exists (the REPL), after the connects, so start-up's log lines
        # stay in the servers' log files.
        self.log_listener: Callable[[str, str], None] | None = None
        self.servers: dict[str, ToolServer] = {
            cfg.name: make_server(
                cfg,
                connect_timeout=settings.agent.connect_timeout,
                log_dir=self.log_dir,
                environ=self._environ,
                message_handler=self._notification_handler(cfg.name),
                callbacks=callbacks,
                redactor=self.redact,
                login=login,
                apps=apps,
                prestarts=prestarts,
                hooks=self._hooks(cfg.name),
                max_tools=settings.agent.max_tools_per_server,
            )
            for cfg in settings.servers
        }
        # Told (server, uri) when a server says a resource it publishes was updated.
        self.update_listeners: list[Callable[[str, str], Coroutine[Any, Any, None]]] = []
        # Told (server, kind) after a server's prompts or resources changed (the catalog).
        self.list_listeners: list[ListListener] = []
        self._queued: dict[str, _Refresh] = {}  # waiting out the debounce, by server
        self._unsettled: set[_Refresh] = set()  # queued or running
        self.refreshes: dict[str, int] = {}
        self.tasks = TaskBoard()  # running and recent tasks, for /tasks
        self.warnings: list[str] = []  # worth telling the user at start (not failures)
        self._specs: dict[str, list[ToolSpec]] = {}
        self.tools: dict[str, ToolSpec] = {}
        self._routes: dict[tuple[str, str], ToolRoute] = {}
        self.app_only: list[ToolSpec] = []  # MCP Apps tools only their page may call
        self._openai_tools: list[dict[str, Any]] = []
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> ToolRegistry:
        self._tg = await anyio.create_task_group().__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        assert self._tg is not None
        return await self._tg.__aexit__(exc_type, exc, tb)

    def hasten_shutdown(self) -> None:
        """The process ends once the servers are closed: each may take less time to stop."""
        for server in self.servers.values():
            server.hasten_shutdown()

    async def aclose(self) -> None:
        """Close all servers concurrently, shielded so Ctrl-C cannot leak processes."""
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for server in self.servers.values():
                    if server.status.state not in ("idle", "closed"):
                        tg.start_soon(server.close)

    async def connect_all(self) -> list[ToolServerError]:
        """Connect every server concurrently; return the failures, keep the rest working."""
        failures: list[ToolServerError] = []

        async def connect(server: ToolServer) -> None:
            try:
                await self._connect(server)
            except ToolServerError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            for server in self.servers.values():
                tg.start_soon(connect, server)
        self._rebuild()
        if len(self.tools) > TOOL_LIMIT and self.settings.agent.tool_search == "off":
            self.warnings.append(
                f"{len(self.tools)} tools in all: OpenAI's endpoint accepts at most {TOOL_LIMIT} "
                "(others vary); trim them with include_tools / exclude_tools, or turn on "
                "[agent] tool_search"
            )
        order = list(self.servers)
        return sorted(failures, key=lambda e: order.index(e.server))

    async def _connect(self, server: ToolServer) -> None:
        assert self._tg is not None, "use the registry inside `async with`"
        await server.start(self._tg)
        try:
            with anyio.fail_after(server.connect_timeout):
                specs = await server.list_tools()
        except Exception as exc:
            cause = "no answer" if isinstance(exc, TimeoutError) else describe_exception(exc)
            cause = self.redact(cause)
            await server.fail(cause)
            raise ToolServerError(server.name, "list_tools", cause) from None
        self._keep(server, specs)
        if server.listing_cut:
            self.warnings.append(
                f"server '{server.name}' {server.listing_cut}: only the first "
                f"{server.max_tools} are used (raise [agent] max_tools_per_server, or pick "
                "them with include_tools)"
            )
        self.warnings.extend(server.list_warnings)
        named = set(server.config.include_tools or ()) | set(server.config.exclude_tools)
        if unknown := sorted(named - {s.name for s in specs}):
            listed = ", ".join(sorted(s.name for s in specs)[:20]) or "none"
            self.warnings.append(
                f"server '{server.name}': include_tools/exclude_tools name tools it does not "
                f"have: {', '.join(unknown)} (it has: {listed})"
            )
        trusted = server.config.trust if isinstance(server.config.trust, tuple) else ()
        if unknown := [t for t in trusted if t not in {s.name for s in specs}]:
            self.warnings.append(_unknown_trusted(server.name, unknown, [s.name for s in specs]))

    def _hooks(self, server_name: str) -> ServerHooks:
        """What server `server_name` tells the registry: a restarted server may list other
        tools; why it is slow to start; its log lines."""
        return ServerHooks(
            on_reconnected=functools.partial(self._schedule_refresh, server_name),
            on_slow_start=self._on_slow_start,
            on_log=functools.partial(self._server_log, server_name),
        )

    def _server_log(self, server_name: str, line: str) -> None:
        if self.log_listener is not None:
            self.log_listener(server_name, line)

    def _notification_handler(self, server_name: str) -> MessageHandler:
        async def handle(message: Any) -> None:
            if (kind := _LIST_CHANGED.get(type(message))) is not None:
                self._schedule_refresh(server_name, kind)
            elif isinstance(message, types.ResourceUpdatedNotification) and self._tg:
                # Told in tasks of their own: a listener may re-read the resource, which
                # needs this connection's message loop, the one running this handler.
                for listener in self.update_listeners:
                    self._tg.start_soon(listener, server_name, str(message.params.uri))

        return handle

    def _schedule_refresh(self, server_name: str, kind: ListKind = "tools") -> None:
        """Coalesce a burst of list_changed notifications into one re-listing."""
        if self._tg is None:
            return
        queued = self._queued.get(server_name)
        if queued is not None:
            queued.kinds.add(kind)
            return
        queued = self._queued[server_name] = _Refresh({kind})
        self._unsettled.add(queued)
        self._tg.start_soon(self._debounced_refresh, server_name, queued)

    async def _debounced_refresh(self, server_name: str, refresh: _Refresh) -> None:
        try:
            with anyio.move_on_after(REFRESH_DEBOUNCE):
                await refresh.now.wait()
            del self._queued[server_name]  # a notification from now on means another round
            if self.servers[server_name].status.state == "ready":
                await self._relist(server_name, refresh.kinds)
        finally:
            self._unsettled.discard(refresh)
            refresh.done.set()

    async def _relist(self, server_name: str, kinds: set[ListKind]) -> None:
        server = self.servers[server_name]
        if "tools" in kinds:
            try:
                with anyio.fail_after(server.connect_timeout):
                    await self.refresh(server_name)
            except Exception as exc:
                server.note_error(self.redact(f"refresh failed: {describe_exception(exc)}"))
            else:
                self.refreshes[server_name] = self.refreshes.get(server_name, 0) + 1
        for kind in sorted(kinds - {"tools"}):
            for listener in self.list_listeners:
                await listener(server_name, kind)

    async def settle(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """Run announced re-listings now and wait for them (bounded).

        A tool call that makes its server add tools sends list_changed before its result;
        the next model request must already carry those tools, not wait out the debounce.
        """
        pending = [refresh for refresh in self._unsettled if not refresh.waited_out]
        if not pending:
            return
        for refresh in pending:
            refresh.now.set()
        with anyio.move_on_after(timeout):
            for refresh in pending:
                await refresh.done.wait()
        for refresh in pending:  # a server that does not answer its re-listing stalls once
            refresh.waited_out = not refresh.done.is_set()

    async def reconnect(self, server_name: str) -> None:
        """Close one server and connect it afresh (after /login); raises ToolServerError."""
        server = self.servers[server_name]
        if server.status.state not in ("idle", "closed"):
            await server.close(grace=1)
        self._specs.pop(server_name, None)
        try:
            await self._connect(server)
        finally:
            self._rebuild()

    async def disconnect(self, server_name: str, why: str) -> None:
        """Close one server and drop its tools (after /logout)."""
        server = self.servers[server_name]
        await server.switch_off(why)
        self._specs.pop(server_name, None)
        self._rebuild()

    async def disable(self, server_name: str) -> None:
        """Off for the rest of the session (`/servers disable NAME`): stopped, its tools
        gone from the model's list; the config file is not touched."""
        server = self.servers[server_name]
        self._specs.pop(server_name, None)
        self._rebuild()
        await server.switch_off()

    async def enable(self, server_name: str) -> ToolServerError | None:
        """On again (`/servers enable NAME`): connected afresh; the failure, if any."""
        try:
            await self._connect(self.servers[server_name])
        except ToolServerError as exc:
            return exc
        self._rebuild()
        return None

    async def refresh(self, server_name: str) -> None:
        """Re-list one server's tools (after a list_changed notification)."""
        server = self.servers[server_name]
        self._keep(server, await server.list_tools())
        self._rebuild()

    def _keep(self, server: ToolServer, specs: list[ToolSpec]) -> None:
        self._specs[server.name] = server.wanted_tools(specs)

    def _rebuild(self) -> None:
        """The model's tools by public name. A tool its server made visible to its app
        alone (MCP Apps) gets no public name: the model can neither see nor call it."""
        pairs = [
            (name, spec.name)
            for name in self.servers
            for spec in sorted(self._specs.get(name, []), key=lambda s: s.name)
            if spec.for_model
        ]
        by_pair = {(s.server, s.name): s for specs in self._specs.values() for s in specs}
        names = assign_names(pairs, self._reserved)
        self.tools = {public: by_pair[pair] for public, pair in names.items()}
        self.app_only = [spec for (_, _), spec in sorted(by_pair.items()) if not spec.for_model]
        self._openai_tools = [openai_tool(public, spec) for public, spec in self.tools.items()]

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tool list for the model; rebuilt only when the set of tools changes."""
        return self._openai_tools

    def server_tool(self, server: str, tool: str) -> ToolSpec | None:
        """A tool by its server's own name, app-only ones included (for an app's calls)."""
        for spec in self._specs.get(server, []):
            if spec.name == tool:
                return spec
        return None

    def public_name(self, server: str, tool: str) -> str | None:
        for public, spec in self.tools.items():
            if spec.server == server and spec.name == tool:
                return public
        return None

    def auth_words(self, server_name: str) -> str:
        """How the server logs in, and whether it is logged in (for /servers)."""
        server = self.servers[server_name]
        challenged = server.auth is None or server.auth.challenged
        return auth_words(server.config, server.token_store, challenged)

    def statuses(self) -> list[ServerStatus]:
        return [server.status for server in self.servers.values()]

    def instructions(self) -> dict[str, str]:
        return {n: s.instructions for n, s in self.servers.items() if s.instructions}

    def route(self, server: str, tool: str, handler: ToolRoute) -> None:
        """Run `server`'s `tool` through `handler` from now on, where it answers (not None):
        an ACP editor's `fs/*` in place of the bundled server's file tools
        (agent.cli.acp_files). The call still comes through the gate (hooks, approval,
        record) and this method, and its result becomes an observation as a server's does
        (marked untrusted, cut to size); only where it runs changes."""
        self._routes[(server, tool)] = handler

    async def call(
        self,
        public_name: str,
        arguments: dict[str, Any],
        *,
        progress: ProgressFn | None = None,
        spec: ToolSpec | None = None,
        meta: dict[str, Any] | None = None,
        on_task: TaskFn | None = None,
    ) -> Observation:
        """Call a tool by public name. Every failure becomes an error observation.
        `meta`: the request's `_meta` (the trace context of the call's span).

        `spec` is the (server, tool) the name stood for when the call was approved: that
        exact tool runs, even if a list change has since given the name to another one.

        Deadlines: a reconnect gets the server's connect timeout per attempt; the call itself
        gets tool_timeout (sent to the server as the request deadline) plus CALL_GRACE, so a
        hung server never holds a call longer than that. A call that may become a task is
        held up to [agent] task_timeout instead; its own loop bounds each wait for a sign of
        life by tool_timeout (agent.tools.tasks).
        """
        spec = spec or self.tools.get(public_name)
        if spec is None or spec.server not in self.servers:
            return error_observation(None, f"unknown tool '{public_name}'")
        server = self.servers[spec.server]
        timeout = server.config.tool_timeout or self.settings.agent.tool_timeout
        if (route := self._routes.get((spec.server, spec.name))) is not None:
            routed: types.CallToolResult | None = None
            with anyio.move_on_after(timeout) as waited:
                routed = await route(arguments)
            if waited.cancelled_caught:
                return error_observation(None, f"tool '{spec.name}' timed out after {timeout:g} s")
            if routed is not None:
                return to_observation(routed, spec.server, self.settings.agent.max_observe)
        return await self._call_server(spec, arguments, progress, meta, on_task)

    async def _call_server(
        self,
        spec: ToolSpec,
        arguments: dict[str, Any],
        progress: ProgressFn | None,
        meta: dict[str, Any] | None,
        on_task: TaskFn | None,
    ) -> Observation:
        server = self.servers[spec.server]
        timeout = server.config.tool_timeout or self.settings.agent.tool_timeout
        watch = TaskWatch(self.settings.agent.task_timeout, self._task_observer(on_task))
        try:
            with anyio.fail_after(server.connect_timeout * MAX_ATTEMPTS + 10):
                await server.ensure_connected()
            longest = max(watch.limit, timeout) if server.may_become_task(spec.name) else timeout
            result = await self._detached(
                lambda: server.call_tool(
                    spec.name,
                    arguments,
                    timeout=timeout,
                    progress=progress,
                    meta=meta,
                    task=watch,
                ),
                longest + CALL_GRACE,
            )
        except TimeoutError:
            return error_observation(
                spec.server,
                f"tool '{spec.name}' timed out after {timeout:g} s "
                "(the server may still be working on it)",
            )
        except ServerStopped as exc:
            return error_observation(spec.server, self._stopped_message(spec, exc))
        except ToolServerError as exc:
            return error_observation(
                spec.server, self.redact(f"server '{spec.server}' is unavailable: {exc.cause}")
            )
        except Exception as exc:
            server.note_error(self.redact(describe_exception(exc)))
            return error_observation(
                spec.server, f"tool '{spec.name}' failed: {server.status.error}"
            )
        return to_observation(result, spec.server, self.settings.agent.max_observe)

    async def _detached(self, call: Callable[[], Awaitable[T]], deadline: float) -> T:
        """Await `call` in a task of its own, giving up on it after `deadline` seconds.

        When a request times out the SDK tells the server with a shielded notification that
        may wait seconds on a frozen server; a caller awaiting the call directly would wait
        with it. Here the caller leaves at the deadline (or when cancelled, e.g. Ctrl-C)
        and that cleanup ends in the background.
        """
        assert self._tg is not None, "use the registry inside `async with`"
        outcome: list[tuple[bool, Any]] = []
        done = anyio.Event()
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                try:
                    outcome.append((True, await call()))
                except Exception as exc:
                    outcome.append((False, exc))
                finally:
                    done.set()

        self._tg.start_soon(run)
        try:
            with anyio.fail_after(deadline):
                await done.wait()
        finally:
            if not done.is_set():
                scope.cancel()
        if not outcome:
            raise TimeoutError  # cancelled from outside before it answered
        ok, value = outcome[0]
        if ok:
            return value
        raise value

    async def refresh_tasks(self) -> list[TaskState]:
        """The task board, with what servers that list tasks (`tasks/list`) say; a server
        that fails to answer is left out (LIST_TIMEOUT each, concurrently)."""

        async def ask(server: ToolServer) -> None:
            with contextlib.suppress(Exception), anyio.fail_after(TASKS_LIST_TIMEOUT):
                self.tasks.merge_listed(await server.list_tasks())

        async with anyio.create_task_group() as tg:
            for server in self.servers.values():
                if server.status.state == "ready":
                    tg.start_soon(ask, server)
        return self.tasks.all()

    def _task_observer(self, on_task: TaskFn | None) -> TaskFn:
        """Each task update goes on the board (/tasks) and to the caller (live display)."""

        async def observe(state: TaskState) -> None:
            self.tasks.note(state)
            if on_task is not None:
                await on_task(state)

        return observe

    def _stopped_message(self, spec: ToolSpec, exc: ServerStopped) -> str:
        head = (
            f"server '{spec.server}' stopped while running tool '{spec.name}' ({exc.reason}); "
            "the call may or may not have taken effect."
        )
        if exc.down:
            status = self.servers[spec.server].status
            return self.redact(f"{head} The server is now down: {status.error}")
        return f"{head} It will be restarted on the next call."
