"""What every tool server is: connect, list, call, close — with one owner task.

Each connection's contexts (subprocess, HTTP client, MCP session) are entered and exited
by one dedicated owner task. Callers in other tasks only send requests through it. That
keeps anyio's cancel scopes properly nested and makes shutdown safe from any task.

A connection that dies is reconnected the same way: a task owned by the server opens a new
owner task, so a caller's cancel scope (Ctrl-C, a deadline) never holds a session.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import mcp.types as types
from anyio.abc import TaskGroup

from agent.common.errors import LoginNeededError, ToolServerError
from agent.common.redact import PATTERNS_ONLY, Redactor
from agent.config.settings import ServerConfig
from agent.tools.launchers import SLOW_START_NOTICE, slow_start_message, timeout_hint
from agent.tools.launchers import connect_timeout as launcher_aware_timeout
from agent.tools.server_errors import describe_exception, login_needed, says_all, stderr_headline
from agent.tools.toolspec import ToolSpec

if TYPE_CHECKING:
    from agent.auth.provider import Provider
    from agent.auth.store import FileTokenStorage
    from agent.tools.tasks import TaskState, TaskWatch


class ProgressFn(Protocol):
    """(progress, total, message) of a running call: the SDK's `ProgressFnT`, so an MCP
    connection hands it to the SDK as it is."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


# lost: died, reconnects on the next call; down: gave up on it for this session.
State = Literal["idle", "connecting", "ready", "lost", "reconnecting", "failed", "down", "closed"]
RESTART_WINDOW = 60.0  # seconds over which restarts count towards "keeps dying"
MAX_RESTARTS = 3  # a server that dies again after this many restarts in the window is down
MAX_ATTEMPTS = 4  # failed reconnect attempts in a row before a server is down
BACKOFF_BASE = 0.5  # seconds; doubles with each recent restart or failed attempt
BACKOFF_MAX = 4.0
# A down server is tried again by a call made this long after it went down: a server being
# redeployed, or a crash loop someone fixed, comes back without restarting the session.
DOWN_RETRY_AFTER = 30.0
DEFAULT_MAX_TOOLS = 1000  # per server ([agent] max_tools_per_server)
STDERR_SEPARATOR = "; last stderr: "  # between a connect error and the server's last lines


@dataclass(frozen=True)
class ServerHooks:
    """What a server tells whoever owns it (the registry), handed over at construction.

    Given to the constructor rather than assigned afterwards, so nothing outside a server
    writes its attributes; a server without an owner (a test, a bench) tells no one.
    """

    # It connected again after it was lost: a restarted server may list other tools.
    on_reconnected: Callable[[], None] | None = None
    # "Still starting" messages (a launcher downloading its package), as they happen.
    on_slow_start: Callable[[str], None] | None = None
    # MCP log messages (redacted) for a front end that shows them (-v).
    on_log: Callable[[str], None] | None = None


NO_HOOKS = ServerHooks()


@dataclass
class ServerStatus:
    """What /servers and error reports show about one server.

    `error` is the last error (redacted); `restarts` counts successful reconnects;
    `stderr_tail` holds the last lines the server wrote before it was marked down.
    """

    name: str
    transport: str
    state: State = "idle"
    tool_count: int = 0
    error: str | None = None
    restarts: int = 0
    log_path: str | None = None
    last_restart: float | None = None  # time.time() of the latest successful reconnect
    stderr_tail: list[str] = field(default_factory=list)
    card: str | None = None  # what the host's server card says it serves (SEP-2127)
    protocol: str | None = None  # the protocol version (era) this connection speaks
    extensions: tuple[str, ...] = ()  # the MCP extensions the server declared
    source: str | None = None  # the servers file it came from (None: the command line's)


@dataclass
class _Generation:
    """One connection attempt's lifetime: its owner task and the events around it."""

    number: int
    closing: anyio.Event = field(default_factory=anyio.Event)
    ready: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    lost: bool = False
    scope: anyio.CancelScope | None = None
    error: BaseException | None = None


