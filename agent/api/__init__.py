"""The Python API: the agent driven from a program's own event loop, on the session core
every front end uses (agent.session.startup, the one loop `Agent.run`).

    async with open_agent(mcp_config="mcp.json", yes=True) as agent:
        result = await agent.ask("what changed?")   # typed: answer, status, tool calls, usage
        async for event in agent.stream("and why?"):  # the loop's own events
            ...

The keywords of `open_agent` are the command line's long options that shape a session
(`--max-steps` is `max_steps`), resolved into Settings as the CLI's are, by
agent.session.run_settings (`SESSION_OPTIONS`, checked against the CLI's `run` by the
tests), so every such flag is a keyword here with the same meaning and default.
Documented in docs/python-api.md.

May import: agent.session and every package below it; never agent.cli. A front end like
the CLI's: placed beside agent.cli in tests/test_architecture.py's LAYERS.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from agent.common.errors import AgentError
from agent.loop.approval import ApprovalRequest, Decision
from agent.loop.events import Event
from agent.session.run_settings import SESSION_OPTIONS, resolve_settings, settle
from agent.session.startup import (
    Session,
    Unavailable,
    expand_refs,
    open_script_session,
    prepare_session,
)
from agent.ui.output import RunRecord, server_states
from agent.ui.safe import SafeConsole

__all__ = [
    "AgentError",
    "ApprovalRequest",
    "OpenAgent",
    "Result",
    "ServerUnavailable",
    "TokenUsage",
    "ToolCall",
    "open_agent",
]

Approve = Callable[[ApprovalRequest], "bool | Decision | Awaitable[bool | Decision]"]


class ServerUnavailable(AgentError):
    """A required server (one named by `server_command` / `server_url`, or `required: true`)
    did not connect, or none did: the agent would run without its tools."""


@dataclass(frozen=True)
class ToolCall:
    server: str | None
    tool: str
    name: str
    arguments: dict[str, Any]
    is_error: bool
    output: str
    duration_ms: float


@dataclass(frozen=True)
class TokenUsage:
    """Token counts (None: the server reported none) and the cost in US dollars (None:
    unknown, no price for the model)."""

    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    cost_usd: float | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenUsage:
        cost = data.get("cost_usd")
        return cls(
            data.get("prompt_tokens"),
            data.get("completion_tokens"),
            data.get("cached_tokens"),
            cost if isinstance(cost, int | float) else None,
        )


@dataclass(frozen=True)
class Result:
    """One turn's result: `--output json`'s object as a typed value (`json` holds it whole,
    masked by the session's redactor like the CLI's)."""

    answer: str | None
    status: str  # answered | max_steps | error | cancelled
    steps: int
    tool_calls: tuple[ToolCall, ...]
    usage: TokenUsage  # this turn's
    session_usage: TokenUsage  # the whole session's so far
    error: str | None
    json: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        fields = ToolCall.__dataclass_fields__
        calls = tuple(ToolCall(**{k: c[k] for k in fields}) for c in data["tool_calls"])
        usage = data["usage"]
        return cls(
            data["answer"],
            data["status"],
            data["steps"],
            calls,
            TokenUsage.from_json(usage),
            TokenUsage.from_json(usage.get("session", usage)),
            data["error"],
            data,
        )


class OpenAgent:
    """An open session: turns share its memory, one at a time (a second `ask` waits)."""

    def __init__(self, session: Session, stderr: SafeConsole) -> None:
        self._session = session
        self._stderr = stderr
        self._lock = anyio.Lock()
        self.session_id: str = session.saved.transcript.session_id

    @property
    def servers(self) -> list[dict[str, Any]]:
        """Each server's `{"name", "state", "error"}`."""
        return server_states(self._session.registry)

    @property
    def tools(self) -> list[str]:
        """The public names of the servers' tools the model is offered."""
        return sorted(self._session.registry.tools)

    async def stream(self, text: str) -> AsyncGenerator[Event, None]:
        """One turn: the loop's events as they happen (agent.loop.events), the last a
        RunFinished. Leaving the loop early cancels the turn (close the iterator, e.g. with
        `contextlib.aclosing`, to cancel it at once)."""
        async with self._lock:
            agent = self._session.agent
            request = await expand_refs(self._session.catalog, text, self._stderr)
            async with contextlib.aclosing(agent.run(request)) as events:
                async for event in events:
                    yield event

    async def ask(self, text: str) -> Result:
        """One turn; its result (also when it ends without an answer: see `status`)."""
        record = RunRecord()
        agent = self._session.agent
        async with contextlib.aclosing(self.stream(text)) as events:
            async for event in events:
                record.add(event)
        record.servers = self.servers
        data = record.to_json(agent.run_usage, agent.session_usage)
        return Result.from_json(self._session.registry.redact.deep(data))


