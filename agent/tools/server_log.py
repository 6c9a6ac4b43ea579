"""A server's log file: its stderr (pumped from a pipe), its MCP log messages and the SDK's
own records for its connection, all redacted, in `<state>/logs/<server>.log`.

The file is private like the transcripts (stderr may say more than it should), written in
blocks (a flood of log lines must not cost one write each) and rotated at LOG_LIMIT, so a
server that floods it keeps only its newest lines, never the whole disk.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import anyio
from anyio.abc import TaskGroup

from agent.common.private import private_folder
from agent.tools.server_errors import first_error_line

STDERR_TAIL_LINES = 5
LOG_LIMIT = 10 * 1024 * 1024  # bytes of a server's log before it is rotated
LOG_FLUSH_INTERVAL = 0.2  # seconds; a burst of log lines is written in blocks
_PIPE_CHUNK = 65536

# The SDK logs transport errors (with tracebacks) on the `mcp` logger; without a handler
# Python prints them on the terminal. Each connection's owner task sets its log writer here,
# and the transport's tasks inherit it, so each record lands in that server's log file.
_connection_log: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "mcp_agent_connection_log", default=None
)


class ServerLog:
    """One server's log file, opened afresh by each connection attempt.

    `redact` is asked for every line (it learns secrets during the run, so it is looked up
    each time, not kept). `tail()` reads only what the current attempt wrote.
    """

    def __init__(self, log_dir: Path, server: str, redact: Callable[[str], str]) -> None:
        self.path = log_dir / f"{safe_filename(server)}.log"
        self._redact = redact
        self._file: IO[str] | None = None
        self._start = 0  # offset in the log where the current attempt began
        self._bytes = 0
        self._flushed = float("-inf")  # time.monotonic() of the log's last flush

    def open(self, stack: contextlib.AsyncExitStack) -> None:
        """Open the file for one connection attempt (closed when `stack` unwinds) and take
        the SDK's log records of this task and the tasks it starts."""
        private_folder(self.path.parent)
        self._file = self._open_file()
        stack.callback(self._close)
        self._start = self._bytes
        _route_sdk_logs()
        _connection_log.set(self.write)  # inherited by the transport's tasks

    def _open_file(self) -> IO[str]:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._bytes = os.fstat(fd).st_size
        # Block-buffered: a flood of 20,000 log messages must not cost 20,000 writes.
        return open(fd, "a", encoding="utf-8")

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()

    def write(self, line: str, *, redacted: bool = False) -> None:
        """Append a line. The first line after a quiet spell reaches the file at once; in a
        burst the file is flushed at most every LOG_FLUSH_INTERVAL (and when a call ends,
        its tail is read, or the connection closes)."""
        if self._file is None or self._file.closed:
            return
        text = (line if redacted else self._redact(line)).rstrip("\n") + "\n"
        self._file.write(text)
        self._bytes += len(text)
        if self._bytes > LOG_LIMIT:
            self._rotate()
        now = time.monotonic()
        if now - self._flushed >= LOG_FLUSH_INTERVAL:
            self.flush(now)

    def flush(self, now: float | None = None) -> None:
        if self._file is not None and not self._file.closed:
            self._file.flush()
        self._flushed = time.monotonic() if now is None else now

    def _rotate(self) -> None:
        """Keep only the newest LOG_LIMIT to 2 x LOG_LIMIT bytes: this file and one `.1`."""
        assert self._file is not None
        self._file.close()
        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        self._file = self._open_file()
        self._start = 0

    def recent(self, limit: int = 200) -> str:
        """The current attempt's last `limit` lines, whole (a denial's path may be on a
        `cause:` line the tail leaves out)."""
        self.flush()
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._start)
                text = fh.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-limit:])

    def tail(self) -> list[str]:
        """The last lines the server wrote in the current attempt (our notes left out), its
        first error line kept in front when it scrolled out of them."""
        self.flush()
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._start)
                text = fh.read().decode(errors="replace")
        except OSError:
            return []
        # Our own notes in the log ("[agent] ...") are not what the server said.
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("[agent]")]
        last = lines[-STDERR_TAIL_LINES:]
        error = first_error_line(lines)  # kept first, however long the usage text after it
        if error is not None and error not in (line.strip() for line in last):
            last = [error, *lines[-(STDERR_TAIL_LINES - 1) :]]
        return last

    # ----------------------------------------------------------------- the stderr pump

    async def stderr_pipe(
        self, stack: contextlib.AsyncExitStack, read_fd: int | None = None
    ) -> IO[bytes]:
        """A pipe for the server's stderr, pumped line by line into the log, redacted.

        The write end is closed here once the stack unwinds (the child keeps its copy); the
        pump drains what is left before it stops, so a crash's last words reach the log.
        A prestarted server's stderr pipe (`read_fd`) already exists: only the pump starts.
        """
        if read_fd is None:
            read_fd, write_fd = os.pipe()
            os.set_blocking(read_fd, False)
            writer: IO[bytes] = stack.enter_context(os.fdopen(write_fd, "wb", buffering=0))
        else:  # the spawn is skipped, so this is never written to
            writer = stack.enter_context(open(os.devnull, "wb"))  # noqa: SIM115, ASYNC230
        stack.callback(os.close, read_fd)  # LIFO: closed only after the pump task has ended
        tg = await stack.enter_async_context(anyio.create_task_group())
        stack.push_async_callback(self._stop_pump, tg, read_fd)
        tg.start_soon(self._pump, read_fd)
        return writer

    async def _pump(self, fd: int) -> None:
        pending = b""
        try:
            while True:
                await anyio.wait_readable(fd)
                chunk = _read_some(fd)
                if chunk is None:
                    continue
                if not chunk:
                    break
                pending = self._write_lines(pending + chunk)
                self.flush()  # stderr is read in chunks: one write per chunk, at once
        finally:
            if pending:
                self.write(pending.decode(errors="replace"))

    async def _stop_pump(self, tg: TaskGroup, fd: int) -> None:
        pending = b""
        while chunk := _read_some(fd):  # whatever the exited process left in the pipe
            pending = self._write_lines(pending + chunk)
        if pending:
            self.write(pending.decode(errors="replace"))
        tg.cancel_scope.cancel()

    def _write_lines(self, data: bytes) -> bytes:
        *lines, rest = data.split(b"\n")
        for line in lines:
            self.write(line.decode(errors="replace"))
        return rest


def _read_some(fd: int) -> bytes | None:
    """Non-blocking read: bytes, b"" at end of file, None when nothing is ready."""
    try:
        return os.read(fd, _PIPE_CHUNK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


class _ConnectionLogHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        write = _connection_log.get()
        if write is None:
            return  # not from a connection of ours: nothing to attach it to, keep it quiet
        try:
            write(f"[{record.levelname.lower()}] {record.name}: {self.format(record)}")
        except Exception:
            self.handleError(record)


_HANDLER = _ConnectionLogHandler()


def _route_sdk_logs() -> None:
    logger = logging.getLogger("mcp")
    if _HANDLER not in logger.handlers:
        logger.addHandler(_HANDLER)
        logger.propagate = False


def safe_filename(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "server"
