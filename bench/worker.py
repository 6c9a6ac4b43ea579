"""In-process measurements, run in a child process: `python -m bench.worker MODE ARGS_JSON`.

The agent runs here (ToolRegistry + Agent wired as agent/session/startup.py does) while the scripted
model runs in the parent, so model time and agent time never share a GIL. Prints one JSON
object on stdout.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.session import ClientSession
from rich.console import Console

from agent.config.build import build_settings
from agent.config.settings import ServerConfig, Settings
from agent.loop.tool_offer import AGENT_TOOL_NAMES
from agent.model.model_types import Reply
from agent.session.startup import build_agent, make_model, open_transcript
from agent.tools.registry import ToolRegistry

SETTLE_SECONDS = 0.6  # server-everything's list_changed burst -> one debounced re-list (0.25 s)
RAW_WARMUP = 20
METHODS: Counter[str] = Counter()


def _count_requests() -> None:
    """Count every request the MCP client sends, by method, to catch per-step re-listing."""
    original = ClientSession.send_request

    async def counting(self: ClientSession, request: Any, *args: Any, **kwargs: Any) -> Any:
        METHODS[str(getattr(request, "method", "?"))] += 1
        return await original(self, request, *args, **kwargs)

    ClientSession.send_request = counting  # type: ignore[method-assign]


def _stdio(command: str, args: list[str], env: dict[str, str] | None = None) -> Any:
    """A stdio transport with the server's stderr discarded."""
    params = StdioServerParameters(command=command, args=args, env=env)
    return stdio_client(params, errlog=open(os.devnull, "w"))


# --------------------------------------------------------------------------- server start


async def server_start(a: dict[str, Any]) -> dict[str, Any]:
    """Connect + list_tools of the bundled server with the bare SDK (legacy), N times."""
    args = ["-m", "agent.server", "--root", a["root"]]
    env = {"PYTHONPATH": a["repo"]}
    seconds: list[float] = []
    for _ in range(a["n"]):
        started = time.perf_counter()
        async with Client(_stdio(sys.executable, args, env), mode="legacy") as client:
            await client.list_tools()
            seconds.append(time.perf_counter() - started)
    return {"seconds": seconds}


# --------------------------------------------------------------------------- per step


async def raw_round_trips(command: str, args: list[str], calls: int) -> list[float]:
    """The baseline: bare SDK call_tool('get-sum') round trips over stdio, in seconds."""
    async with Client(_stdio(command, args), mode="legacy") as client:
        await client.list_tools()
        for i in range(RAW_WARMUP):
            await client.call_tool("get-sum", {"a": i, "b": 1})
        seconds: list[float] = []
        for i in range(calls):
            started = time.perf_counter()
            await client.call_tool("get-sum", {"a": i, "b": 2})
            seconds.append(time.perf_counter() - started)
    return seconds


