"""The same rows as a local `run_mcp.py batch --parallel 4` and as `--cluster` with two local
Dask workers (`--parallel 2` each: 4 rows at once in both), measured in the same run,
against the scripted model and the bundled server.

On one machine the cluster cannot be faster: the same CPU runs the rows, and each row
also travels driver -> scheduler -> worker and back (a task, its attempt count, the line).
The ratio says what that costs, and the per-row overhead is the difference over the rows:
what a batch pays per row for being able to spread over machines. Each row is one model
request answered at once, so the rows cost the agent's own work, not the model's. The
cluster's start (scheduler, workers) is not counted: a user points at one already running.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench.measures import RUN_MCP, Row, workdir
from bench.timing import TimedLLM, agent_env, run_timed
from tests.support.fake_llm import text

ROWS = 100
PARALLEL = 4  # the local batch's; the cluster's two workers run half each
DASK = str(Path(sys.executable).parent / "dask")
REPO_ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def local_cluster(folder: Path, env: dict[str, str]) -> Iterator[str]:
    """A scheduler and two worker processes on 127.0.0.1 (free ports); its address."""
    env = {**env, "PYTHONPATH": str(REPO_ROOT)}
    loopback = ["--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"]
    started: list[subprocess.Popen[bytes]] = []
    log = (folder / "cluster.log").open("wb")
    try:
        file = folder / "scheduler.json"
        scheduler = [DASK, "scheduler", "--port", "0", "--scheduler-file", str(file), *loopback]
        started.append(subprocess.Popen(scheduler, env=env, stdout=log, stderr=log))
        _until(file.exists)
        address = str(json.loads(file.read_text())["address"])
        for i in (1, 2):
            started.append(subprocess.Popen(
                [DASK, "worker", address, "--no-nanny", "--nthreads", "1",
                 "--local-directory", str(folder / f"w{i}"), *loopback],
                env=env, stdout=log, stderr=log))  # fmt: skip
        _until(lambda: (folder / "cluster.log").read_text().count("Registered to:") >= 2)
        yield address
    finally:
        for proc in started:
            proc.terminate()
        for proc in started:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()


def _until(ready: object, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError("the local cluster did not start")
        time.sleep(0.05)


def _batch(tmp: Path, name: str, flags: list[str], env: dict[str, str], rows: int) -> float:
    out = tmp / f"{name}.jsonl"
    argv = [sys.executable, RUN_MCP, "batch", str(tmp / "in.jsonl"), "--out", str(out), *flags]
    result = run_timed(argv, cwd=tmp, env=env, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"{name} batch exited {result.returncode}:\n{result.stderr}")
    statuses = [json.loads(line)["status"] for line in out.read_text().splitlines()]
    if statuses != ["answered"] * rows:
        raise RuntimeError(f"{name} batch rows: {statuses}")
    return result.seconds


def cluster_vs_local(smoke: bool) -> list[Row]:
    rows = 4 if smoke else ROWS
    with workdir("batch-cluster") as tmp:
        (tmp / "in.jsonl").write_text(
            "".join(json.dumps({"id": i, "prompt": f"q{i}"}) + "\n" for i in range(rows))
        )
        with TimedLLM(*[text("ok")] * (2 * rows)) as llm:
            env = agent_env(llm.base_url, tmp / "state")
            local = _batch(tmp, "local", ["--parallel", str(PARALLEL)], env, rows)
            with local_cluster(tmp, {**env, "MCP_AGENT_STATE_DIR": str(tmp / "wstate")}) as at:
                flags = ["--cluster", at, "--parallel", str(PARALLEL // 2)]
                cluster = _batch(tmp, "cluster", flags, env, rows)
    per_row_ms = (cluster - local) / rows * 1000
    label = f"{rows}-row batch --cluster (2 local workers) vs local --parallel {PARALLEL}"
    detail = {
        "rows": rows,
        "local_rows_per_s": rows / local,
        "cluster_rows_per_s": rows / cluster,
    }
    return [
        Row("batch_cluster", label, "s", cluster, local, "ratio", None, detail),
        Row("batch_cluster_row", "per-row overhead of the cluster path", "ms", per_row_ms, None),
    ]
