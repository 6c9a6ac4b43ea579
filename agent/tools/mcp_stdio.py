"""Our stdio transport, written to the SDK's public `Transport` protocol (an async context
manager yielding the read and write streams a `Client` takes); nothing of the SDK's own
stdio transport is used or patched. What differs from it is each a constructor argument:

- `prestarted`: adopt the server process started before the imports (agent.tools.prestart)
  instead of spawning one;
- the reader hands on whole lines (`WholeLines`: linear in a line's length, where
  joining a leftover with every 64 KiB chunk is quadratic) and parses a long line with
  json's C decoder;
- `tool_cap`: a tools/list page past the cap is cut before it is validated;
- `stop`: how long a server has after its stdin closes (shortened once the process is
  about to end, `StopGrace.hasten`); then SIGTERM to its process group, SIGKILL after, and
  SIGKILL to what its group left behind once the server itself is gone.

Also here: the stream wrapper that notices any transport ending (stdio, SSE, HTTP).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc
import anyio.lowlevel
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from anyio.streams.text import TextReceiveStream
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from agent.tools.prestart import AdoptedProcess, Prestarted, stop_prestarted
from agent.tools.toolcap import cut_tool_list
from agent.tools.unparsable import reply_error_for

STOP_GRACE = 0.5  # seconds a server has to exit after its stdin closes, then SIGTERM
EXIT_GRACE = 0.15  # the same wait when the process is about to end (StopGrace.hasten)
TERM_GRACE = 2.0  # seconds from SIGTERM to the group until SIGKILL
REAP_WAIT = 2.0  # for the event loop to see a killed server exit
FLUSH_WAIT = 0.5  # for messages already accepted to reach the server's stdin
BIG_LINE = 1_000_000  # characters; a stdio message this long may be an oversized tool list

logger = logging.getLogger(__name__)
Log = Callable[[str], None]


@dataclass
class StopGrace:
    """How long a server has after its stdin closes. The SDK's 2 s default added 2 s to
    every exit for servers that ignore stdin EOF (server-everything and most Node
    servers); SIGTERM after it is still a graceful request."""

    seconds: float = STOP_GRACE

    def hasten(self, grace: float = EXIT_GRACE) -> None:
        """The process ends once the servers are closed: a caller waits on this tail
        after its answer, and a server that must save state on EOF has had the whole run."""
        self.seconds = grace


@dataclass
class ToolCap:
    """The most tools one tools/list page may bring in, and how many a cut page held."""

    limit: int
    announced: int = 0


@contextlib.asynccontextmanager
async def stdio_transport(
    params: StdioServerParameters,
    *,
    errlog: IO[bytes],
    prestarted: Prestarted | None = None,
    tool_cap: ToolCap | None = None,
    stop: StopGrace | None = None,
    log: Log | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """A server over its stdin and stdout: spawned (its stderr to `errlog`, its own process
    group) or adopted from `prestarted`. The streams carry `SessionMessage`s, and a line
    that could not be parsed as the exception, as the SDK's transports do."""
    process = await _spawn_or_adopt(params, errlog, prestarted)
    # No awaits until the task group is entered: a cancellation there would leak the process.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    pipes = _Pipes(process, params, tool_cap, log or _log_to_logger)
    async with anyio.create_task_group() as tg:
        tg.start_soon(pipes.read_stdout, read_writer)
        tg.start_soon(pipes.write_stdin, write_reader, read_writer)
        try:
            yield read_stream, write_stream
        finally:
            pipes.stopping = True
            with anyio.CancelScope(shield=True):  # every wait inside is bounded
                read_stream.close()  # a server stuck writing its stdout cannot read stdin
                write_stream.close()
                with anyio.move_on_after(FLUSH_WAIT):
                    await pipes.writer_done.wait()
                await _stop(process, (stop or StopGrace()).seconds, pipes.log)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()  # a pipe a killed server's child holds open


async def _spawn_or_adopt(
    params: StdioServerParameters, errlog: IO[bytes], prestarted: Prestarted | None
) -> anyio.abc.Process:
    """The prestarted process when it was started with these settings, else a new one."""
    if prestarted is not None:
        if prestarted.argv == (params.command, *params.args):  # (died at start: shows as usual)
            return await AdoptedProcess.adopt(prestarted.popen)
        stop_prestarted(prestarted)
    return await anyio.open_process(
        [params.command, *params.args],
        env=get_default_environment() | (params.env or {}),
        stderr=errlog,
        cwd=params.cwd,
        start_new_session=True,  # its own group: stopped as one
    )


