"""`run_mcp.py acp`: the agent as an Agent Client Protocol (ACP) agent over stdio, for
editors (Zed's `agent_servers`, and the JetBrains and Neovim plugins) that drive it.

The protocol is the official SDK's (`acp`, agent-client-protocol on PyPI): JSON-RPC on
stdin/stdout, each request handled in a task of its own. Each `session/new` opens one
session as every front end does (agent.session.startup `prepare_session` /
`open_session`), in a task of this process's that holds it until stdin ends: the
settings are resolved for the session's `cwd` (its own files only when that folder is
trusted, as for any run) and the editor's `mcpServers` are connected beside the user's
configured servers. A `session/prompt` is one turn of the one loop (`Agent.run`); its
events become `session/update` notifications (agent.cli.acp_updates). A call that needs
approval is asked of the editor with `session/request_permission` through the approval
policy's callback, so the gate decides as for every call. `session/load` opens one of
our saved transcripts again and replays it; the slash commands that need no terminal
are offered and run (agent.cli.acp_slash); the editor's `fs/*`, when offered, serves the
bundled server's file tools (agent.cli.acp_files). Documented in docs/programs.md.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import typer
from acp import (
    PROTOCOL_VERSION,
    RequestError,
    run_agent,
    text_block,
    tool_content,
    update_tool_call,
)
from acp.interfaces import Agent as AcpInterface
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ToolCallUpdate,
)
from anyio.abc import TaskGroup, TaskStatus
from pydantic import ValidationError

from agent import __version__
from agent.cli.acp_files import route_files
from agent.cli.acp_slash import EditorCommands
from agent.cli.acp_updates import (
    CANCELLED,
    Cards,
    TurnUpdates,
    asked_place,
    history,
    masked_input,
    prompt_parts,
    title_and_kind,
)
from agent.cli.subcommands import run_session, session_command_app
from agent.cli.trust_command import settle
from agent.common.errors import ConfigError
from agent.common.transcript import find_session
from agent.config.build import BUNDLED_MAIN, BUNDLED_SERVER_NAME
from agent.config.files import user_config_dir
from agent.config.sandbox import resolve as resolve_sandbox
from agent.config.settings import ServerConfig, Settings
from agent.loop.approval import ApprovalRequest, Decision
from agent.loop.vision import vision_mode
from agent.session.startup import (
    Session,
    expand_refs,
    open_script_session,
    prepare_session,
)
from agent.ui.safe import SafeConsole

ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS = (
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
)
PERMISSION_OPTIONS = [
    PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once"),
    PermissionOption(option_id=ALLOW_ALWAYS, name="Allow always", kind="allow_always"),
    PermissionOption(option_id=REJECT_ONCE, name="Reject once", kind="reject_once"),
    PermissionOption(option_id=REJECT_ALWAYS, name="Reject always", kind="reject_always"),
]
DECISIONS: dict[str, Decision] = {ALLOW_ONCE: "yes", ALLOW_ALWAYS: "always"}
INVALID_PARAMS = -32602
# What a session ID of ours may be (agent.common.transcript's, serve's): a file name with
# no path in it, checked before anything is looked up.
SESSION_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_.-]{0,127}")
# Why a tool server's own form (elicitation) is declined under acp.
ACP_CANNOT_ANSWER = "ACP has no way to put a tool server's form to the editor"


def acp_app(run: Callable[..., None], resolve: Callable[..., Settings]) -> typer.Typer:
    """The `acp` command: `run`'s shared options (agent.cli.subcommands), for every session."""
    return session_command_app(
        run,
        None,
        lambda opts: run_acp(opts, resolve),
        "Serve the Agent Client Protocol on stdin/stdout, for an editor (Zed's "
        "agent_servers) to drive: a session per session/new, in its cwd, with its MCP servers.",
    )


def run_acp(opts: dict[str, Any], resolve: Callable[..., Settings]) -> int:
    environ = dict(os.environ)
    settings = resolve(opts, environ)  # what is wrong with the options ends it here
    return run_session(settings, _serve, opts, resolve, environ, settings)


