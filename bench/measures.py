"""The six measurements of issue 7, each with its baseline taken in the same run.

Every function returns Rows; a crash propagates and is reported by bench/run.py.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench.timing import REPO_ROOT, ProcResult, TimedLLM, agent_env, median, run_timed
from bench.worker import run_worker
from tests.fake_llm import Turn, text, tool_calls
from tests.servers import everything_stdio_command

RUN_MCP = str(REPO_ROOT / "run_mcp.py")
FAST_AGENT_DIR = REPO_ROOT / ".cache" / "bench-fast-agent"
FAST_AGENT_PIN = "fast-agent-mcp==0.10.46"  # newest that installs here (shared notes §8)
ROUNDS = 20
PARALLEL = 8
FANOUT = 8
RAW_CALLS = 200

Compare = Literal["ratio", "delta"]


@dataclass
class Row:
    """One line of the table: our number next to its baseline and the target."""

    key: str
    label: str
    unit: str
    ours: float
    baseline: float | None
    compare: Compare | None = None
    target: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def value(self) -> float | None:
        if self.baseline is None or self.compare is None:
            return None
        if self.compare == "ratio":
            return self.ours / self.baseline if self.baseline else None
        return self.ours - self.baseline

    @property
    def passed(self) -> bool | None:
        value = self.value
        return None if self.target is None or value is None else value <= self.target


@dataclass
class Comparison:
    """Another agent's number (or why there is none)."""

    key: str
    label: str
    status: str
    ours: float | None = None
    theirs: float | None = None
    unit: str = "s"


@contextmanager
def workdir(name: str) -> Iterator[Path]:
    """A temp dir per measurement: the cwd, workspace and state dir of the runs in it."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        yield Path(tmp)


def run_cli(args: list[str], base_url: str, cwd: Path, timeout: float = 120) -> ProcResult:
    """`python run_mcp.py ARGS` as a user runs it; raise if it did not answer."""
    env = agent_env(base_url, cwd / "state")
    result = run_timed([sys.executable, RUN_MCP, *args], cwd=cwd, env=env, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"run_mcp.py {args[:4]} exited {result.returncode}:\n{result.stderr}")
    return result


def _sum_turns(rounds: int) -> list[Turn]:
    return [tool_calls(("main__get-sum", {"a": i, "b": 1})) for i in range(rounds)]


def _everything_args() -> list[str]:
    node, args = everything_stdio_command()
    return ["--server-command", " ".join([node, *args]), "--server-name", "main"]


# --------------------------------------------------------------------------- 1. start-up


def startup(reps: int, warmup: bool) -> tuple[list[Row], float, float]:
    """`run_mcp.py -p hi` on the bundled server vs import floor + the server's own start."""
    with workdir("startup") as tmp:
        imports = [
            run_timed([sys.executable, "-c", "import mcp, openai"], cwd=tmp, env=dict(os.environ))
            for _ in range(reps)
        ]
        server = run_worker(
            "server_start",
            {"n": reps, "root": str(tmp), "repo": str(REPO_ROOT)},
            cwd=tmp,
            timeout=120,
        )["seconds"]
        runs = [text("hello") for _ in range(reps + int(warmup))]
        with TimedLLM(*runs) as llm:
            if warmup:
                run_cli(["-p", "hi"], llm.base_url, tmp)
            ours = [run_cli(["-p", "hi"], llm.base_url, tmp) for _ in range(reps)]
        if any(r.stdout != "hello\n" for r in ours):
            raise RuntimeError(f"unexpected answer: {ours[0].stdout!r}")
    floor_import = median([r.seconds for r in imports])
    floor_server = median(server)
    row = Row(
        "startup",
        "start-up: run_mcp.py -p hi (bundled server)",
        "s",
        median([r.seconds for r in ours]),
        floor_import + floor_server,
        "ratio",
        1.5,
        {
            "runs_s": [r.seconds for r in ours],
            "import_floor_s": floor_import,
            "server_start_s": floor_server,
            "reps": reps,
        },
    )
    import_rss = median([r.peak_rss_mib for r in imports])
    return [row], row.ours, import_rss


# --------------------------------------------------------------------------- 2. per step