@dataclass(eq=False)
class _Pipes:
    """The two tasks between the server's pipes and the session's streams."""

    process: anyio.abc.Process
    params: StdioServerParameters
    tool_cap: ToolCap | None
    log: Log
    stopping: bool = False
    writer_done: anyio.Event = field(default_factory=anyio.Event)

    async def read_stdout(self, out: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        assert self.process.stdout is not None
        text = WholeLines(
            self.process.stdout,
            encoding=self.params.encoding,
            errors=self.params.encoding_error_handler,
        )
        try:
            async with out:
                try:
                    while True:
                        try:
                            lines = await text.receive()
                        except anyio.EndOfStream:
                            return
                        if not await self._hand_on(lines, out):
                            return  # the session is gone; only the drain below remains
                        # A 20 MB image is 27 MB of JSON: not held until the next reply.
                        del lines
                finally:
                    await _drain(self.process.stdout)
        except anyio.ClosedResourceError:
            pass  # our own stop closed stdout under the read
        except (anyio.BrokenResourceError, ConnectionError) as exc:
            if not self.stopping:
                self.log(f"[error] stdio: reading the server's stdout failed: {exc!r}")

    async def _hand_on(
        self, lines: str, out: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> bool:
        """Each line of `lines` to the session, one at a time (no read-ahead while the
        session is busy); False once the session has gone."""
        for line in lines.split("\n"):
            if not line:
                continue  # between messages, or the end of the last one
            try:
                await out.send(self._parse(line))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return False
        return True

    def _parse(self, line: str) -> SessionMessage | Exception:
        """A tools/list page past the cap is cut before it is validated.

        The SDK turns every tool of a page into pydantic models (and validates it twice):
        for a server announcing 50,000 tools that is most of 15 s and 400 MB. Cutting the
        raw JSON (agent.tools.toolcap: the C decoder, one tool at a time) keeps the cost
        bounded by the cap, not by the server.
        """
        cap = self.tool_cap
        if cap is not None and len(line) > BIG_LINE and '"tools"' in line:
            cut = cut_tool_list(line, cap.limit)
            if cut is not None and cut[1] > cap.limit:
                message, cap.announced = cut
                message["result"].pop("nextCursor", None)
                line = json.dumps(message)
        parsed = _parse_big_line(line) if len(line) > BIG_LINE else _parse_line(line)
        if isinstance(parsed, Exception):
            self.log(f"[error] stdio: a line from the server is not JSON-RPC: {parsed}")
        return parsed

    async def write_stdin(
        self,
        messages: MemoryObjectReceiveStream[SessionMessage],
        out: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        assert self.process.stdin is not None
        try:
            async with messages:
                async for message in messages:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    encoded = (data + "\n").encode(
                        self.params.encoding, errors=self.params.encoding_error_handler
                    )
                    await self.process.stdin.send(encoded)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still be alive: the session sees the connection end instead
            # of a request hanging forever.
            await out.aclose()
        finally:
            self.writer_done.set()


def _parse_line(line: str) -> SessionMessage | Exception:
    """One line; a parse error comes back as a value, for the session to surface."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        return exc
    return SessionMessage(message)


def _parse_big_line(line: str) -> SessionMessage | Exception:
    """json's C decoder, then the model from those objects. pydantic's `validate_json`
    builds a tree of its own first: a 27 MB image reply was held three times at once, here
    once more than the line (the model keeps json's strings). Failures go the usual way."""
    try:
        message = types.jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False)
    except (ValueError, RecursionError):  # json's and pydantic's errors are ValueErrors
        return _parse_line(line)
    return SessionMessage(message)


def _log_to_logger(line: str) -> None:
    logger.warning(line)


@dataclass(eq=False)
class WholeLines(TextReceiveStream):
    """A stdio server's output, decoded, in pieces that end at a line break.

    Joining the leftover with every 64 KiB chunk and splitting the lot again is quadratic
    in the length of a line: seconds for a 10 MB tool list. Whole lines are linear.
    """

    _pending: list[str] = field(init=False, default_factory=list)

    async def receive(self) -> str:
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
            return whole


async def _drain(stdout: anyio.abc.ByteReceiveStream) -> None:
    """Read and drop the rest of stdout: a server flushing its output must not block on a
    full pipe and miss its chance to exit. Ends when the stop closes the pipe."""
    with anyio.CancelScope(shield=True):
        with contextlib.suppress(
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
            ConnectionError,
            OSError,
        ):
            while True:
                await stdout.receive()


async def _stop(process: anyio.abc.Process, grace: float, log: Log) -> None:
    """Close stdin, give the server `grace` seconds, then SIGTERM its group and SIGKILL
    after TERM_GRACE. A server that exits promptly may leave children in its group
    (reparented to init): once it is gone, they get SIGKILL."""
    try:
        await _close_quietly(process.stdin)
        if not await _exited(process, grace):
            await _terminate_group(process)
            if not await _exited(process, REAP_WAIT):
                log(f"[warning] stdio: server process {process.pid} outlived SIGKILL")
        await _close_quietly(process.stdout)
        _close_subprocess_transport(process)
    finally:
        if os.name == "posix" and _leader_gone(process.pid):
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)


async def _close_quietly(stream: anyio.abc.AsyncResource | None) -> None:
    if stream is not None:
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await stream.aclose()


async def _exited(process: anyio.abc.Process, timeout: float) -> bool:
    """Whether the process exited within `timeout`. Polled: `process.wait()` also waits
    for the pipes' end, which a child that inherited them holds open."""
    with anyio.move_on_after(timeout):
        while process.returncode is None:  # noqa: ASYNC110 - no event tells of an exit
            await anyio.sleep(0.01)
        return True
    return False


async def _terminate_group(process: anyio.abc.Process) -> None:
    """SIGTERM to the server's group (it leads it: the group id is its pid), SIGKILL to
    what is left after TERM_GRACE."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:
        pass  # not proof that the group is gone: wait and escalate
    with anyio.move_on_after(TERM_GRACE):
        while _group_alive(process.pid):
            _ = process.returncode  # reaps the leader where reading it does
            await anyio.sleep(0.01)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a zombie or a member we may not signal: not gone
    return True


def _close_subprocess_transport(process: anyio.abc.Process) -> None:
    """Close asyncio's transport of the process now: a descendant holding a pipe end
    would otherwise keep it open (and warning at exit). anyio offers no public handle."""
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        with contextlib.suppress(PermissionError):
            close()


def _leader_gone(pid: int) -> bool:
    """Whether the group `pid` has lost its leader (our server): then what is left in it
    are its orphans. A live process with that pid is a new one that reused it: hands off."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


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
        if isinstance(item, Exception):  # a line that could not be parsed, or a fault
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
