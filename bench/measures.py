"""The measurements of issue 7, each with its baseline taken in the same run.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bench.timing import REPO_ROOT, ProcResult, TimedLLM, agent_env, median, run_timed
from bench.worker import run_worker
from tests.support.fake_llm import Turn, text, tool_calls
from tests.support.servers import everything_stdio_command

RUN_MCP = str(REPO_ROOT / "run_mcp.py")
FAST_AGENT_DIR = REPO_ROOT / ".cache" / "bench-fast-agent"
FAST_AGENT_PIN = "fast-agent-mcp==0.10.46"  # newest that installs here (shared notes §8)
ROUNDS = 20
PARALLEL = 8
FANOUT = 8
RAW_CALLS = 200
RAW_MODEL_REQUESTS = 60  # bare HTTP round trips to the scripted model (the floor's model side)

Compare = Literal["ratio", "delta", "at_most"]  # at_most: our number against an absolute target


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
        if self.compare == "at_most":
            return self.ours
        if self.compare == "ratio":
            return self.ours / self.baseline if self.baseline else None
        return self.ours - self.baseline

    @property
    def passed(self) -> bool | None:
        value = self.value
        return None if self.target is None or value is None else value <= self.target


@dataclass
class Comparison:
    """Another agent's number (or why there is none) next to ours, optionally with a target.

    Our number is kept even when theirs is missing, so a skipped or broken fast-agent never
    hides a regression of our own.
    """

    key: str
    label: str
    status: str
    ours: float | None = None
    theirs: float | None = None
    unit: str = "s"
    target: float | None = None  # ours / theirs must stay strictly below it
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.ours is None or not self.theirs:
            return None
        return self.ours / self.theirs

    @property
    def passed(self) -> bool | None:
        ratio = self.ratio
        return None if self.target is None or ratio is None else ratio < self.target


@contextmanager
def workdir(name: str) -> Iterator[Path]:
    """A temp dir per measurement: the cwd, workspace and state dir of the runs in it."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        yield Path(tmp)


def run_cli(args: list[str], llm: TimedLLM, cwd: Path, timeout: float = 120) -> ProcResult:
    """`python run_mcp.py ARGS` as a user runs it; raise if it did not answer.

    A run killed from outside before it asked the model anything is run once more (and
    said so on stderr): CI once saw a SIGKILL 0.6 s into a start, with empty stderr, that
    nothing of ours sends. The bench kills a run only past `timeout`, and then raises; the
    agent, the bundled server and the tests kill only processes and groups they started.
    A run that asked the model has used its script and is not repeated.
    """
    env = agent_env(llm.base_url, cwd / "state")
    for attempt in (1, 2):
        asked = len(llm.requests)
        result = run_timed([sys.executable, RUN_MCP, *args], cwd=cwd, env=env, timeout=timeout)
        if result.returncode >= 0 or len(llm.requests) != asked or attempt == 2:
            break
        print(
            f"  run_mcp.py {args[:4]} was killed by signal {-result.returncode} after "
            f"{result.seconds:.1f} s, before any model request; running it once more",
            file=sys.stderr,
            flush=True,
        )
    if result.returncode != 0:
        how = f"exited {result.returncode}"
        if result.returncode < 0:
            how = f"was killed by signal {-result.returncode} after {result.seconds:.1f} s"
        raise RuntimeError(f"run_mcp.py {args[:4]} {how}:\n{result.stderr}")
    return result


def _sum_turns(rounds: int) -> list[Turn]:
    return [tool_calls(("main__get-sum", {"a": i, "b": 1})) for i in range(rounds)]


def _everything_args(name: str = "main") -> list[str]:
    node, args = everything_stdio_command()
    return ["--server-command", " ".join([node, *args]), "--server-name", name]


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
                run_cli(["-p", "hi"], llm, tmp)
            ours = [run_cli(["-p", "hi"], llm, tmp) for _ in range(reps)]
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