def options(given: dict[str, Any]) -> dict[str, Any]:
    """The session's options with their defaults, updated by `given` (checked)."""
    for name in given:
        if name not in SESSION_OPTIONS:
            near = difflib.get_close_matches(name, SESSION_OPTIONS, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise TypeError(f"open_agent() got an unknown option {name!r}{hint}")
    opts: dict[str, Any] = {**SESSION_OPTIONS, **given}
    if isinstance(opts.get("config"), str):
        opts["config"] = Path(opts["config"])
    if opts.get("mcp_config") is not None:
        opts["mcp_config"] = str(opts["mcp_config"])
    opts["header"] = list(opts.get("header") or [])
    return opts


def _asker(approve: Approve) -> Callable[[ApprovalRequest], Awaitable[Decision]]:
    """The caller's callback as the approval policy's question: True / "yes", "always",
    anything else no; sync or async."""

    async def ask(request: ApprovalRequest) -> Decision:
        answer = approve(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is True or answer == "yes":
            return "yes"
        return "always" if answer == "always" else "no"

    return ask


@contextlib.asynccontextmanager
async def open_agent(*, approve: Approve | None = None, **given: Any) -> AsyncIterator[OpenAgent]:
    """Open a session: the servers connected, the agent ready; all closed on leaving.

    `given`: the command line's long options as keywords (`mcp_config`, `model`,
    `base_url`, `max_steps`, `yes`, `resume`, …). `approve`: called with an
    ApprovalRequest for a call that needs approval (returns True / "yes", "always", or
    False / "no"; may be async); with none, such calls are refused (as `-p` without
    `--yes`). Raises TypeError for an unknown keyword, AgentError (ConfigError) for bad
    settings, ServerUnavailable when a required server (or every server) did not connect.
    """
    opts = options(given)
    environ = dict(os.environ)
    settings = resolve_settings(opts, environ)
    settings = settle(
        settings,
        environ,
        ask=False,
        trusted=lambda: resolve_settings({**opts, "trust_workspace": True}, environ),
    )
    redact = settings.redactor(os.environ)
    stderr = SafeConsole(stderr=True, redact=redact)
    prepared = prepare_session(settings, stderr, opts.get("resume"), stderr)
    raised: list[BaseException] = []  # by the caller's block: theirs, not a group of ours
    try:
        try:
            async with open_script_session(prepared, stderr) as session:
                if approve is not None:
                    session.agent.approval.ask = _asker(approve)
                try:
                    yield OpenAgent(session, stderr)
                except BaseException as exc:
                    raised.append(exc)
                    raise
                session.registry.hasten_shutdown()
        except* Unavailable as refused:
            raise ServerUnavailable(str(refused.exceptions[0])) from None
    except BaseExceptionGroup as group:
        if raised and _only(group, raised[0]):
            raise raised[0] from None  # the caller's own exception, as they raised it
        raise


def _only(group: BaseExceptionGroup[BaseException], exc: BaseException) -> bool:
    """Whether every exception in `group` (nested groups too) is `exc`."""
    return all(
        _only(inner, exc) if isinstance(inner, BaseExceptionGroup) else inner is exc
        for inner in group.exceptions
    )
