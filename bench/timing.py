"""Timing primitives shared by the measurements: a timed scripted model, timed subprocesses.

The scripted model runs in the bench process while the agent runs in a child process, so
the model's own time (request arrival -> last byte handed to the server) can be subtracted
from the agent's wall time without the two competing for one GIL.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tests.support.fake_llm import ScriptedLLM

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parent.parent
POLL_INTERVAL = 0.01  # seconds between /proc samples of a child's peak memory


@dataclass(frozen=True)
class Span:
    """One model request as the scripted server saw it (time.monotonic seconds)."""

    arrived: float
    finished: float

    @property
    def seconds(self) -> float:
        return self.finished - self.arrived


class TimedLLM(ScriptedLLM):
    """ScriptedLLM that records, per request, when it arrived and when its reply ended."""

    def __init__(self, *script: object) -> None:
        super().__init__(*script)  # type: ignore[arg-type]
        self.spans: list[Span] = []

    async def _handle(self, request: Request) -> Response:
        arrived = time.monotonic()
        response = await super()._handle(request)
        if isinstance(response, StreamingResponse):
            response.body_iterator = self._timed(response.body_iterator, arrived)
        else:
            self.spans.append(Span(arrived, time.monotonic()))
        return response

    async def _timed(self, body: AsyncIterable[T], arrived: float) -> AsyncIterator[T]:
        async for chunk in body:
            yield chunk
        self.spans.append(Span(arrived, time.monotonic()))

    def model_seconds(self, first: int = 0, last: int | None = None) -> float:
        """Total time the model spent on requests[first:last]."""
        return sum(span.seconds for span in self.spans[first:last])


@dataclass(frozen=True)
class ProcResult:
    """A finished child: exit code, wall seconds, peak RSS (MiB) and its captured output."""

    returncode: int
    seconds: float
    peak_rss_mib: float
    stdout: str
    stderr: str


def _vm_hwm_kib(pid: int) -> int | None:
    """The process's own peak RSS so far (VmHWM), or None once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run_timed(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout: float = 120.0,
) -> ProcResult:
    """Run argv, measuring wall time and the child's own peak RSS.

    Peak RSS is sampled from /proc/<pid>/status (VmHWM only grows, so the last sample before
    exit is the peak); wait4's ru_maxrss would also count the tool servers the agent reaped.
    """
    out_path, err_path = cwd / ".bench-stdout", cwd / ".bench-stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        peak_kib, status = 0, None
        deadline = started + timeout
        while status is None:
            hwm = _vm_hwm_kib(proc.pid)
            peak_kib = max(peak_kib, hwm or 0)
            pid, raw, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status = raw
                break
            if time.perf_counter() > deadline:
                proc.kill()
                proc.wait()
                raise TimeoutError(f"{argv[:3]} did not finish within {timeout:g} s")
            time.sleep(POLL_INTERVAL)
        seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ProcResult(
        proc.returncode,
        seconds,
        peak_kib / 1024,
        out_path.read_text(errors="replace"),
        err_path.read_text(errors="replace"),
    )


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def agent_env(base_url: str, state_dir: Path) -> dict[str, str]:
    """The environment a user's single-shot run would have, pointed at the scripted model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MCP_AGENT_"))}
    env.update(
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="x",
        MCP_AGENT_STATE_DIR=str(state_dir),
        NO_COLOR="1",
    )
    return env