def per_step_inprocess(reps: int) -> list[Row]:
    """ToolRegistry + Agent in a child process, against the scripted model in this one.

    Two views of one run, each the median over `reps` pairs of (0-tool run, N-round run),
    per round, so fixed per-request costs cancel out:
    - the loop's own overhead: wall minus the time the agent waited on its model (the
      OpenAI client included), against one bare SDK call_tool round trip (the target row);
    - everything but the model's own work: wall minus the spans the scripted server
      measured, against call_tool plus a bare httpx2 model request's transport (info: it
      includes what the OpenAI client adds to each request, ~1 ms here).
    """
    node, args = everything_stdio_command()
    raw_model_turns = [_sum_turns(1)[0] for _ in range(RAW_MODEL_REQUESTS)]
    pair = [text("hello"), *_sum_turns(ROUNDS), text("done")]
    script = [*raw_model_turns, text("warm"), *(pair * reps)]
    with workdir("steps") as tmp, TimedLLM(*script) as llm:
        result = run_worker(
            "steps",
            {
                "base_url": llm.base_url,
                "command": node,
                "args": args,
                "rounds": ROUNDS,
                "reps": reps,
                "raw_calls": RAW_CALLS,
                "raw_model_requests": RAW_MODEL_REQUESTS,
                "root": str(tmp),
            },
            cwd=tmp,
            timeout=180,
        )
        llm.assert_complete()
        spans = [span.seconds for span in llm.spans]
    loop_only: list[float] = []
    with_client: list[float] = []
    start = RAW_MODEL_REQUESTS + 1  # after the raw requests and the warm-up run
    for i, (zero_s, rounds_s) in enumerate(
        zip(result["zero_seconds"], result["rounds_seconds"], strict=True)
    ):
        model_zero, model_rounds = spans[start], sum(spans[start + 1 : start + len(pair)])
        start += len(pair)
        with_client.append(((rounds_s - model_rounds) - (zero_s - model_zero)) / ROUNDS)
        waited_zero = result["zero_model_client_seconds"][i]
        waited_rounds = result["rounds_model_client_seconds"][i]
        loop_only.append(((rounds_s - waited_rounds) - (zero_s - waited_zero)) / ROUNDS)
    raw_tool = median(result["raw_seconds"])
    pairs = zip(result["raw_model_seconds"], spans[:RAW_MODEL_REQUESTS], strict=True)
    transport = median([client - server for client, server in pairs])
    run_counts = result["counts"]["run"]
    if run_counts.get("tools/call", 0) != ROUNDS * reps:
        raise RuntimeError(f"expected {ROUNDS * reps} tools/call, counted {run_counts}")
    steps_row = Row(
        "per_step",
        f"per-step overhead of the loop ({ROUNDS} get-sum rounds) vs SDK call_tool",
        "ms",
        median(loop_only) * 1000,
        raw_tool * 1000,
        "delta",
        3.0,
        {
            "runs_ms": [s * 1000 for s in loop_only],
            "raw_call_tool_p90_ms": sorted(result["raw_seconds"])[int(0.9 * RAW_CALLS)] * 1000,
        },
    )
    client_row = Row(
        "per_step_with_client",
        "per-step incl. the OpenAI client (info) vs call_tool + bare HTTP request",
        "ms",
        median(with_client) * 1000,
        (raw_tool + transport) * 1000,
        "delta",
        None,
        {
            "runs_ms": [s * 1000 for s in with_client],
            "model_http_transport_ms": transport * 1000,
            "raw_model_round_trip_ms": median(result["raw_model_seconds"]) * 1000,
        },
    )
    lists = Row(
        "tools_list_per_run",
        f"tools/list requests during {reps} {ROUNDS}-round runs",
        "count",
        float(run_counts.get("tools/list", 0)),
        0.0,
        "delta",
        0.0,
        {"counts": result["counts"]},
    )
    return [steps_row, client_row, lists]


def peak_memory(import_rss: float) -> list[Row]:
    """Peak RSS of `run_mcp.py` through the 20-round script (the whole agent process).

    The end-to-end time of the same script is the rounds-vs-fast-agent comparison; per-step
    cost is measured in-process, where start-up jitter (~0.1 s per process) cannot drown it.
    """
    script = [*_sum_turns(ROUNDS), text("done")]
    json_args = ["--output", "json", "--max-steps", str(ROUNDS + 5)]
    with workdir("steps-cli") as tmp, TimedLLM(*script) as llm:
        rounds = run_cli([*_everything_args(), "-p", "add numbers", *json_args], llm, tmp)
        llm.assert_complete()
    calls = json.loads(rounds.stdout)["tool_calls"]
    if len(calls) != ROUNDS or any(c["is_error"] for c in calls):
        raise RuntimeError(f"the CLI run did not make {ROUNDS} good calls: {calls[:2]}")
    rss = Row(
        "peak_rss",
        f"peak RSS of the agent, {ROUNDS}-round CLI run",
        "MiB",
        rounds.peak_rss_mib,
        import_rss,
        "ratio",
        None,
        {"baseline": "python -c 'import mcp, openai'", "run_seconds": rounds.seconds},
    )
    return [rss]