async def _serve(
    opts: dict[str, Any],
    resolve: Callable[..., Settings],
    environ: dict[str, str],
    settings: Settings,
) -> int:
    _check_pipes()
    stderr = SafeConsole(stderr=True, redact=settings.redactor(os.environ))
    async with anyio.create_task_group() as tg:
        agent = AcpAgent(opts, resolve, environ, tg, stderr, settings)
        try:
            # The methods we support; the SDK's router answers others with method-not-found.
            await run_agent(typing.cast(AcpInterface, agent))  # until stdin ends
        finally:
            agent.close_all()  # each session's task closes what it opened
    return 0


def _check_pipes() -> None:
    """The SDK reads stdin and writes stdout as pipes: a file there (`acp > log`,
    `acp < requests`) is one line saying so, not the SDK's traceback."""
    for fd, name in ((0, "stdin"), (1, "stdout")):
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.fstat(fd).st_mode):
                raise ConfigError(
                    f"acp: {name} is a file; the protocol runs over pipes: let the editor "
                    "start it, or pipe it (`... | run_mcp.py acp | cat`)"
                )


@dataclass
class Live:
    """One ACP session: the session core's Session, held open by its own task."""

    session: Session
    closed: anyio.Event
    stderr: SafeConsole
    turn: anyio.CancelScope | None = None
    rejected: set[tuple[str, str]] = field(default_factory=set)  # "reject always"
    # The calls shown while asked: their ids, and whether they were allowed.
    asked: dict[tuple[str, str], list[tuple[str, bool]]] = field(default_factory=dict)
    commands: EditorCommands | None = None
    cards: Cards = field(default_factory=Cards)  # the call cards shown, their IDs


