"""A log flood during one call: 20,000 MCP log messages, ours against the bare SDK.

The server (bench/flood_server.py) writes the messages as fast as it can, so what the call
costs is the client's handling of them. The bare SDK only counts them; ours writes each to
the server's log file (redacted) and, with -v, shows them on a terminal (rendered into a
buffer here). Runs alternate, so a busy machine weighs on both alike.
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters, stdio_client
from rich.console import Console

from agent.config.settings import ServerConfig, Settings
from agent.tools.registry import ToolRegistry
from agent.ui.render import LogLines
from bench.measures import Row
from bench.timing import median

MESSAGES = 20_000
SERVER = [str(Path(__file__).with_name("flood_server.py"))]


async def bare_sdk(n: int, errlog: Path) -> float:
    """The bare SDK's call, counting the log messages it is handed."""
    count = 0

    async def on_log(params: object) -> None:
        nonlocal count
        count += 1

    params = StdioServerParameters(command=sys.executable, args=SERVER)
    with errlog.open("w") as err:
        async with Client(
            stdio_client(params, errlog=err), mode="legacy", logging_callback=on_log
        ) as client:
            started = time.perf_counter()
            await client.call_tool("flood", {"n": n})
            seconds = time.perf_counter() - started
    if count != n:
        raise RuntimeError(f"the bare SDK saw {count} of {n} log messages")
    return seconds


async def ours(n: int, state: Path, verbose: bool) -> float:
    """Our registry's call: log file, redaction, and with -v the terminal output."""
    server = ServerConfig(name="flood", type="stdio", command=sys.executable, args=tuple(SERVER))
    settings = Settings(servers=(server,), state_dir=state)
    shown = io.StringIO()
    async with ToolRegistry(settings) as registry:
        if await registry.connect_all():
            raise RuntimeError("the flood server did not connect")
        logs = LogLines(Console(file=shown, force_terminal=True, width=100))
        if verbose:
            registry.log_listener = logs.add
        started = time.perf_counter()
        observation = await registry.call("flood__flood", {"n": n})
        logs.flush()
        seconds = time.perf_counter() - started
    if observation.is_error or f"sent {n}" not in observation.text:
        raise RuntimeError(f"the flood call failed: {observation.text[-200:]}")
    logged = (state / "logs" / "flood.log").read_text().count("log line ")
    if logged < n:  # the newest part after rotation holds at least the last lines
        rotated = state / "logs" / "flood.log.1"
        logged += rotated.read_text().count("log line ") if rotated.exists() else 0
    if logged != n or (verbose and "log line 0 of" not in shown.getvalue()):
        raise RuntimeError(f"ours logged {logged} of {n} messages")
    return seconds


def log_flood(reps: int, n: int = MESSAGES) -> list[Row]:
    """Rows: ours (no -v) and ours with -v, each against the bare SDK in the same run."""
    bare: list[float] = []
    plain: list[float] = []
    verbose: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp:
        for rep in range(reps):
            bare.append(anyio.run(bare_sdk, n, Path(tmp) / f"bare{rep}.log"))
            plain.append(anyio.run(ours, n, Path(tmp) / f"plain{rep}", False))
            verbose.append(anyio.run(ours, n, Path(tmp) / f"verbose{rep}", True))
    base = median(bare)
    label = f"log flood: {n:,} log messages during one call vs the bare SDK"
    return [
        Row("log_flood", label, "s", median(plain), base, "ratio", 1.5, {"bare_s": bare}),
        Row(
            "log_flood_verbose",
            f"{label}, with -v shown",
            "s",
            median(verbose),
            base,
            "ratio",
            1.5,
            {"bare_s": bare, "ours_s": verbose},
        ),
    ]
