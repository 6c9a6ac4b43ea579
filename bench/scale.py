"""Scale and the edges of a run: many tools, many servers, start-up to the first model
request and the tail after the answer. Each row's baseline is measured in the same run.

The tool servers here are `tests/support/many_tools_server.py` (hand-written, starts in ~30 ms for
any tool count) so the rows measure the client, and the bundled server where start-up is
the point. The floor loop is `bench/floor_loop.py`: the smallest honest SDK + OpenAI loop.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.measures import RUN_MCP, Row, run_cli, workdir
from bench.timing import REPO_ROOT, TimedLLM, agent_env, median
from bench.worker import run_worker
from tests.support.fake_llm import text, tool_calls

MANY_SERVER = str(REPO_ROOT / "tests" / "support" / "many_tools_server.py")
FLOOR_LOOP = str(REPO_ROOT / "bench" / "floor_loop.py")
SEARCH_TOOLS = 1000
SEARCH_ROUNDS = 10
MANY_SERVERS, TOOLS_EACH = 20, 50
HUGE = 50_000
EXIT_TARGET = 0.3  # seconds from the answer on stdout to the end of the process


def _many_args(count: int, name: str = "many") -> list[str]:
    return ["--server-command", f"{sys.executable} {MANY_SERVER} {count}", "--server-name", name]


# --------------------------------------------------------------------------- tool search


def _search_run(tmp: Path, search: str, rounds: int) -> tuple[float, float]:
    """One run over 1,000 tools: (mean request KiB, median agent ms between requests)."""
    config = tmp / f"search-{search}.toml"
    config.write_text(f'[agent]\ntool_search = "{search}"\n')
    script = [tool_calls(("many__list_issue", {"id": str(i)})) for i in range(rounds)]
    with TimedLLM(*script, text("done")) as llm:
        run_cli([*_many_args(SEARCH_TOOLS), "--config", str(config), "-p", "go"], llm, tmp)
        sizes = [len(json.dumps(body)) / 1024 for body in llm.requests]
        spans = sorted(llm.spans, key=lambda s: s.arrived)
    gaps = [(b.arrived - a.finished) * 1000 for a, b in zip(spans, spans[1:], strict=False)]
    if len(gaps) != rounds:
        raise RuntimeError(f"expected {rounds + 1} model requests, got {len(spans)}")
    return statistics.mean(sizes), median(gaps)


def tool_search(reps: int, smoke: bool) -> list[Row]:
    """Request size and per-step agent time with 1,000 tools: search on vs off (alternating)."""
    rounds = 3 if smoke else SEARCH_ROUNDS
    on: list[tuple[float, float]] = []
    off: list[tuple[float, float]] = []
    with workdir("search") as tmp:
        for _ in range(reps):
            on.append(_search_run(tmp, "auto", rounds))
            off.append(_search_run(tmp, "off", rounds))
    label = f"{SEARCH_TOOLS} tools, tool search on vs off"
    detail = {"on": on, "off": off, "rounds": rounds}
    return [
        Row(
            "search_request_size",
            f"{label}: mean request size",
            "KiB",
            median([kib for kib, _ in on]),
            median([kib for kib, _ in off]),
            "ratio",
            0.1,
            detail,
        ),
        Row(
            "search_step_time",
            f"{label}: agent time per step (tool call + request)",
            "ms",
            median([ms for _, ms in on]),
            median([ms for _, ms in off]),
            "ratio",
            1.0,
        ),
    ]


# --------------------------------------------------------------------------- many servers


def connect_many(servers: int = MANY_SERVERS) -> list[Row]:
    """connect_all of N stdio servers with 50 tools each vs the bare SDK connecting them."""
    with workdir("many-servers") as tmp:
        server = {"command": sys.executable, "args": [MANY_SERVER, str(TOOLS_EACH)]}
        config = tmp / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {f"s{i}": server for i in range(servers)}}))
        result = run_worker(
            "connect_many", {"mcp_config": str(config), "root": str(tmp)}, cwd=tmp, timeout=180
        )
    return [
        Row(
            "many_servers",
            f"connect {servers} servers x {TOOLS_EACH} tools vs the bare SDK connecting them",
            "s",
            result["ours_seconds"],
            result["sdk_seconds"],
            "ratio",
            1.5,
            result,
        )
    ]


# --------------------------------------------------------------------------- a huge server


def huge_server(smoke: bool) -> list[Row]:
    """`run_mcp.py -p hi` with a 50,000-tool server vs with a 1,000-tool one (the cap)."""
    count = 10_000 if smoke else HUGE
    with workdir("huge") as tmp, TimedLLM(text("hi"), text("hi")) as llm:
        huge = run_cli([*_many_args(count), "-p", "hi"], llm, tmp)
        capped = run_cli([*_many_args(1000), "-p", "hi"], llm, tmp)
    if f"announced {count} tools" not in huge.stderr:
        raise RuntimeError(f"no warning about the cut:\n{huge.stderr[-2000:]}")
    label = f"{count:,}-tool server (cut to 1,000) vs a 1,000-tool server: run_mcp.py -p hi"
    return [
        Row("huge_server_time", f"{label}, wall", "s", huge.seconds, capped.seconds, "ratio", 2.0),
        Row(
            "huge_server_rss",
            f"{label}, agent peak RSS",
            "MiB",
            huge.peak_rss_mib,
            capped.peak_rss_mib,
            "ratio",
            1.5,
        ),
    ]


# --------------------------------------------------------------------------- start-up, exit


@dataclass(frozen=True)
class Edges:
    """One single-shot run: seconds from spawn to the first model request, to the answer on
    stdout, and from the answer to the end of the process."""

    first_request: float
    answer: float
    tail: float


def _edges(argv: list[str], llm: TimedLLM, cwd: Path, env: dict[str, str]) -> Edges:
    known = len(llm.spans)
    started = time.monotonic()
    with open(cwd / ".bench-stderr", "wb") as err:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()
        answered = time.monotonic()
        proc.stdout.read()
        code = proc.wait()
        ended = time.monotonic()
    if code != 0 or line.strip() != b"hello":
        stderr = (cwd / ".bench-stderr").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{argv[:3]} exited {code} with {line!r}:\n{stderr}")
    first = min(span.arrived for span in llm.spans[known:])
    return Edges(first - started, answered - started, ended - answered)


def edges(reps: int, warmup: bool = True) -> list[Row]:
    """Ours and the floor loop on the bundled server, alternating, one untimed warm-up each."""
    ours: list[Edges] = []
    floor: list[Edges] = []
    with workdir("edges") as tmp:
        server = [sys.executable, "-m", "agent.server", "--root", str(tmp)]
        with TimedLLM(*[text("hello") for _ in range(2 * reps + 2 * warmup)]) as llm:
            env = agent_env(llm.base_url, tmp / "state")
            floor_env = {**env, "PYTHONPATH": str(REPO_ROOT)}
            ours_argv = [sys.executable, RUN_MCP, "-p", "hi"]
            floor_argv = [sys.executable, FLOOR_LOOP, "hi", "--", *server]
            if warmup:
                _edges(ours_argv, llm, tmp, env)
                _edges(floor_argv, llm, tmp, floor_env)
            for _ in range(reps):
                ours.append(_edges(ours_argv, llm, tmp, env))
                floor.append(_edges(floor_argv, llm, tmp, floor_env))
    detail = {"ours": [vars(e) for e in ours], "floor": [vars(e) for e in floor]}
    return [
        Row(
            "first_request",
            "start-up to the first model request vs the floor loop (bundled server)",
            "s",
            median([e.first_request for e in ours]),
            median([e.first_request for e in floor]),
            "ratio",
            1.0,
            detail,
        ),
        Row(
            "exit_tail",
            "answer-to-exit tail (ours; baseline: the floor loop's)",
            "s",
            median([e.tail for e in ours]),
            median([e.tail for e in floor]),
            "at_most",
            EXIT_TARGET,
        ),
    ]
