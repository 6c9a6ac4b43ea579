"""Tasks and protocol eras: what following a task costs over the same work done as a plain
call, and what connecting to a 2026-07-28-only server costs over a legacy one.

Both sides of each row run in this one process, alternating, against the same server code
(tests/support/tasks_server.py, tests/support/modern_server.py over stdio), through the agent's own
MCPServerConnection, so the ratio is the client's doing, not the machine's load.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio

from agent.config.settings import ServerConfig
from agent.tools.mcp import MCPServerConnection
from agent.tools.tasks import TaskWatch
from bench.measures import Row, workdir
from bench.timing import REPO_ROOT, median

TASKS_SERVER = str(REPO_ROOT / "tests" / "support" / "tasks_server.py")
MODERN_SERVER = str(REPO_ROOT / "tests" / "support" / "modern_server.py")
TASK_SECONDS = 30.0  # the "30 s task"
POLL_MS = 1000  # the interval the server suggests (a realistic one; each poll is a request)


async def _connected(config: ServerConfig, logs: Path) -> MCPServerConnection:
    return MCPServerConnection(config, connect_timeout=60, log_dir=logs)


async def _call_pair(tmp: Path, stages: int, stage_s: float) -> tuple[float, float]:
    """(seconds of count_slowly as a task, seconds of count_plainly), one connection, the
    second of two alternating rounds (the first warms the connection and the server)."""
    env = {
        "TASKS_SERVER_STATE": str(tmp / "state"),
        "TASKS_STAGE_SECONDS": str(stage_s),
        "TASKS_POLL_MS": str(POLL_MS),
    }
    config = ServerConfig(
        name="tasks", type="stdio", command=sys.executable, args=(TASKS_SERVER,), env=env
    )
    server = await _connected(config, tmp / "logs")
    timing: dict[str, float] = {}
    async with anyio.create_task_group() as tg:
        await server.start(tg)
        await server.list_tools()
        for tool in ("count_plainly", "count_slowly", "count_plainly", "count_slowly"):
            started = time.perf_counter()
            result = await server.call_tool(
                tool, {"n": stages}, timeout=stages * stage_s + 60, task=TaskWatch(limit=3600)
            )
            timing[tool] = time.perf_counter() - started
            text = getattr(result.content[0], "text", "")
            if result.is_error or text != f"counted to {stages}":
                raise RuntimeError(f"{tool}: unexpected result {text!r}")
        await server.close()
    return timing["count_slowly"], timing["count_plainly"]


def task_overhead(smoke: bool) -> list[Row]:
    """A task of TASK_SECONDS polled at 1 s vs the same work as one plain call."""
    stages, stage_s = (3, 0.2) if smoke else (30, TASK_SECONDS / 30)
    with workdir("tasks") as tmp:
        as_task, plain = anyio.run(_call_pair, tmp, stages, stage_s)
    return [
        Row(
            "task_overhead",
            f"a {stages * stage_s:g} s task polled at {POLL_MS} ms vs the same plain call",
            "s",
            as_task,
            plain,
            "ratio",
            1.1,
            {"task_s": as_task, "plain_s": plain, "poll_ms": POLL_MS},
        )
    ]


async def _connect_once(config: ServerConfig, logs: Path) -> float:
    server = await _connected(config, logs)
    async with anyio.create_task_group() as tg:
        started = time.perf_counter()
        await server.start(tg)
        await server.list_tools()
        seconds = time.perf_counter() - started
        if server.status.protocol is None:
            raise RuntimeError(f"{config.name}: no protocol negotiated")
        await server.close()
    return seconds


def modern_connect(reps: int) -> list[Row]:
    """Connect + tools/list: a 2026-07-28-only server (refuses `initialize`; the agent
    then speaks 2026-07-28 on a new connection and asks server/discover) vs the same
    server answering `initialize`. Alternating runs; medians."""
    modern = ServerConfig(
        name="modern", type="stdio", command=sys.executable, args=(MODERN_SERVER,)
    )
    legacy = modern.model_copy(update={"name": "legacy", "args": (MODERN_SERVER, "both-eras")})
    times: dict[str, list[float]] = {"modern": [], "legacy": []}
    with workdir("eras") as tmp:
        for _ in range(reps):
            for config in (modern, legacy):
                times[config.name].append(anyio.run(_connect_once, config, tmp / "logs"))
    return [
        Row(
            "modern_connect",
            "connect + tools/list: 2026-07-28-only server vs the same server, legacy",
            "s",
            median(times["modern"]),
            median(times["legacy"]),
            "ratio",
            None,
            {"modern_s": times["modern"], "legacy_s": times["legacy"], "reps": reps},
        )
    ]
