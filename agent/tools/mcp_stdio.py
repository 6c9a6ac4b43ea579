"""Stdio servers: process spawn/adoption and group stop, whole-line reading with the tool-list cap,
and the stream wrapper that notices a transport ending. Split from agent/tools/mcp.py."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp.client.stdio as mcp_stdio
import mcp.types as types
from anyio.streams.text import TextReceiveStream
from mcp.shared.message import SessionMessage

from agent.tools.prestart import AdoptedProcess, Prestarted, stop_prestarted
from agent.tools.toolcap import cut_tool_list
from agent.tools.unparsable import reply_error_for

# The SDK closes a stdio server's stdin, waits this long for it to exit, then SIGTERMs its
# process group. Its 2 s default added 2 s to every exit for servers that ignore stdin EOF
# (server-everything and most Node servers); SIGTERM is still a graceful request.
mcp_stdio.PROCESS_TERMINATION_TIMEOUT = 0.5
EXIT_GRACE = 0.15  # the same wait when the process is about to end (hasten_shutdown)
_sdk_stop_server_process = mcp_stdio._stop_server_process


def hasten_shutdown(grace: float = EXIT_GRACE) -> None:
    """The process ends once the servers are closed: each stdio server gets `grace` seconds
    after its stdin closes, then SIGTERM to its group as before. A caller waits on this
    tail after its answer; a server that must save state on EOF has had the whole run.
    (The SDK reads this wait from its module; this process has no other use for it.)"""
    mcp_stdio.PROCESS_TERMINATION_TIMEOUT = grace


async def _stop_server_and_its_group(process: Any) -> None:
    """The SDK signals the server's process group only if the server outlives stdin EOF; one
    that exits promptly leaves its children (same group, reparented to init) running. The
    server leads its own group (start_new_session), so the group id is its pid."""
    try:
        await _sdk_stop_server_process(process)
    finally:
        if os.name == "posix" and _leader_gone(process.pid):
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)


def _leader_gone(pid: int) -> bool:
    """Whether the group `pid` has lost its leader (our server): then what is left in it
    are its orphans. A live process with that pid is a new one that reused it: hands off."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


mcp_stdio._stop_server_process = _stop_server_and_its_group
BIG_LINE = 1_000_000  # characters; a stdio message this long may be an oversized tool list
_sdk_parse_line = mcp_stdio._parse_line


@dataclass
class _ToolCap:
    """The most tools one tools/list page may bring in, and how many a cut page held."""

    limit: int
    announced: int = 0


_tool_cap: contextvars.ContextVar[_ToolCap | None] = contextvars.ContextVar(
    "mcp_agent_tool_cap", default=None
)


def _parse_capped_line(line: str) -> Any:
    """A tools/list page past the cap is cut before the SDK validates it.

    The SDK turns every tool of a page into pydantic models (and validates it twice): for a
    server announcing 50,000 tools that is most of 15 s and 400 MB. Cutting the raw JSON
    (agent.tools.toolcap: the C decoder, one tool at a time) keeps the cost bounded by the
    cap, not by the server.
    """
    cap = _tool_cap.get()
    if cap is not None and len(line) > BIG_LINE and '"tools"' in line:
        cut = cut_tool_list(line, cap.limit)
        if cut is not None and cut[1] > cap.limit:
            message, cap.announced = cut
            message["result"].pop("nextCursor", None)
            line = json.dumps(message)
    return _parse_big_line(line) if len(line) > BIG_LINE else _sdk_parse_line(line)


def _parse_big_line(line: str) -> Any:
    """json's C decoder, then the SDK's model from those objects. The SDK's `validate_json`
    builds a tree of its own first: a 27 MB image reply was held three times at once, here
    once more than the line (the model keeps json's strings). Failures go the SDK's way."""
    try:
        message = types.jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False)
    except (ValueError, RecursionError):  # json's and pydantic's errors are ValueErrors
        return _sdk_parse_line(line)
    return SessionMessage(message)