class AcpAgent:
    """The ACP agent side (acp.interfaces.Agent): the methods we support; the SDK answers
    any other with method-not-found."""

    def __init__(
        self,
        opts: dict[str, Any],
        resolve: Callable[..., Settings],
        environ: dict[str, str],
        tg: TaskGroup,
        stderr: SafeConsole,
        settings: Settings,
    ) -> None:
        self.opts, self.resolve, self.environ, self.tg, self.stderr = (
            opts,
            resolve,
            environ,
            tg,
            stderr,
        )
        self.sees_images = vision_mode(settings.llm.vision) != "off"
        self.sessions: dict[str, Live] = {}
        self.client: Client | None = None
        self.client_capabilities: ClientCapabilities | None = None

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    def close_all(self) -> None:
        for live in self.sessions.values():
            live.closed.set()

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        **_: Any,
    ) -> InitializeResponse:
        """Protocol 1; MCP over stdio (always) and http/sse; text, embedded resources and
        (when the model sees images: [llm] vision not false) images in prompts; sessions
        loaded from our transcripts. The editor's fs capabilities are kept for each
        session's file tools (agent.cli.acp_files)."""
        self.client_capabilities = client_capabilities
        capabilities = AgentCapabilities(
            load_session=True,
            mcp_capabilities=McpCapabilities(http=True, sse=True),
            prompt_capabilities=PromptCapabilities(embedded_context=True, image=self.sees_images),
        )
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=capabilities,
            agent_info=Implementation(name="mcp-agent", title="MCP agent", version=__version__),
        )

    async def authenticate(self, method_id: str, **_: Any) -> None:
        return None  # no auth methods offered: the model's key comes from the settings

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> NewSessionResponse:
        live = await self._open(cwd, mcp_servers or [], None)
        session_id = live.session.saved.transcript.session_id
        self.tg.start_soon(self._announce, session_id)
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> LoadSessionResponse:
        """A saved session (one of our transcripts, by its exact ID) opened again in `cwd`:
        its history is replayed as session/update notifications before the answer, and
        its next prompt continues it (as `--resume ID` does)."""
        if session_id in self.sessions:
            raise RequestError(INVALID_PARAMS, f"session {session_id!r} is already open")
        live = await self._open(cwd, mcp_servers or [], session_id)
        assert self.client is not None
        messages, registry = live.session.agent.memory.messages, live.session.registry
        for update in history(messages, registry, live.cards):
            await self.client.session_update(session_id=session_id, update=update)
        self.tg.start_soon(self._announce, session_id)
        return LoadSessionResponse()

    async def _open(self, cwd: str, given: list[Any], resume: str | None) -> Live:
        """A session opened in its own task (new, or `resume`d from its transcript), with
        the editor's approvals, file access and commands wired to it."""
        try:
            settings = await anyio.to_thread.run_sync(self._settings, cwd, given)
            if resume is not None:
                await anyio.to_thread.run_sync(_exactly, settings, resume)
        except ConfigError as exc:
            raise RequestError(INVALID_PARAMS, self.stderr.redact(exc.message)) from None
        opened = await self.tg.start(self._hold, settings, resume)
        if isinstance(opened, BaseException):
            raise RequestError(-32603, self.stderr.redact(_message(opened))) from None
        live: Live = opened
        session = live.session
        session_id = session.saved.transcript.session_id
        assert self.client is not None
        session.agent.approval.ask = functools.partial(self._ask, session_id)
        route_files(
            session.registry,
            self.client,
            session_id,
            settings.workspace,
            self.client_capabilities,
        )
        live.commands = EditorCommands(
            session,
            functools.partial(self._send, session_id),
            functools.partial(self._turn, session_id),
        )
        self.sessions[session_id] = live
        return live

    async def _send(self, session_id: str, update: Any) -> None:
        assert self.client is not None
        await self.client.session_update(session_id=session_id, update=update)

    async def _announce(self, session_id: str) -> None:
        """The commands the editor may offer (after session/new's or session/load's answer)."""
        live = self.sessions.get(session_id)
        if live is not None and live.commands is not None:
            await self._send(session_id, live.commands.announcement())

    def _settings(self, cwd: str, given: list[Any]) -> Settings:
        """The settings for a session in `cwd`: its own files read only when trusted (the
        one rule of every run), the editor's servers beside the configured ones, and
        every stdio server that names no folder of its own run in `cwd`."""
        root = Path(cwd)
        if not root.is_absolute() or not root.is_dir():
            raise ConfigError(f"cwd {cwd!r}: must be an existing absolute folder")
        opts = {**self.opts, "workspace": root}
        settings = self.resolve(opts, self.environ)
        settings = settle(
            settings,
            self.environ,
            ask=False,
            trusted=lambda: self.resolve({**opts, "trust_workspace": True}, self.environ),
        )
        settings = settings.model_copy(
            update={"servers": tuple(_in_folder(s, settings.workspace) for s in settings.servers)}
        )
        extra = [editor_server(entry, root) for entry in given]
        if not extra:
            return settings
        kept = self._beside(settings.servers, extra)
        hide = [str(settings.state_dir)]
        if (user := user_config_dir(self.environ)) is not None:
            hide.append(str(user))
        sandboxed, _ = resolve_sandbox(
            extra,
            settings.sandbox,
            root=settings.workspace,
            environ=self.environ,
            hide=hide,
            protect=settings.config_files,
            bundled_main=str(BUNDLED_MAIN),
        )
        return settings.model_copy(update={"servers": (*kept, *sandboxed)})

    def _beside(
        self, configured: tuple[ServerConfig, ...], extra: list[ServerConfig]
    ) -> list[ServerConfig]:
        """The servers a run in the folder gets (the user's, or the bundled one when none
        is configured), less each one an editor's server of the same name replaces for
        this session (an editor cannot rename what it sends), with one stderr note each:
        the editor's servers are additions, and the bundled file and shell tools stay."""
        names = [server.name for server in extra]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ConfigError(f"mcpServers: '{twice[0]}' is given twice: rename one")
        kept: list[ServerConfig] = []
        for server in configured:
            if server.name not in names:
                kept.append(server)
                continue
            where = (
                "the bundled server"
                if _is_fallback(server)
                else f"the server configured in {server.config_file or 'the command line'}"
            )
            self.stderr.print(
                f"note: mcpServers: the editor's '{server.name}' replaces {where} of that "
                "name for this session",
                markup=False,
                highlight=False,
                style="yellow",
            )
        return kept

    async def _hold(
        self, settings: Settings, resume: str | None, *, task_status: TaskStatus[Any]
    ) -> None:
        """Open one session and hold it until stdin ends; what kept it from opening goes
        back to `_open` (the other sessions go on)."""
        stderr = SafeConsole(stderr=True, redact=settings.redactor(os.environ))
        started = False
        try:
            prepared = prepare_session(settings, stderr, resume, stderr)
            async with open_script_session(
                prepared, stderr, cannot_answer=ACP_CANNOT_ANSWER
            ) as session:
                live = Live(session, anyio.Event(), stderr)
                task_status.started(live)
                started = True
                await live.closed.wait()
                session.registry.hasten_shutdown()
        except Exception as exc:
            if started:
                raise
            task_status.started(exc)

    def _live(self, session_id: str) -> Live:
        live = self.sessions.get(session_id)
        if live is None:
            raise RequestError(
                INVALID_PARAMS, f"no session {session_id!r}: call session/new or session/load"
            )
        return live

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        live = self._live(session_id)
        if live.turn is not None:
            raise RequestError(-32600, "a prompt is already running in this session")
        parts = prompt_parts(prompt, live.session.agent.vision != "off")
        if not parts.text.strip() and not parts.images:
            raise RequestError(INVALID_PARAMS, "the prompt is empty: send a text block")
        with anyio.CancelScope() as scope:
            live.turn = scope
            try:
                if (
                    live.commands is not None
                    and live.commands.parse(parts.text)
                    and not parts.images
                ):
                    await live.commands.run(parts.text)
                    stop: Any = "end_turn"
                else:
                    stop = await self._turn(session_id, parts.text, parts.image_message())
            except RequestError:
                await self._unfinished(live, "Not finished: the turn failed before it ended.")
                raise
            finally:
                live.turn = None
        if scope.cancel_called:
            await self._unfinished(live, CANCELLED)
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason=stop)

    async def _unfinished(self, live: Live, why: str) -> None:
        """Each card the turn left open (cut by session/cancel mid-call) gets its final
        update before the prompt's reply, as ACP asks: `failed` (it has no cancelled
        status), saying why; else the editor shows it running for good."""
        session_id = live.session.saved.transcript.session_id
        live.asked.clear()  # a question answered for a call that never started is stale
        for card in live.cards.take_open():
            await self._send(
                session_id,
                update_tool_call(card, status="failed", content=[tool_content(text_block(why))]),
            )

    async def _turn(
        self, session_id: str, text: str, attached: dict[str, Any] | None = None
    ) -> Any:
        """One turn of the loop, its events sent as updates; its stop reason."""
        live = self._live(session_id)
        assert self.client is not None
        updates = TurnUpdates(
            self.client, session_id, live.session.registry, live.asked, live.cards
        )
        request = await expand_refs(live.session.catalog, text, live.stderr)
        return await updates.run(live.session.agent, request, attached)

    async def cancel(self, session_id: str, **_: Any) -> None:
        live = self.sessions.get(session_id)
        if live is not None and live.turn is not None:
            live.turn.cancel()
            live.session.requests.cancel_in_flight()

    async def _ask(self, session_id: str, request: ApprovalRequest) -> Decision:
        """The approval policy's question, put to the editor: the call is shown as a
        pending tool call and the user picks an option; "reject always" is remembered for
        the session (the call is shown and refused without asking), "allow always" by the
        policy as /approve's "always" is."""
        live = self._live(session_id)
        assert self.client is not None
        key = TurnUpdates.key(request.public_name, request.arguments)
        messages = live.session.agent.memory.messages
        call_id = live.cards.claim(asked_place(messages, key, live.cards))
        live.cards.open[call_id] = None
        redact = live.session.registry.redact
        title, kind = title_and_kind(request.spec, request.public_name, redact)
        arguments = masked_input(request.arguments, redact)
        await self.client.session_update(
            session_id=session_id,
            update=TurnUpdates.started(call_id, title, kind, arguments, "pending"),
        )
        tool = (request.server, request.tool)
        decision: Decision = "no"
        if tool not in live.rejected:
            answer = await self.client.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(
                    tool_call_id=call_id,
                    title=title,
                    kind=kind,
                    status="pending",
                    raw_input=arguments,
                ),
                options=PERMISSION_OPTIONS,
            )
            outcome = answer.outcome
            if isinstance(outcome, AllowedOutcome):  # else cancelled: the call does not run
                if outcome.option_id == REJECT_ALWAYS:
                    live.rejected.add(tool)
                decision = DECISIONS.get(outcome.option_id, "no")
        shown = live.asked.setdefault(key, [])
        shown.append((call_id, decision != "no"))
        return decision