class ToolServer(ABC):
    """A tool server with an owner task. Subclasses implement only what differs.

    This class is the whole contract: every capability a caller may ask for (resources,
    prompts, completions, extensions, tasks, a login) is here with the answer of a server
    that lacks it, so no caller looks past it at a subclass. Its `status` changes only
    through its own methods.

    Lifecycle: `start` connects once (failure -> "failed"). A connection that dies later
    ("lost") is reconnected on the next call by a task owned by the server, with backoff; a
    server that cannot be reconnected MAX_ATTEMPTS times in a row, or dies again after
    MAX_RESTARTS restarts within RESTART_WINDOW seconds, is marked "down": calls fail at once
    until DOWN_RETRY_AFTER seconds have passed, then the next call tries it afresh.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        connect_timeout: float,
        redactor: Redactor = PATTERNS_ONLY,
        hooks: ServerHooks = NO_HOOKS,
        max_tools: int = DEFAULT_MAX_TOOLS,
    ) -> None:
        """`max_tools`: the most tools taken from this server (what it announced when it
        had more is kept in `listing_cut`)."""
        self.config = config
        self.name = config.name
        self.connect_timeout = launcher_aware_timeout(config, connect_timeout)
        self._slow_after = min(SLOW_START_NOTICE, connect_timeout, self.connect_timeout)
        self.hooks = hooks
        self.redact = redactor
        self.status = ServerStatus(
            name=config.name, transport=config.type, source=config.config_file
        )
        self.instructions: str | None = None
        self.max_tools = max_tools
        self.listing_cut: str | None = None
        self._gen = _Generation(0)
        self._gen.done.set()
        self._tg: TaskGroup | None = None
        self._reconnecting: anyio.Event | None = None
        self._reconnect_scope: anyio.CancelScope | None = None
        self._restart_times: list[float] = []
        self._down_at: float | None = None
        self.down_retry_after = DOWN_RETRY_AFTER
        self.waiting_on_person = False  # a login is open in a browser
        self._person_changed = anyio.Event()  # set when waiting_on_person changes
        self.list_warnings: list[str] = []  # tools skipped at listing, for the registry
        # The login (OAuth) and where its tokens are kept, for a server that logs in.
        self.auth: Provider | None = None
        self.token_store: FileTokenStorage | None = None
        self.roots: tuple[Path, ...] = ()  # folders offered to the server as its roots

    @abstractmethod
    async def _open(self, stack: contextlib.AsyncExitStack) -> None:
        """Enter this server's contexts on `stack` and finish the handshake."""

    @abstractmethod
    async def list_tools(self) -> list[ToolSpec]:
        """Every tool the server offers (all pages)."""

    @abstractmethod
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
        """Call one tool. Tool-level failures come back as is_error results. `meta` goes in
        the request's `_meta` (an MCP server's; others may carry it their own way); `task`:
        updates and the overall limit, for a call that becomes a task."""

    def may_become_task(self, tool: str) -> bool:
        """Whether a call of `tool` may run as a task (longer than tool_timeout)."""
        return False

    async def list_tasks(self) -> list[TaskState]:
        """The tasks the server keeps for us (2025-11-25 `tasks/list`), if it lists them."""
        return []

    def stderr_tail(self) -> list[str]:
        """The last lines the server wrote to its log in the current attempt (if it has one)."""
        return []

    def start_note(self) -> str:
        """What a failed start's log says the sandbox denied it, and how to allow it ("":
        nothing, or the server is not sandboxed)."""
        return ""

    # ----------------------------------------------------------------- optional capabilities

    @property
    def publishes(self) -> bool:
        """Whether the server may publish resources and prompts at all (an MCP server; an
        OpenAPI document has tools only). Those who read them ask only such servers."""
        return False

    def supports(self, feature: str) -> bool:
        """Whether the server declared `feature` ("tools", "resources", "prompts", ...)."""
        return False

    def extension(self, identifier: str) -> dict[str, Any] | None:
        """The settings of an extension the server declared (2026-07-28), or None."""
        return None

    async def extension_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request an extension defines (`skills/list`...): its result as JSON."""
        raise ToolServerError(self.name, method, "the server declares no extensions")

    async def list_resources(self) -> list[types.Resource]:
        return []

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return []

    async def list_prompts(self) -> list[types.Prompt]:
        return []

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        raise LookupError(f"server '{self.name}' publishes no resources")

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        raise LookupError(f"server '{self.name}' offers no prompts")

    async def subscribe(self, uri: str) -> bool:
        """Ask to be told when `uri` changes; False when the server does not offer it."""
        return False

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        name: str,
        value: str,
        context: dict[str, str] | None = None,
    ) -> list[str]:
        """The server's completions for one argument; none when it offers none."""
        return []

    # ----------------------------------------------------------------- what others tell it

    def wanted_tools(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """The listed tools the config wants, at most max_tools (an MCP server stops
        listing there already); their number is what the status shows."""
        wanted = [s for s in specs if self.config.wants_tool(s.name)]
        if len(wanted) > self.max_tools:
            self.listing_cut = f"has {len(wanted)} tools"
            wanted = wanted[: self.max_tools]
        self.status.tool_count = len(wanted)
        return wanted

    def note_error(self, text: str) -> None:
        """The last thing that went wrong with it (a failed call or re-listing), shown by
        /servers; the state is left as it is."""
        self._set_error(text)

    async def fail(self, cause: str) -> None:
        """Close it and call it failed (its tools could not be listed, or it was logged
        out): it stays so until it is connected afresh."""
        await self.close(grace=1)
        self.status.state = "failed"
        self._set_error(cause)

    async def switch_off(self, why: str | None = None) -> None:
        """Close it for the rest of the session, holding no tools: "closed", or "failed"
        with `why` (after /logout)."""
        if why is None:
            await self.close(grace=1)
        else:
            await self.fail(why)
        self.status.tool_count = 0

    # ----------------------------------------------------------------- connect and close

    async def start(self, task_group: TaskGroup) -> None:
        """Connect within the timeout, or raise ToolServerError naming the cause."""
        self._tg = task_group
        cause = await self._connect_once()
        if cause is not None and login_needed(self._gen.error):
            self._set_error(cause)
            self.status.state = "failed"
            raise LoginNeededError(self.name, cause)
        if cause is not None and says_all(self._gen.error):
            self._set_error(cause)
            self.status.state = "failed"
            raise ToolServerError(self.name, "connect", self.status.error or cause)
        if cause is not None:
            self.status.stderr_tail = [self.redact(line) for line in self.stderr_tail()]
            tail = stderr_headline(self.status.stderr_tail)  # its `Error:` line, if any
            cause += self.redact(self.start_note())
            self._set_error(f"{cause}{STDERR_SEPARATOR}{tail}" if tail else cause)
            self.status.state = "failed"
            raise ToolServerError(self.name, "connect", self.status.error or cause)
        self.status.state, self.status.error = "ready", None

    async def _connect_once(self) -> str | None:
        """Start a new owner task and wait for its handshake; the cause of failure or None."""
        assert self._tg is not None, "start() the server inside a task group first"
        gen = _Generation(self._gen.number + 1)
        self._gen = gen
        if self.status.state not in ("reconnecting",):
            self.status.state = "connecting"
        self._tg.start_soon(self._own, gen, name=f"tool-server:{self.name}#{gen.number}")
        waited = await self._tell_if_slow(gen)
        await self._wait_for_handshake(gen, waited)
        if gen.ready.is_set() and not gen.done.is_set() and not gen.lost:
            return None
        if gen.lost:
            await self._stop(gen, grace=1)
            return "it stopped right after connecting"
        if not gen.done.is_set():
            pending = self.pending_step()  # read before stopping: stopping clears it
            await self._stop(gen, grace=0)
            hint = pending or timeout_hint(self.config)
            return f"no answer within {self.connect_timeout:g} s ({hint})"
        return describe_exception(gen.error) if gen.error else "closed during connect"

    async def _wait_for_handshake(self, gen: _Generation, waited: float = 0.0) -> None:
        """Wait up to the connect timeout, stopped only while a person is involved.

        The clock runs through everything a server or login server does by itself
        (metadata, registration, token exchange: a reply trickling in byte by byte must not
        hold a start-up forever); it stops while a login is shown to a person (the login
        has its own limit) and starts afresh once they are done. `waited`: seconds of the
        limit already spent.
        """
        deadline = time.monotonic() + self.connect_timeout - waited
        while not (gen.ready.is_set() or gen.done.is_set()):
            changed = self._person_changed
            if self.waiting_on_person:
                await _first_of(gen.ready.wait, gen.done.wait, changed.wait)
                deadline = time.monotonic() + self.connect_timeout
                continue
            with anyio.move_on_after(deadline - time.monotonic()):
                await _first_of(gen.ready.wait, gen.done.wait, changed.wait)
            if time.monotonic() >= deadline and not self.waiting_on_person:
                return

    def set_waiting_on_person(self, waiting: bool) -> None:
        """A login starts or stops showing itself to a person (see `_wait_for_handshake`)."""
        if waiting != self.waiting_on_person:
            self.waiting_on_person = waiting
            self._person_changed.set()
            self._person_changed = anyio.Event()

    def pending_step(self) -> str:
        """What a connect that is taking long is doing, in words ("" if nothing to say)."""
        return ""

    def hasten_shutdown(self) -> None:
        """The process ends once the servers are closed: a server that waits for one to
        exit on its own may wait less (a stdio server's grace after stdin closes)."""
        return None  # most servers stop at once

    async def _tell_if_slow(self, gen: _Generation) -> float:
        """Wait a little; if a launcher's server has not answered yet, say why we wait.

        Returns the seconds waited here (they count towards the connect limit)."""
        after = self._slow_after
        message = slow_start_message(self.config, after, self.connect_timeout)
        on_slow_start = self.hooks.on_slow_start
        if message is None or on_slow_start is None or after >= self.connect_timeout:
            return 0.0
        with anyio.move_on_after(after):
            await _first_of(gen.ready.wait, gen.done.wait)
        if not (gen.ready.is_set() or gen.done.is_set()):
            on_slow_start(message)
        return after

    async def _own(self, gen: _Generation) -> None:
        """Enter and exit every context of one connection, in this one task."""
        try:
            with anyio.CancelScope() as scope:
                gen.scope = scope
                try:
                    async with contextlib.AsyncExitStack() as stack:
                        await self._open(stack)
                        gen.ready.set()
                        await gen.closing.wait()
                except Exception as exc:  # reported by start() or on the next call
                    gen.error = exc
                    # A live connection whose contexts failed: its transport died.
                    self.connection_lost(gen.number, describe_exception(exc))
        finally:  # also when cancelled from outside: close() must not wait for it in vain
            gen.done.set()

    async def close(self, grace: float = 5.0) -> None:
        """Ask the owner task to close; cancel it if it takes longer than `grace`.

        A reconnect in progress is cancelled first, so it cannot open a session after us.
        """
        self.status.state = "closed"
        if not self._gen.ready.is_set():
            grace = 0  # still connecting: nothing to close gracefully, and Ctrl-C is waiting
        reconnecting = self._reconnecting
        if reconnecting is not None and self._reconnect_scope is not None:
            self._reconnect_scope.cancel()
            with anyio.CancelScope(shield=True), anyio.move_on_after(grace):
                await reconnecting.wait()
        await self._stop(self._gen, grace)

    async def _stop(self, gen: _Generation, grace: float) -> None:
        with anyio.CancelScope(shield=True):
            gen.closing.set()
            with anyio.move_on_after(grace):
                await gen.done.wait()
            if not gen.done.is_set() and gen.scope is not None:
                gen.scope.cancel()
                with anyio.move_on_after(5):
                    await gen.done.wait()

    # ----------------------------------------------------------------- losing and reconnecting

    def _live(self) -> bool:
        gen = self._gen
        return gen.ready.is_set() and not gen.done.is_set() and not gen.lost

    def loss_reporter(self) -> Callable[[str], None]:
        """A callback for the transport of the generation being opened: it reports EOF."""
        gen = self._gen
        return lambda reason: self.connection_lost(gen.number, reason)

    @property
    def generation(self) -> int:
        return self._gen.number

    def connection_lost(self, generation: int, reason: str) -> None:
        """The connection of `generation` died: let its owner close it, remember why.

        Ignored for an old generation or a connection we are closing ourselves. A server
        that already restarted MAX_RESTARTS times within RESTART_WINDOW is marked down.
        """
        gen = self._gen
        if generation != gen.number or gen.lost or gen.closing.is_set():
            return
        if self.status.state == "closed" or not gen.ready.is_set():
            return
        gen.lost = True
        gen.closing.set()  # the owner task closes the dead session in its own task
        self._set_error(f"the server stopped: {reason}")
        now = time.monotonic()
        recent = [t for t in self._restart_times if now - t < RESTART_WINDOW]
        if len(recent) >= MAX_RESTARTS:
            self._mark_down(
                f"it stopped {len(recent) + 1} times within {RESTART_WINDOW:g} s ({reason})"
            )
        else:
            self.status.state = "lost"

    async def ensure_connected(self) -> None:
        """Return when the connection is usable; reconnect a lost one first.

        The reconnect runs in a task owned by the server, so a caller that is cancelled
        (Ctrl-C, its own deadline) never leaves a half-opened session in its cancel scope;
        concurrent callers share one reconnect.
        """
        if self._live():
            return
        if self._may_retry_down():
            self.status.state = "lost"
            self._restart_times.clear()  # a fresh start: its old crashes are history
        state = self.status.state
        if state not in ("lost", "reconnecting"):
            cause = self.status.error or "not connected"
            if state == "down" and self._down_at is not None:
                wait = self.down_retry_after - (time.monotonic() - self._down_at)
                cause += f" (server is down; it will be tried again in {max(wait, 0):.0f} s)"
            else:
                cause += f" (server is {state})"
            raise ToolServerError(self.name, "call_tool", cause)
        if self._reconnecting is None:
            self._reconnecting = anyio.Event()
            assert self._tg is not None
            self._tg.start_soon(self._reconnect, self._reconnecting, name=f"reconnect:{self.name}")
        await self._reconnecting.wait()
        if not self._live():
            raise ToolServerError(self.name, "reconnect", self.status.error or "failed")

    def _may_retry_down(self) -> bool:
        down_at = self._down_at
        return (
            self.status.state == "down"
            and down_at is not None
            and time.monotonic() - down_at >= self.down_retry_after
        )

    def ensure_ready(self) -> None:
        """Synchronous check for servers without reconnect (OpenAPI keeps no session)."""
        if not self._live():
            cause = self.status.error or "not connected"
            if self.status.state == "ready":
                self.status.state = "failed"
            raise ToolServerError(self.name, "call_tool", cause)

    async def _reconnect(self, finished: anyio.Event) -> None:
        with anyio.CancelScope() as scope:
            self._reconnect_scope = scope
            try:
                await self._reconnect_attempts()
            finally:
                self._reconnecting = self._reconnect_scope = None
                finished.set()

    async def _reconnect_attempts(self) -> None:
        """Up to MAX_ATTEMPTS connects with backoff; then the server is down."""
        self.status.state = "reconnecting"
        await self._stop(self._gen, grace=1)  # the dead session is closed by its owner
        cause = "not attempted"
        for attempt in range(MAX_ATTEMPTS):
            await anyio.sleep(self._backoff(attempt))
            if self.status.state in ("closed", "down"):
                return
            failed = await self._connect_once()
            if failed is None:
                self._restart_times.append(time.monotonic())
                self.status.restarts += 1
                self.status.last_restart = time.time()
                self.status.state = "ready"
                if self.hooks.on_reconnected is not None:
                    self.hooks.on_reconnected()
                return
            cause = failed
            self._set_error(f"reconnect attempt {attempt + 1} failed: {failed}")
        self._mark_down(f"{MAX_ATTEMPTS} reconnect attempts failed; last: {cause}")

    def _backoff(self, attempt: int) -> float:
        """No wait for a first reconnect after a quiet spell; doubling waits after that."""
        now = time.monotonic()
        recent = sum(1 for t in self._restart_times if now - t < RESTART_WINDOW)
        n = recent + attempt
        return 0.0 if n == 0 else min(BACKOFF_BASE * 2 ** (n - 1), BACKOFF_MAX)

    def _mark_down(self, why: str) -> None:
        tail = [self.redact(line) for line in self.stderr_tail()]
        self.status.stderr_tail = tail
        self.status.state = "down"
        self._down_at = time.monotonic()
        last = f"; last stderr: {' | '.join(tail)}" if tail else ""
        self._set_error(f"marked down: {why}{last}")

    def _set_error(self, text: str) -> None:
        self.status.error = self.redact(text)


async def _first_of(*waits: Callable[[], Awaitable[Any]]) -> None:
    """Return when the first of several waits finishes."""
    async with anyio.create_task_group() as tg:

        async def run(wait: Callable[[], Awaitable[Any]]) -> None:
            await wait()
            tg.cancel_scope.cancel()

        for wait in waits:
            tg.start_soon(run, wait)
