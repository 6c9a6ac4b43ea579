"""Start stdio servers before the heavy imports: their start-up overlaps ours.

Importing `mcp` and `openai` takes most of a second; a Python or Node server takes as long
to start. Spawning the servers as soon as the settings are known, then importing, makes
the first model request leave after the longer of the two instead of their sum. The
connection later adopts its process (the same command, environment, working directory,
own process group, stderr piped to its log) instead of spawning one; a reconnect spawns
as usual. This module imports nothing heavy: it runs before `mcp` is loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import anyio
import anyio.abc
import anyio.lowlevel

from agent.common.signals import signals_held
from agent.config.server_env import server_env
from agent.config.settings import ServerConfig
from agent.tools.sandbox import launch_argv

STOP_GRACE = 0.5  # seconds between SIGTERM to a server's group and SIGKILL


@dataclass
class Prestarted:
    """A spawned server waiting for its connection; `stderr` is the read end of its stderr."""

    popen: subprocess.Popen[bytes]
    stderr: int
    argv: tuple[str, ...]


@dataclass
class Prestarts:
    """The servers started early, by name, until each connection takes its own."""

    waiting: dict[str, Prestarted] = field(default_factory=dict)

    def take(self, config: ServerConfig) -> Prestarted | None:
        """The process for `config` if it was started with exactly these settings."""
        found = self.waiting.pop(config.name, None)
        if found is not None and found.argv != _argv(config):
            stop_prestarted(found)
            return None
        return found

    def close(self) -> None:
        """Stop what no connection took (the run ended before connecting: a config error,
        a signal, Ctrl-C), all within one grace."""
        stop_all(list(self.waiting.values()))
        self.waiting.clear()


def _argv(config: ServerConfig) -> tuple[str, ...]:
    return launch_argv(config)  # in its sandbox, when it has one


def prestart(servers: Iterable[ServerConfig], environ: Mapping[str, str]) -> Prestarts:
    """Spawn every enabled stdio server now; one that cannot start is left to the normal
    connect, which reports why."""
    started = Prestarts()
    try:
        for config in servers:
            if config.type != "stdio" or not config.enabled or not config.command:
                continue
            if config.cwd and not os.path.isdir(config.cwd):
                continue
            with signals_held():  # a signal now would lose the Popen: it waits till it is kept
                _spawn(config, environ, started)
    except BaseException:  # a signal (or Ctrl-C) that waited: the caller never gets these
        started.close()
        raise
    return started


def _spawn(config: ServerConfig, environ: Mapping[str, str], started: Prestarts) -> None:
    """Start one server and keep it in `started`; one that cannot start is skipped."""
    read_fd, write_fd = os.pipe()
    try:
        popen = subprocess.Popen(
            list(_argv(config)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=write_fd,
            env=server_env(config.env, environ),
            cwd=config.cwd,
            start_new_session=True,
        )
    except (OSError, ValueError):
        os.close(read_fd)
        return
    finally:
        os.close(write_fd)
    os.set_blocking(read_fd, False)
    started.waiting[config.name] = Prestarted(popen, read_fd, _argv(config))


def stop_prestarted(started: Prestarted) -> None:
    """Stop one server: see stop_all."""
    stop_all([started])


def stop_all(servers: list[Prestarted], grace: float = STOP_GRACE) -> None:
    """SIGTERM to each server's group and its pipes closed; after `grace` seconds SIGKILL
    to every group, so a server that ignores SIGTERM (or leaves children behind) does not
    outlive us. Each group is signalled only while its leader is unreaped (alive, or a
    zombie holding the pid), so the pid cannot have been reused by another process."""
    ours = [s for s in servers if s.popen.returncode is None]
    for started in ours:
        with contextlib.suppress(OSError):
            os.killpg(started.popen.pid, signal.SIGTERM)
    for started in servers:
        _close_pipes(started)
    deadline = time.monotonic() + grace
    for started in ours:
        _exited(started.popen.pid, deadline)
    for started in ours:
        with contextlib.suppress(OSError):
            os.killpg(started.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            started.popen.wait(grace)


def _exited(pid: int, deadline: float) -> bool:
    """Wait until `pid` has exited, without reaping it (the zombie keeps the pid ours)."""
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped already
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def _close_pipes(started: Prestarted) -> None:
    for pipe in (started.popen.stdin, started.popen.stdout):
        with contextlib.suppress(OSError):
            pipe.close()  # type: ignore[union-attr]
    if started.stderr >= 0:  # -1 once a connection's log pump owns it
        with contextlib.suppress(OSError):
            os.close(started.stderr)
        started.stderr = -1


class _PipeReader(anyio.abc.ByteReceiveStream):
    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self._reader, self._transport = reader, transport

    async def receive(self, max_bytes: int = 65536) -> bytes:
        data = await self._reader.read(max_bytes)
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._transport.close()
        await anyio.lowlevel.checkpoint()


class _PipeWriter(anyio.abc.ByteSendStream):
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer, self._closed = writer, False

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            self._writer.write(item)
            await self._writer.drain()
        except (ConnectionResetError, BrokenPipeError, RuntimeError) as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._closed = True
        self._writer.close()
        await anyio.lowlevel.checkpoint()


class AdoptedProcess(anyio.abc.Process):
    """A prestarted Popen as the anyio process the SDK's stdio transport expects."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: _PipeWriter, stdout: _PipeReader):
        self._popen, self._stdin, self._stdout = popen, stdin, stdout

    @classmethod
    async def adopt(cls, popen: subprocess.Popen[bytes]) -> AdoptedProcess:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), popen.stdout
        )
        write_transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, popen.stdin
        )
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        return cls(popen, _PipeWriter(writer), _PipeReader(reader, read_transport))

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._stdin.aclose()
            await self._stdout.aclose()
            await self.wait()

    async def wait(self) -> int:
        while (code := self._popen.poll()) is None:  # noqa: ASYNC110 - a Popen has no event
            await anyio.sleep(0.01)
        return code

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    def send_signal(self, signal: int) -> None:
        self._popen.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> None:
        return None