def editor_server(entry: Any, cwd: Path) -> ServerConfig:
    """One of `session/new`'s mcpServers as our ServerConfig: stdio (run in the session's
    cwd), http or sse. What ServerConfig refuses (a name that is blank, or `agent`: the
    agent's own tools) is the request's error in its words, not the SDK's bare "Invalid
    params"."""
    try:
        return _editor_server(entry, cwd)
    except ValidationError as exc:
        said = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise ConfigError(f"mcpServers: '{getattr(entry, 'name', '?')}': {said}") from None


def _editor_server(entry: Any, cwd: Path) -> ServerConfig:
    kind = getattr(entry, "type", None)
    if kind in ("http", "sse"):
        headers = {h.name: h.value for h in entry.headers}
        if not str(entry.url).startswith(("http://", "https://")):
            raise ConfigError(f"mcpServers: '{entry.name}': url must start with http(s)://")
        return ServerConfig(name=entry.name, type=kind, url=entry.url, headers=headers)
    if kind is None and hasattr(entry, "command"):
        env = {v.name: v.value for v in entry.env}
        return ServerConfig(
            name=entry.name,
            type="stdio",
            command=entry.command,
            args=tuple(entry.args),
            env=env,
            cwd=str(cwd),
        )
    raise ConfigError(
        f"mcpServers: '{getattr(entry, 'name', '?')}': type {kind!r} is not supported "
        "(stdio, http or sse)"
    )


