"""What every tool server is: connect, list, call, close — with one owner task.

Each connection's contexts (subprocess, HTTP client, MCP session) are entered and exited
by one dedicated owner task. Callers in other tasks only send requests through it. That
keeps anyio's cancel scopes properly nested and makes shutdown safe from any task.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import mcp.types as types
from anyio.abc import TaskGroup

from agent.config import ServerConfig
from agent.errors import ToolServerError

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
State = Literal["idle", "connecting", "ready", "failed", "closed"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as its server describes it, plus the hints approval relies on."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    title: str | None = None
    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    @classmethod
    def from_mcp(cls, server: str, tool: types.Tool) -> ToolSpec:
        ann = tool.annotations
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        return cls(
            server=server,
            name=tool.name,
            description=tool.description or "",
            input_schema=schema or {"type": "object", "properties": {}},
            title=tool.title or (ann.title if ann else None),
            read_only=bool(ann and ann.read_only_hint),
            destructive=not (ann and ann.destructive_hint is False),
            idempotent=bool(ann and ann.idempotent_hint),
            open_world=not (ann and ann.open_world_hint is False),
        )


def describe_exception(exc: BaseException) -> str:
    """One line for the deepest meaningful cause, unwrapping ExceptionGroups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"command not found: {exc.filename}"
    if name == "MCPError" and "Connection closed" in text:
        return "the server closed the connection (it exited or crashed at start; see its log)"
    if name == "ConnectError":
        return f"connection refused ({text})" if text else "connection refused"
    return f"{name}: {text}" if text else name


@dataclass
class ServerStatus:
    """What /servers and error reports show about one server."""

    name: str
    transport: str
    state: State = "idle"
    tool_count: int = 0
    error: str | None = None
    restarts: int = 0
    log_path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ToolServer(ABC):
    """A tool server with an owner task. Subclasses implement only what differs."""

    def __init__(self, config: ServerConfig, *, connect_timeout: float) -> None:
        self.config = config
        self.name = config.name
        self.connect_timeout = config.timeout or connect_timeout
        self.status = ServerStatus(name=config.name, transport=config.type)
        self.instructions: str | None = None
        self._scope: anyio.CancelScope | None = None
        self._closing = anyio.Event()
        self._ready = anyio.Event()
        self._done = anyio.Event()
        self._error: BaseException | None = None

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
    ) -> types.CallToolResult:
        """Call one tool. Tool-level failures come back as is_error results."""

    async def start(self, task_group: TaskGroup) -> None:
        """Connect within the timeout, or raise ToolServerError naming the cause."""
        self.status.state = "connecting"
        self._closing, self._ready, self._done = anyio.Event(), anyio.Event(), anyio.Event()
        self._error = None
        task_group.start_soon(self._own, name=f"tool-server:{self.name}")
        with anyio.move_on_after(self.connect_timeout):
            await _first_of(self._ready.wait, self._done.wait)
        if self._ready.is_set() and not self._done.is_set():
            self.status.state, self.status.error = "ready", None
            return
        if not self._done.is_set():
            cause = f"no answer within {self.connect_timeout:g} s"
            await self._stop(grace=0)
        else:
            cause = describe_exception(self._error) if self._error else "closed during connect"
        self.status.state, self.status.error = "failed", cause
        raise ToolServerError(self.name, "connect", cause)

    async def _own(self) -> None:
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                async with contextlib.AsyncExitStack() as stack:
                    await self._open(stack)
                    self._ready.set()
                    await self._closing.wait()
            except Exception as exc:  # reported by start() or on the next call
                self._error = exc
        self._done.set()

    async def close(self, grace: float = 5.0) -> None:
        """Ask the owner task to close; cancel it if it takes longer than `grace`."""
        await self._stop(grace)
        self.status.state = "closed"

    async def _stop(self, grace: float) -> None:
        with anyio.CancelScope(shield=True):
            self._closing.set()
            with anyio.move_on_after(grace):
                await self._done.wait()
            if not self._done.is_set() and self._scope is not None:
                self._scope.cancel()
                with anyio.move_on_after(5):
                    await self._done.wait()

    def ensure_ready(self) -> None:
        if self._done.is_set() or not self._ready.is_set():
            cause = describe_exception(self._error) if self._error else "not connected"
            self.status.state, self.status.error = "failed", cause
            raise ToolServerError(self.name, "call_tool", cause)


async def _first_of(*waits: Callable[[], Awaitable[Any]]) -> None:
    """Return when the first of several waits finishes."""
    async with anyio.create_task_group() as tg:

        async def run(wait: Callable[[], Awaitable[Any]]) -> None:
            await wait()
            tg.cancel_scope.cancel()

        for wait in waits:
            tg.start_soon(run, wait)