def per_step_inprocess() -> list[Row]:
    """ToolRegistry + Agent in a child process; model time measured by the scripted server."""
    node, args = everything_stdio_command()
    script = [text("warm"), text("hello"), *_sum_turns(ROUNDS), text("done")]
    with workdir("steps") as tmp, TimedLLM(*script) as llm:
        result = run_worker(
            "steps",
            {
                "base_url": llm.base_url,
                "command": node,
                "args": args,
                "rounds": ROUNDS,
                "raw_calls": RAW_CALLS,
                "root": str(tmp),
            },
            cwd=tmp,
            timeout=180,
        )
        llm.assert_complete()
        model_zero, model_rounds = llm.model_seconds(1, 2), llm.model_seconds(2)
    agent_zero = result["zero_seconds"] - model_zero
    agent_rounds = result["rounds_seconds"] - model_rounds
    per_step = (agent_rounds - agent_zero) / ROUNDS
    raw = median(result["raw_seconds"])
    run_counts = result["counts"]["run"]
    if run_counts.get("tools/call", 0) != ROUNDS:
        raise RuntimeError(f"expected {ROUNDS} tools/call, counted {run_counts}")
    steps_row = Row(
        "per_step",
        f"per-step overhead, in-process ({ROUNDS} get-sum rounds)",
        "ms",
        per_step * 1000,
        raw * 1000,
        "delta",
        3.0,
        {
            "raw_p90_ms": sorted(result["raw_seconds"])[int(0.9 * RAW_CALLS)] * 1000,
            "run_seconds": result["rounds_seconds"],
            "model_seconds": model_rounds,
            "zero_tool_run_seconds": result["zero_seconds"],
            "zero_tool_model_seconds": model_zero,
            "upper_bound_ms": agent_rounds / ROUNDS * 1000,
        },
    )
    lists = Row(
        "tools_list_per_run",
        f"tools/list requests during the {ROUNDS}-round runs",
        "count",
        float(run_counts.get("tools/list", 0)),
        0.0,
        "delta",
        0.0,
        {"counts": result["counts"]},
    )
    return [steps_row, lists]


def per_step_cli(import_rss: float) -> list[Row]:
    """The same rounds through `run_mcp.py` (whole process): wall time and peak RSS."""
    script = [text("warm"), text("hello"), *_sum_turns(ROUNDS), text("done")]
    with workdir("steps-cli") as tmp, TimedLLM(*script) as llm:
        run_cli([*_everything_args(), "-p", "hi"], llm.base_url, tmp)  # warm caches, untimed
        zero = run_cli([*_everything_args(), "-p", "hi"], llm.base_url, tmp)
        rounds = run_cli(
            [*_everything_args(), "-p", "add numbers", "--output", "json", "--max-steps", "25"],
            llm.base_url,
            tmp,
        )
        llm.assert_complete()
        model_zero, model_rounds = llm.model_seconds(1, 2), llm.model_seconds(2)
    calls = json.loads(rounds.stdout)["tool_calls"]
    if len(calls) != ROUNDS or any(c["is_error"] for c in calls):
        raise RuntimeError(f"the CLI run did not make {ROUNDS} good calls: {calls[:2]}")
    per_step = ((rounds.seconds - model_rounds) - (zero.seconds - model_zero)) / ROUNDS
    cli = Row(
        "per_step_cli",
        "per-step, whole CLI process (info; start-up noise / 20)",
        "ms",
        per_step * 1000,
        None,
        detail={"run_seconds": rounds.seconds, "zero_tool_run_seconds": zero.seconds},
    )
    rss = Row(
        "peak_rss",
        f"peak RSS of the agent, {ROUNDS}-round CLI run",
        "MiB",
        rounds.peak_rss_mib,
        import_rss,
        "ratio",
        None,
        {"baseline": "python -c 'import mcp, openai'", "zero_tool_run_mib": zero.peak_rss_mib},
    )
    return [cli, rss]


# --------------------------------------------------------------------------- 3. concurrency


def concurrency() -> list[Row]:
    """8 `sleep 1` calls in one reply: the gap between the model's two requests / 1 s."""
    calls = [("local__bash", {"command": "sleep 1"}) for _ in range(PARALLEL)]
    with workdir("parallel") as tmp, TimedLLM(tool_calls(*calls), text("slept")) as llm:
        result = run_cli(["-p", "sleep", "--yes", "--output", "json"], llm.base_url, tmp)
        llm.assert_complete()
        first, second = llm.spans
    done = json.loads(result.stdout)["tool_calls"]
    if len(done) != PARALLEL or any(c["is_error"] for c in done):
        raise RuntimeError(f"the sleeps did not all succeed: {done[:2]}")
    phase = second.arrived - first.finished
    return [
        Row(
            "concurrency",
            f"{PARALLEL} parallel `sleep 1` calls: tool phase",
            "s",
            phase,
            1.0,
            "ratio",
            1.3,
            {"call_ms": [c["duration_ms"] for c in done]},
        )
    ]