def _in_folder(server: ServerConfig, cwd: Path) -> ServerConfig:
    """A configured stdio server with no `cwd` of its own runs in the session's folder,
    not in this process's."""
    if server.type != "stdio" or server.cwd:
        return server
    return server.model_copy(update={"cwd": str(cwd)})


def _exactly(settings: Settings, session_id: str) -> None:
    """`session_id` names one saved session exactly (not a prefix, not `latest`, not a
    path: only the agent's own files in its sessions folder, agent.common.transcript)."""
    if not SESSION_ID.fullmatch(session_id):
        raise ConfigError(f"no saved session {session_id!r}")
    try:
        found = find_session(settings.state_dir, session_id)
    except ConfigError:
        found = None
    if found is None or found.stem != session_id:
        raise ConfigError(f"no saved session {session_id!r}")


def _is_fallback(server: ServerConfig) -> bool:
    """The bundled server a run gets when nothing is configured (not when it is named)."""
    return (
        server.name == BUNDLED_SERVER_NAME
        and server.config_file is None
        and str(BUNDLED_MAIN) in server.args
        and not server.required
    )


def _message(exc: BaseException) -> str:
    """What kept a session from opening, in one line (the first of a group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = getattr(exc, "message", None) or str(exc)
    return f"the session could not open: {text}"
