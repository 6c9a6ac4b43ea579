"""What the sandbox costs per shell call: the bundled server's bash under bubblewrap (the
default, workspace-write, no network) against the same server with the sandbox off, both
in one run, calls alternating between the two connections so load hits both alike.

A call is the whole MCP round trip the agent pays: request, the server spawning
`/bin/bash -c true` (inside bwrap: new mount, pid, ipc and network namespaces, the binds,
the hidden secrets), the exit, the reply. Needs bwrap (Debian's bubblewrap).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import anyio

from agent.common import seccomp
from agent.common.sandbox import Policy, bwrap_argv, unavailable
from agent.config.build import BUNDLED_MAIN, bundled_server
from agent.config.sandbox import resolve
from agent.config.settings import SandboxSettings, ServerConfig
from agent.tools.mcp import MCPServerConnection
from bench.measures import Row, workdir
from bench.timing import median

TARGET = 5.0  # sandboxed / unsandboxed per call (bwrap's namespaces and mounts: ~10 ms)
FILTER_TARGET = 1.5  # bwrap started with the unix-socket filter / without it


def _servers(ws: Path) -> tuple[ServerConfig, ServerConfig]:
    """(sandboxed, unsandboxed) bundled servers on the workspace `ws`."""
    plain = bundled_server(ws)
    [boxed], problem = resolve(
        [plain], SandboxSettings(), root=ws, environ=os.environ, bundled_main=str(BUNDLED_MAIN)
    )
    if problem is not None:
        raise RuntimeError(f"the sandbox cannot be measured here: {problem}")
    return boxed.model_copy(update={"name": "boxed"}), plain


async def _per_call(ws: Path, calls: int) -> tuple[list[float], list[float]]:
    boxed_config, plain_config = _servers(ws)
    times: dict[str, list[float]] = {"boxed": [], "plain": []}
    connections = [
        MCPServerConnection(config, connect_timeout=60, log_dir=ws / "logs")
        for config in (boxed_config, plain_config)
    ]
    async with anyio.create_task_group() as tg:
        for server in connections:
            await server.start(tg)
            await server.list_tools()
        for n in range(calls + 2):  # two warm-up rounds, not counted
            for server in connections:
                started = time.perf_counter()
                result = await server.call_tool("bash", {"command": "true"}, timeout=60)
                took = time.perf_counter() - started
                if result.is_error:
                    raise RuntimeError(f"{server.name}: bash true failed: {result.content}")
                if n >= 2:
                    times["boxed" if server.name == "boxed" else "plain"].append(took)
        for server in connections:
            await server.close()
    return times["boxed"], times["plain"]


def sandbox_cost(smoke: bool) -> list[Row]:
    if (problem := unavailable()) is not None:
        raise RuntimeError(f"the sandbox cannot be measured here: {problem}")
    calls = 5 if smoke else 40
    with workdir("sandbox") as tmp:
        ws = tmp / "ws"
        ws.mkdir()
        boxed, plain = anyio.run(_per_call, ws, calls)
    ours, base = median(boxed), median(plain)
    return [
        Row(
            "sandbox_call",
            "bundled bash call (`true`) in the sandbox vs with the sandbox off",
            "ms",
            ours * 1000,
            base * 1000,
            "ratio",
            TARGET,
            {
                "calls": calls,
                "boxed_ms": [t * 1000 for t in boxed],
                "plain_ms": [t * 1000 for t in plain],
            },
        )
    ]


def _spawn_times(with_filter: list[str], without: list[str], runs: int) -> tuple[list[float], ...]:
    """Wall times of the two command lines, run alternately."""
    times: tuple[list[float], list[float]] = ([], [])
    for n in range(runs + 2):  # two warm-up rounds, not counted
        for argv, kept in ((with_filter, times[0]), (without, times[1])):
            started = time.perf_counter()
            subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
            if n >= 2:
                kept.append(time.perf_counter() - started)
    return times


def filter_cost(smoke: bool) -> list[Row]:
    """What the seccomp filter (no unix sockets without network) adds to a sandboxed
    command: the same bwrap line started through the filter's trampoline and without it."""
    if (problem := unavailable()) is not None or not seccomp.supported():
        raise RuntimeError(f"the filter cannot be measured here: {problem or 'no filter'}")
    runs = 5 if smoke else 40
    with workdir("sandbox-filter") as tmp:
        policy = Policy(workspace=str(tmp))
        filtered = bwrap_argv(policy, ["/bin/true"])
        plain = filtered[filtered.index(policy.bwrap) :]  # the bwrap line itself
        plain.remove("--seccomp")
        plain.remove(str(seccomp.FD))
        with_filter, without = _spawn_times(filtered, plain, runs)
    ours, base = median(with_filter), median(without)
    return [
        Row(
            "sandbox_filter",
            "a sandboxed `true` started with the unix-socket filter vs without it",
            "ms",
            ours * 1000,
            base * 1000,
            "ratio",
            FILTER_TARGET,
            {"runs": runs},
        )
    ]


if __name__ == "__main__":
    for row in [*sandbox_cost(smoke=False), *filter_cost(smoke=False)]:
        print(row.label, f"{row.ours:.2f} ms", f"{row.baseline:.2f} ms", f"{row.value:.2f}x")