mcp_stdio._parse_line = _parse_capped_line
_sdk_spawn = mcp_stdio._create_platform_compatible_process
# A connection about to open its transport puts its prestarted process here (a list, so the
# spawn below can take it even from a task that copied the context).
_adopt: contextvars.ContextVar[list[Prestarted] | None] = contextvars.ContextVar(
    "mcp_agent_adopt", default=None
)


async def _spawn_or_adopt(command: str, args: list[str], *rest: Any, **kw: Any) -> Any:
    """The SDK's spawn, unless this connection's server was started before the imports."""
    waiting = _adopt.get()
    if waiting:
        started = waiting.pop()
        if started.argv == (command, *args):  # (one that died at start shows it as usual)
            return await AdoptedProcess.adopt(started.popen)
        stop_prestarted(started)
    return await _sdk_spawn(command, args, *rest, **kw)


mcp_stdio._create_platform_compatible_process = _spawn_or_adopt


@dataclass(eq=False)
class _WholeLines(TextReceiveStream):
    """A stdio server's output in pieces that end at a line break.

    The SDK's reader joins its leftover with every 64 KiB chunk and splits the lot again:
    quadratic in the length of a line, seconds for a 10 MB tool list. Given whole lines,
    its leftover is always empty and reading is linear.
    """

    _pending: list[str] = field(init=False, default_factory=list)
    _gave_big: bool = field(init=False, default=False)

    async def receive(self) -> str:
        if self._gave_big:
            # The SDK's reader holds the last chunk and its split lines in local variables
            # until the next chunk comes: after a big one (a 20 MB image is 27 MB of JSON,
            # twice), an empty chunk at once lets them go instead of at the next reply.
            self._gave_big = False
            return ""
        while True:
            try:
                chunk = await super().receive()
            except anyio.EndOfStream:
                if not self._pending:
                    raise
                rest, self._pending = "".join(self._pending), []
                return rest
            cut = chunk.rfind("\n") + 1
            if not cut:
                self._pending.append(chunk)
                continue
            whole = "".join([*self._pending, chunk[:cut]])
            self._pending = [chunk[cut:]] if cut < len(chunk) else []
            self._gave_big = len(whole) > BIG_LINE
            return whole


mcp_stdio.TextReceiveStream = _WholeLines  # type: ignore[misc]

_PIPE_CHUNK = 65536


def _read_some(fd: int) -> bytes | None:
    """Non-blocking read: bytes, b"" at end of file, None when nothing is ready."""
    try:
        return os.read(fd, _PIPE_CHUNK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


class _EndWatchingStream:
    """The transport's receive stream, reporting when it ends: the server is gone. A reply
    the SDK could not parse becomes an error for the request it answers."""

    def __init__(self, inner: Any, on_end: Callable[[str], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    def __getattr__(self, name: str) -> Any:  # last_context, statistics, ...
        return getattr(self._inner, name)

    def __aiter__(self) -> _EndWatchingStream:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            self._on_end("the connection ended")
            raise StopAsyncIteration from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end("the connection was closed")
            raise
        except anyio.get_cancelled_exc_class():
            # The session's reader is cancelled only when the session is torn down: by us
            # (then the report is ignored) or by its transport failing (an HTTP POST that
            # could not connect takes the whole transport down).
            self._on_end("the transport failed")
            raise
        if isinstance(item, Exception):  # a line the SDK could not parse, or a fault
            return reply_error_for(item) or item
        return item

    async def receive(self) -> Any:
        return await self.__anext__()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> _EndWatchingStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        return await self._inner.__aexit__(*exc)


@contextlib.asynccontextmanager
async def _watch_end(transport: Any, on_end: Callable[[str], None]) -> AsyncIterator[Any]:
    async with transport as (read_stream, write_stream):
        yield _EndWatchingStream(read_stream, on_end), write_stream
