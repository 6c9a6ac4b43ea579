"""What OpenTelemetry costs a run: start-up and per-step, off (no OTEL_*) and on (spans
exported to a local OTLP/HTTP endpoint), measured alternately in the same conditions.

Off is the default and must cost nothing (the SDK and the exporter are never imported:
tests/extensions/test_telemetry.py); on is documented, not targeted.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.measures import RUN_MCP, Row, workdir
from bench.timing import ProcResult, TimedLLM, agent_env, median, run_timed
from tests.support.asgi_thread import serve
from tests.support.fake_llm import text, tool_calls

ROUNDS = 10  # tool rounds of the per-step runs


@contextmanager
def otlp_sink() -> Iterator[tuple[str, list[int]]]:
    """An OTLP/HTTP traces endpoint that accepts and counts export requests."""
    received: list[int] = []

    async def traces(request: Request) -> Response:
        received.append(len(await request.body()))
        return Response(b"", media_type="application/x-protobuf")

    app = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
    with serve(app) as port:
        yield f"http://127.0.0.1:{port}", received


def _run(llm: TimedLLM, cwd: Path, args: list[str], endpoint: str | None) -> ProcResult:
    env = agent_env(llm.base_url, cwd / "state")
    env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    result = run_timed([sys.executable, RUN_MCP, *args], cwd=cwd, env=env, timeout=180)
    if result.returncode != 0:
        raise RuntimeError(f"run_mcp.py {args[:3]} exited {result.returncode}: {result.stderr}")
    return result


def telemetry_overhead(reps: int) -> list[Row]:
    """Alternating off/on runs: `-p hi` (start-up, wall time) and a ROUNDS-round run, whose
    per-step cost is the median gap between one model reply's end and the next request
    (the tool call, the loop and, when on, its spans): start-up noise does not enter it."""
    rounds = [tool_calls(("local__get_current_time", {})) for _ in range(ROUNDS)]
    one_pair = [text("hello"), text("hello"), *rounds, text("done"), *rounds, text("done")]
    start: dict[str, list[float]] = {"off": [], "on": []}
    gaps: dict[str, list[float]] = {"off": [], "on": []}
    with workdir("telemetry") as tmp, otlp_sink() as (endpoint, received):
        with TimedLLM(text("warm"), *(one_pair * reps)) as llm:
            _run(llm, tmp, ["-p", "hi"], None)
            for _ in range(reps):
                for key, where in (("off", None), ("on", endpoint)):
                    start[key].append(_run(llm, tmp, ["-p", "hi"], where).seconds)
                for key, where in (("off", None), ("on", endpoint)):
                    first = len(llm.spans)
                    _run(llm, tmp, ["-p", "go", "--yes"], where)
                    spans = llm.spans[first:]
                    gaps[key] += [b.arrived - a.finished for a, b in pairwise(spans)]
            llm.assert_complete()
        if not received:
            raise RuntimeError("telemetry on, but no spans reached the OTLP endpoint")
    detail = {"start_s": start, "exports": len(received), "reps": reps}
    return [
        Row(
            "telemetry_startup",
            "start-up with OpenTelemetry on (OTLP/HTTP) vs off (info)",
            "s",
            median(start["on"]),
            median(start["off"]),
            "delta",
            None,
            detail,
        ),
        Row(
            "telemetry_per_step",
            f"per step ({ROUNDS} get_current_time rounds) with OpenTelemetry on vs off (info)",
            "ms",
            median(gaps["on"]) * 1000,
            median(gaps["off"]) * 1000,
            "delta",
            None,
            {"gaps_ms": {k: [round(g * 1000, 2) for g in v] for k, v in gaps.items()}},
        ),
    ]