# --------------------------------------------------------------------------- 3. concurrency


def concurrency() -> list[Row]:
    """8 read-only 1-second calls in one reply (tests/support/slow_server.py `wait`): the gap
    between the model's two requests / 1 s. (Calls that may change state run one after another.)"""
    calls = [("slow__wait", {"seconds": 1}) for _ in range(PARALLEL)]
    server = ["--server-command", f"{sys.executable} {REPO_ROOT / 'tests/support/slow_server.py'}"]
    with workdir("parallel") as tmp, TimedLLM(tool_calls(*calls), text("slept")) as llm:
        args = [*server, "--server-name", "slow", "-p", "sleep", "--yes", "--output", "json"]
        result = run_cli(args, llm, tmp)
        llm.assert_complete()
        first, second = llm.spans
    done = json.loads(result.stdout)["tool_calls"]
    if len(done) != PARALLEL or any(c["is_error"] for c in done):
        raise RuntimeError(f"the sleeps did not all succeed: {done[:2]}")
    phase = second.arrived - first.finished
    return [
        Row(
            "concurrency",
            f"{PARALLEL} parallel read-only 1 s calls: tool phase",
            "s",
            phase,
            1.0,
            "ratio",
            1.3,
            {"call_ms": [c["duration_ms"] for c in done]},
        )
    ]


# --------------------------------------------------------------------------- 4. fan-out


def fanout(servers: int = FANOUT) -> list[Row]:
    """connect_all of 8 bundled stdio servers, against floors measured in the same run.

    The issue's target is 1.5x the slowest single connect. Eight Python servers starting at
    once are CPU-bound on a small machine (each spends ~0.5 s of CPU importing `mcp`), so
    no client can reach that on 2 cores; the target row therefore compares with the bare
    SDK connecting the same 8 servers at once (the machine's floor for this fan-out), and
    the row after it shows the literal ratio with the servers' CPU floor beside it.
    """
    with workdir("fanout") as tmp:
        server = {
            "command": sys.executable,
            "args": ["-m", "agent.server", "--root", str(tmp)],
            "env": {"PYTHONPATH": str(REPO_ROOT)},
        }
        config = tmp / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {f"b{i}": server for i in range(servers)}}))
        result = run_worker(
            "fanout", {"mcp_config": str(config), "root": str(tmp)}, cwd=tmp, timeout=180
        )
    slowest = max(result["single_seconds"])
    cores = os.cpu_count() or 1
    cpu_floor = result["servers_cpu_seconds"] / cores
    label = f"fan-out: connect {servers} stdio servers (bundled)"
    return [
        Row(
            "fanout",
            f"{label} vs the bare SDK connecting them at once",
            "s",
            result["all_seconds"],
            result["sdk_all_seconds"],
            "ratio",
            1.5,
        ),
        Row(
            "fanout_single",
            f"{label} vs slowest single (info: CPU floor {cpu_floor:.2f} s, {cores} cores)",
            "s",
            result["all_seconds"],
            slowest,
            "ratio",
            None,
            {
                "single_s": result["single_seconds"],
                "servers_cpu_s_at_connect": result["servers_cpu_seconds"],
                "cpu_bound_floor_s": cpu_floor,
                "cores": cores,
            },
        ),
    ]


# --------------------------------------------------------------------------- 6. fast-agent