# --------------------------------------------------------------------------- 4. fan-out


def fanout() -> list[Row]:
    """connect_all of 8 bundled stdio servers vs the slowest of them connected alone."""
    with workdir("fanout") as tmp:
        server = {
            "command": sys.executable,
            "args": ["-m", "agent.server", "--root", str(tmp)],
            "env": {"PYTHONPATH": str(REPO_ROOT)},
        }
        config = tmp / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {f"b{i}": server for i in range(FANOUT)}}))
        result = run_worker(
            "fanout", {"mcp_config": str(config), "root": str(tmp)}, cwd=tmp, timeout=180
        )
    slowest = max(result["single_seconds"])
    cpu_floor = result["all_children_cpu_seconds"] / (os.cpu_count() or 1)
    return [
        Row(
            "fanout",
            f"fan-out: connect {FANOUT} stdio servers (bundled)",
            "s",
            result["all_seconds"],
            slowest,
            "ratio",
            1.5,
            {
                "single_s": result["single_seconds"],
                "servers_cpu_s": result["all_children_cpu_seconds"],
                "cpu_bound_floor_s": cpu_floor,
                "cores": os.cpu_count(),
            },
        )
    ]


# --------------------------------------------------------------------------- 6. fast-agent


def _python_312() -> str | None:
    """An interpreter >= 3.12 on this machine (PATH or pyenv), or None."""
    for name in ("python3.13", "python3.12"):
        if found := shutil.which(name):
            return found
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(glob.glob(str(pyenv / "3.1[2-9]*" / "bin" / "python")))
    return found[-1] if found else None


def _install_fast_agent() -> str | None:
    """A fast-agent binary in an ignored throwaway venv; None (and why) if it cannot be had."""
    binary = FAST_AGENT_DIR / "venv" / "bin" / "fast-agent"
    if binary.is_file():
        return str(binary)
    python = _python_312()
    if python is None:
        return None
    FAST_AGENT_DIR.mkdir(parents=True, exist_ok=True)
    venv = FAST_AGENT_DIR / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "pip"), "install", "-q", FAST_AGENT_PIN]
    proc = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    (FAST_AGENT_DIR / "install.log").write_text(proc.stdout + proc.stderr)
    return str(binary) if proc.returncode == 0 and binary.is_file() else None


def _fast_agent_once(binary: str, base_url: str, cwd: Path) -> float:
    server = f"{sys.executable} -m agent.server --root {cwd}"
    argv = [binary, "go", "--model", "openai.gpt-4o-mini", "--base-url", base_url]
    argv += ["--stdio", server, "--message", "hi", "--quiet", "--no-home"]
    env = agent_env(base_url, cwd / "state")
    result = run_timed(argv, cwd=cwd, env=env, timeout=120)
    if result.returncode != 0 or "hello" not in result.stdout:
        raise RuntimeError(f"fast-agent go exited {result.returncode}:\n{result.stderr[-2000:]}")
    return result.seconds


def fast_agent(ours_startup: float, reps: int, smoke: bool) -> Comparison:
    """fast-agent's one-shot start-up on the same prompt, model and server, if it installs."""
    label = "start-up vs fast-agent (go --message hi, bundled server)"
    binary = FAST_AGENT_DIR / "venv" / "bin" / "fast-agent"
    if smoke and not binary.is_file():
        return Comparison("fast_agent", label, "skipped in --smoke (not installed yet)")
    found = str(binary) if binary.is_file() else _install_fast_agent()
    if found is None:
        reason = "needs >= 3.12" if _python_312() is None else "pip install failed, see install.log"
        return Comparison("fast_agent", label, f"fast-agent: not installable ({reason})")
    if smoke:
        return Comparison("fast_agent", label, "installed; skipped in --smoke")
    with workdir("fast-agent") as tmp, TimedLLM(*[text("hello") for _ in range(reps)]) as llm:
        theirs = median([_fast_agent_once(found, llm.base_url, tmp) for _ in range(reps)])
    return Comparison("fast_agent", label, f"measured ({FAST_AGENT_PIN})", ours_startup, theirs)