async def raw_model_round_trips(base_url: str, requests: int) -> list[float]:
    """The model's side of the floor: bare httpx2 streaming POSTs, client-side seconds.

    The scripted model times each request from handler entry to its last byte; the HTTP
    stack around it (parsing, loopback, uvicorn) is time no agent can avoid either. These
    round trips, minus the spans the server records for them, measure exactly that part.
    """
    import httpx2

    body = {
        "model": "bench",
        "messages": [{"role": "user", "content": "add numbers"}],
        "tools": [_sum_tool()],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    seconds: list[float] = []
    async with httpx2.AsyncClient(base_url=base_url) as client:
        for _ in range(requests):
            started = time.perf_counter()
            async with client.stream("POST", "/chat/completions", json=body) as response:
                response.raise_for_status()
                async for _line in response.aiter_lines():
                    pass
            seconds.append(time.perf_counter() - started)
    return seconds


def _sum_tool() -> dict[str, Any]:
    schema = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    function = {"name": "main__get-sum", "description": "Sum two numbers", "parameters": schema}
    return {"type": "function", "function": function}


def _steps_settings(a: dict[str, Any]) -> Settings:
    environ = {
        "OPENAI_BASE_URL": a["base_url"],
        "OPENAI_API_KEY": "x",
        "MCP_AGENT_STATE_DIR": str(Path(a["root"]) / "state"),
    }
    server = ServerConfig(name="main", type="stdio", command=a["command"], args=tuple(a["args"]))
    return build_settings(
        config_path=None,
        mcp_config_path=None,
        cli_server=server,
        environ=environ,
        flags={"ui": {"approval": "yes"}, "agent": {"max_steps": a["rounds"] + 2}},
        workspace=Path(a["root"]),
    )


class _ClockedModel:
    """The agent's model, timed from each request to its reply as the agent waits for it
    (the OpenAI client included): the model's time as the agent sees it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model = inner.model
        self.seconds = 0.0

    async def stream(self, messages: Any, tools: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        async for item in self.inner.stream(messages, tools, **kw):
            if isinstance(item, Reply):
                self.seconds += time.perf_counter() - started
            yield item


async def _timed_run(
    settings: Settings, registry: ToolRegistry, model: Any, text: str
) -> tuple[float, float]:
    """One request through a fresh Agent (with its transcript, as the CLI has): wall seconds
    and the seconds the agent spent waiting on the model."""
    saved = open_transcript(settings, None, Console(stderr=True))
    clocked = _ClockedModel(model)
    agent = build_agent(settings, registry, clocked, None, saved, None)  # type: ignore[arg-type]
    status = None
    try:
        started = time.perf_counter()
        async for event in agent.run(text):
            status = getattr(event, "status", status)
        elapsed = time.perf_counter() - started
    finally:
        saved.transcript.close()
    if status != "answered":
        raise RuntimeError(f"the {text!r} run ended with status {status!r}")
    return elapsed, clocked.seconds


async def steps(a: dict[str, Any]) -> dict[str, Any]:
    """Raw round trips, then a warm-up run and `reps` pairs of (0-tool run, N-round run)."""
    raw = await raw_round_trips(a["command"], a["args"], a["raw_calls"])
    raw_model = await raw_model_round_trips(a["base_url"], a["raw_model_requests"])
    _count_requests()
    settings = _steps_settings(a)
    model = make_model(settings)
    counts: dict[str, dict[str, int]] = {}
    try:
        async with ToolRegistry(settings, reserved_names=AGENT_TOOL_NAMES) as registry:
            failures = await registry.connect_all()
            if failures:
                raise RuntimeError(f"connect failed: {failures}")
            counts["connect"] = dict(METHODS)
            await anyio.sleep(SETTLE_SECONDS)
            counts["settled"] = dict(METHODS)
            await _timed_run(settings, registry, model, "warm up")
            before = dict(METHODS)
            zero: list[tuple[float, float]] = []
            rounds: list[tuple[float, float]] = []
            for _ in range(a["reps"]):
                zero.append(await _timed_run(settings, registry, model, "hi"))
                rounds.append(await _timed_run(settings, registry, model, "add numbers"))
            counts["run"] = {k: v - before.get(k, 0) for k, v in METHODS.items()}
    finally:
        await model.aclose()
    return {
        "raw_seconds": raw,
        "raw_model_seconds": raw_model,
        "zero_seconds": [wall for wall, _ in zero],
        "rounds_seconds": [wall for wall, _ in rounds],
        "zero_model_client_seconds": [waited for _, waited in zero],
        "rounds_model_client_seconds": [waited for _, waited in rounds],
        "counts": counts,
    }


# --------------------------------------------------------------------------- fan-out


async def _connect_seconds(settings: Settings) -> tuple[float, float]:
    """Wall seconds of connect_all, and the CPU seconds the servers had used by its end."""
    async with ToolRegistry(settings) as registry:
        started = time.perf_counter()
        failures = await registry.connect_all()
        elapsed = time.perf_counter() - started
        cpu = _live_children_cpu()
    if failures:
        raise RuntimeError(f"connect failed: {failures}")
    return elapsed, cpu


def _live_children_cpu() -> float:
    """CPU seconds (user + system) of this process's live children, read from /proc.

    Taken while the servers are still running, so it is their start-up cost alone; the
    rusage of reaped children would add their shutdown.
    """
    me, total_ticks = os.getpid(), 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == me:  # fields[1] is the ppid; [11], [12] utime, stime
            total_ticks += int(fields[11]) + int(fields[12])
    return total_ticks / os.sysconf("SC_CLK_TCK")


def _config_settings(a: dict[str, Any]) -> Settings:
    """Settings for the servers of the bench's mcpServers file, state kept in its root."""
    return build_settings(
        config_path=None,
        mcp_config_path=Path(a["mcp_config"]),
        cli_server=None,
        environ={"MCP_AGENT_STATE_DIR": str(Path(a["root"]) / "state")},
        workspace=Path(a["root"]),
    )


async def fanout(a: dict[str, Any]) -> dict[str, Any]:
    """Each server alone (after one untimed warm-up), then all at once via connect_all."""
    settings = _config_settings(a)
    one = settings.servers[:1]
    await _connect_seconds(settings.model_copy(update={"servers": one}))
    singles = [
        (await _connect_seconds(settings.model_copy(update={"servers": (server,)})))[0]
        for server in settings.servers
    ]
    together, servers_cpu = await _connect_seconds(settings)
    sdk = await _sdk_connect_all_seconds(settings.servers)
    return {
        "single_seconds": singles,
        "all_seconds": together,
        "servers_cpu_seconds": servers_cpu,
        "sdk_all_seconds": sdk,
        "servers": len(settings.servers),
    }


async def _sdk_connect_all_seconds(servers: tuple[ServerConfig, ...]) -> float:
    """The floor: the bare SDK connecting (handshake + tools/list) the same servers at once."""
    connected = anyio.Event()
    ready: list[str] = []

    async def one(server: ServerConfig) -> None:
        env = {**os.environ, **server.env}
        async with Client(_stdio(server.command or "", list(server.args), env), mode="legacy") as c:
            await c.list_tools()
            ready.append(server.name)
            if len(ready) == len(servers):
                connected.set()
            await connected.wait()

    started = time.perf_counter()
    elapsed = 0.0
    async with anyio.create_task_group() as tg:
        for server in servers:
            tg.start_soon(one, server)
        await connected.wait()
        elapsed = time.perf_counter() - started
    return elapsed


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def connect_many(a: dict[str, Any]) -> dict[str, Any]:
    """Many servers at once: connect_all vs the bare SDK, alternating, 3 rounds each."""
    settings = _config_settings(a)
    ours: list[float] = []
    sdk: list[float] = []
    before = _rss_mib()
    for _ in range(3):
        sdk.append(await _sdk_connect_all_seconds(settings.servers))
        ours.append((await _connect_seconds(settings))[0])
    return {
        "ours_seconds": statistics.median(ours),
        "sdk_seconds": statistics.median(sdk),
        "ours_runs": ours,
        "sdk_runs": sdk,
        "rss_growth_mib": _rss_mib() - before,
        "servers": len(settings.servers),
    }


MODES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "connect_many": connect_many,
    "server_start": server_start,
    "steps": steps,
    "fanout": fanout,
}


def run_worker(mode: str, args: dict[str, Any], *, cwd: Path, timeout: float) -> dict[str, Any]:
    """Run one mode in a child process (parent side); raise with its stderr if it fails."""
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.worker", mode, json.dumps(args)],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        tail = proc.stderr[-3000:]
        raise RuntimeError(f"bench worker {mode} failed ({proc.returncode}):\n{tail}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    mode, raw = sys.argv[1], sys.argv[2]
    result = anyio.run(MODES[mode], json.loads(raw))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