def _python_312() -> str | None:
    """An interpreter >= 3.12 that runs (PATH or pyenv), or None.

    pyenv's shims are on PATH even for versions not selected, and then exit 127: each
    candidate is asked for its version before it is trusted.
    """
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [shutil.which(name) for name in ("python3.13", "python3.12")]
    candidates += sorted(glob.glob(str(pyenv / "3.1[2-9]*" / "bin" / "python")), reverse=True)
    for candidate in filter(None, candidates):
        probe = [candidate, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"]
        try:
            if subprocess.run(probe, capture_output=True, timeout=30).returncode == 0:
                return candidate
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


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


def _fast_agent_binary(smoke: bool) -> tuple[str | None, str]:
    """fast-agent's binary when it may run now, else None and why (shown in the table).

    --smoke never installs it (a pip install would dominate the smoke run) and never runs it.
    """
    binary = FAST_AGENT_DIR / "venv" / "bin" / "fast-agent"
    if smoke and not binary.is_file():
        return None, "skipped in --smoke (not installed yet)"
    found = str(binary) if binary.is_file() else _install_fast_agent()
    if found is None:
        reason = "needs >= 3.12" if _python_312() is None else "pip install failed, see install.log"
        return None, f"fast-agent: not installable ({reason})"
    if smoke:
        return None, "installed; skipped in --smoke"
    return found, f"measured ({FAST_AGENT_PIN})"


def fast_agent(ours_startup: float, reps: int, smoke: bool) -> Comparison:
    """fast-agent's one-shot start-up on the same prompt, model and server, if it installs."""
    label = "start-up vs fast-agent (go --message hi, bundled server)"
    found, status = _fast_agent_binary(smoke)
    if found is None:
        return Comparison("fast_agent", label, status)
    with workdir("fast-agent") as tmp, TimedLLM(*[text("hello") for _ in range(reps)]) as llm:
        theirs = median([_fast_agent_once(found, llm.base_url, tmp) for _ in range(reps)])
    return Comparison("fast_agent", label, status, ours_startup, theirs)


# ----------------------------------------------------------------- 7. 20 rounds vs fast-agent

SCRIPT_SERVER = "everything"  # both agents then show the model `everything__get-sum`
SUM_TOOL = f"{SCRIPT_SERVER}__get-sum"
SUM_RESULT = "The sum of"  # server-everything's get-sum reply, in every good tool result
FAST_AGENT_MODEL = "generic.scripted"  # fast-agent's OpenAI-compatible provider, any model id


class RoundsFailed(RuntimeError):
    """An agent did not run the script as written (exit code, answer or tool results)."""


@dataclass(frozen=True)
class ScriptRun:
    """One end-to-end run of the rounds script: wall seconds and the model's share of them."""

    seconds: float
    model_seconds: float

    @property
    def agent_seconds(self) -> float:
        return self.seconds - self.model_seconds


def _rounds_script() -> list[Turn]:
    """ROUNDS replies of one get-sum call each, then the answer: identical for both agents."""
    return [*(tool_calls((SUM_TOOL, {"a": i, "b": 1})) for i in range(ROUNDS)), text("done")]


def _text_of(content: object) -> str:
    """A chat message's content as text, whether a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _check_rounds(llm: TimedLLM, result: ProcResult, who: str) -> ScriptRun:
    """Prove the run executed the script: the last model request carries ROUNDS sum results.

    Exit code 0 alone proves nothing (an agent may answer after failed or skipped calls).
    """
    if result.returncode != 0 or result.stdout.strip() != "done":
        tail = " ".join(result.stderr.split())[-240:]
        raise RoundsFailed(f"{who} exited {result.returncode} ({result.stdout[-80:]!r}): {tail}")
    if llm.unexpected or llm.script or len(llm.requests) != ROUNDS + 1:
        raise RoundsFailed(f"{who} made {len(llm.requests)} model requests, not {ROUNDS + 1}")
    final = llm.requests[ROUNDS]["messages"]
    results = [_text_of(m.get("content")) for m in final if m.get("role") == "tool"]
    good = sum(SUM_RESULT in r for r in results)
    if len(results) != ROUNDS or good != ROUNDS:
        raise RoundsFailed(f"{who}: {len(results)} tool results, {good} sums, not {ROUNDS}")
    return ScriptRun(result.seconds, llm.model_seconds())


def _our_rounds(cwd: Path) -> ScriptRun:
    """`run_mcp.py -p ... --yes -q` on server-everything (-q: fast-agent runs --quiet)."""
    args = [*_everything_args(SCRIPT_SERVER), "-p", "add numbers", "--yes", "-q"]
    args += ["--max-steps", str(ROUNDS + 5)]  # the default (20) would stop before the answer
    with TimedLLM(*_rounds_script()) as llm:
        result = run_cli(args, llm, cwd)
    return _check_rounds(llm, result, "run_mcp.py")


def _fast_agent_config(base_url: str, cwd: Path) -> Path:
    """fastagent.config.yaml: the generic provider at the scripted model, everything on stdio.

    Keys from fast_agent/config.py (0.10.46): Settings.generic (GenericSettings.api_key,
    base_url), Settings.mcp.servers (MCPServerSettings transport/command/args) and
    Settings.logger.type "none", its lightest setting (the default writes a JSONL log file).
    Written as JSON, which is YAML, so the bench needs no YAML library.
    """
    node, args = everything_stdio_command()
    server = {"transport": "stdio", "command": node, "args": args}
    config = {
        "generic": {"api_key": "x", "base_url": base_url},
        "mcp": {"servers": {SCRIPT_SERVER: server}},
        "logger": {"type": "none", "progress_display": False},
    }
    path = cwd / "fastagent.config.yaml"
    path.write_text(json.dumps(config, indent=2))
    return path


def _fast_agent_rounds(binary: str, cwd: Path) -> ScriptRun:
    """`fast-agent go --message` with the config above; --servers enables the config's server."""
    with TimedLLM(*_rounds_script()) as llm:
        config = _fast_agent_config(llm.base_url, cwd)
        argv = [binary, "go", "--config-path", str(config), "--servers", SCRIPT_SERVER]
        argv += ["--model", FAST_AGENT_MODEL, "--message", "add numbers", "--quiet", "--no-home"]
        result = run_timed(argv, cwd=cwd, env=agent_env(llm.base_url, cwd / "state"))
    return _check_rounds(llm, result, "fast-agent go")


def _alternate_runs(
    binary: str | None, runs: int, tmp: Path
) -> tuple[list[ScriptRun], list[ScriptRun], str | None]:
    """Ours, theirs, ours, …: drift on a busy 2-core machine then hits both alike.

    Our failure propagates (a bench crash); fast-agent's ends its runs (ours go on, so our
    number still stands) and says why.
    """
    ours: list[ScriptRun] = []
    theirs: list[ScriptRun] = []
    failure: str | None = None
    ours_dir, theirs_dir = tmp / "ours", tmp / "fast-agent"
    ours_dir.mkdir()
    theirs_dir.mkdir()
    for _ in range(runs):
        ours.append(_our_rounds(ours_dir))
        if binary is None or failure is not None:
            continue
        try:
            theirs.append(_fast_agent_rounds(binary, theirs_dir))
        except (RoundsFailed, TimeoutError) as exc:
            failure = f"fast-agent failed: {' '.join(str(exc).split())[:320]}"
            theirs.clear()
    return ours, theirs, failure


def _rounds_detail(ours: list[ScriptRun], theirs: list[ScriptRun]) -> dict[str, Any]:
    return {
        "ours_runs_s": [r.seconds for r in ours],
        "ours_model_s": [r.model_seconds for r in ours],
        "fast_agent_runs_s": [r.seconds for r in theirs],
        "fast_agent_model_s": [r.model_seconds for r in theirs],
        "tool_calls_per_run": ROUNDS,
        "model_requests_per_run": ROUNDS + 1,
        "tool_name": SUM_TOOL,
    }


def rounds_vs_fast_agent(reps: int, smoke: bool) -> list[Comparison]:
    """The same ROUNDS-round get-sum script end to end through run_mcp.py and `fast-agent go`.

    Two lines: wall time, and wall minus the scripted model's own time. One untimed warm-up
    run each (not in --smoke) fills the page and .pyc caches; medians of `reps` runs.
    """
    binary, status = _fast_agent_binary(smoke)
    warmup = 0 if smoke else 1
    with workdir("rounds-fast-agent") as tmp:
        ours, theirs, failure = _alternate_runs(binary, warmup + reps, tmp)
    ours, theirs = ours[warmup:], theirs[warmup:]
    status = failure or status
    detail = _rounds_detail(ours, theirs)

    def line(key: str, label: str, seconds: Callable[[ScriptRun], float]) -> Comparison:
        theirs_s = median([seconds(r) for r in theirs]) if theirs else None
        ours_s = median([seconds(r) for r in ours])
        return Comparison(key, label, status, ours_s, theirs_s, target=1.0, detail=detail)

    label = f"{ROUNDS}-round script vs fast-agent"
    return [
        line("rounds_fast_agent", f"{label}: wall", lambda r: r.seconds),
        line("rounds_fast_agent_agent", f"{label}: wall - model", lambda r: r.agent_seconds),
    ]
