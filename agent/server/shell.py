"""`bash` for the model: a child in its own process group, killed whole on timeout or cancel.

`sleep 100 | cat` or a forked daemon would outlive a plain kill of the shell; killing the
group is what makes a timeout or a Ctrl-C in the agent actually stop the work. Under a
sandbox policy the shell runs inside bubblewrap (agent/common/sandbox.py); bwrap is then
the group's leader, and its own pid namespace ends with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process

from agent.common.sandbox import Policy, bwrap_argv

READ_CHUNK = 65536
PIPE_GRACE = 0.3  # after the shell exits, how long background jobs may hold the pipe open
PROGRESS_EVERY = 0.5  # seconds between two output lines reported as progress
PROGRESS_LINE = 200  # characters of a line reported as progress

# Told the last line the command printed, as it runs (MCP progress): what a person sees
# of a long command, and what stays on screen when they cancel it.
OnLine = Callable[[str], Awaitable[None]]


@dataclass
class ShellResult:
    output: str
    exit_code: int | None  # None: killed on timeout
    cut_bytes: int  # output beyond the cap that was dropped
    timed_out: bool


class _CappedBuffer:
    """Keeps the head and the tail of the output: errors tend to be at the end."""

    def __init__(self, cap: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.cap = cap
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.cap // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        excess = len(self.tail) - self.cap // 2
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        head = self.head.decode(errors="replace")
        tail = self.tail.decode(errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[… {self.dropped} bytes of output cut …]\n{tail}"


async def run_bash(
    command: str,
    cwd: Path,
    timeout: float,
    cap: int,
    sandbox: Policy | None = None,
    on_line: OnLine | None = None,
) -> ShellResult:
    argv = ["/bin/bash", "-c", command]
    process = await anyio.open_process(
        bwrap_argv(sandbox, argv, str(cwd)) if sandbox is not None else argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so the whole tree can be killed
    )
    buffer = _CappedBuffer(cap)
    eof = anyio.Event()
    async with process:
        assert process.stdout is not None
        try:
            with anyio.move_on_after(timeout) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, process.stdout, buffer, eof, on_line)
                    await process.wait()
                    with anyio.move_on_after(PIPE_GRACE):  # a background job may hold the pipe
                        await eof.wait()
                    tg.cancel_scope.cancel()
        finally:
            if process.returncode is None:  # timed out, or the call was cancelled
                _kill_group(process)
    timed_out = scope.cancelled_caught
    return ShellResult(
        output=buffer.text(),
        exit_code=None if timed_out else process.returncode,
        cut_bytes=buffer.dropped,
        timed_out=timed_out,
    )


async def _drain(
    stream: ByteReceiveStream,
    buffer: _CappedBuffer,
    eof: anyio.Event,
    on_line: OnLine | None = None,
) -> None:
    last = 0.0
    try:
        while True:
            data = await stream.receive(READ_CHUNK)
            buffer.add(data)
            if on_line is not None and time.monotonic() - last >= PROGRESS_EVERY:
                line = _last_line(data)
                if line:
                    last = time.monotonic()
                    await on_line(line)
    except (anyio.EndOfStream, anyio.ClosedResourceError):
        pass
    finally:
        eof.set()


def _last_line(data: bytes) -> str:
    """The last non-blank line of a chunk of output, cut to PROGRESS_LINE characters."""
    for raw in reversed(data.decode(errors="replace").splitlines()):
        if raw.strip():
            return raw.strip()[:PROGRESS_LINE]
    return ""


def _kill_group(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
