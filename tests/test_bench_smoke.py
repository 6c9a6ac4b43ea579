"""`python bench/run.py --smoke` runs end to end and reports every measurement as numbers.

A benchmark is not a test of its targets: this only guards against the bench rotting (a
crashed measurement exits non-zero). Everything it starts lives in temp dirs on free ports
and is stopped by the bench itself.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bench.measures import run_cli
from bench.timing import ProcResult, TimedLLM
from tests.support.fake_llm import text
from tests.support.servers import REPO_ROOT

MEASUREMENTS = {
    "startup",
    "per_step",
    "per_step_with_client",
    "tools_list_per_run",
    "peak_rss",
    "concurrency",
    "fanout",
    "fanout_single",
    "search_request_size",
    "search_step_time",
    "many_servers",
    "huge_server_time",
    "huge_server_rss",
    "first_request",
    "exit_tail",
    "log_flood",
    "log_flood_verbose",
    "task_overhead",
    "modern_connect",
    "compaction_tokens",
    "snapshot_first",
    "snapshot_second",
    "sandbox_call",
    "sandbox_filter",
    "batch_parallel",
    "batch_cluster",
    "batch_cluster_row",
}
COMPARISONS = {"fast_agent", "rounds_fast_agent", "rounds_fast_agent_agent"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_smoke_reports_every_measurement(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MCP_AGENT_"))}
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "bench" / "run.py"), "--smoke", "--json", str(out)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(out.read_text())
    assert results["errors"] == {}
    assert set(results["measurements"]) == MEASUREMENTS
    for key, row in results["measurements"].items():
        assert isinstance(row["ours"], int | float) and math.isfinite(row["ours"]), key
        if row["baseline"] is not None:
            assert isinstance(row["baseline"], int | float), key
    assert set(results["comparisons"]) == COMPARISONS
    # --smoke never installs fast-agent, but our side of the 20-round script always runs.
    for key in COMPARISONS - {"fast_agent"}:
        ours = results["comparisons"][key]["ours"]
        assert isinstance(ours, int | float) and ours > 0, key
    assert "| measurement" in proc.stdout


# Hangs at connect the first time (writing its parent's pid, the agent's, to the marker), so
# the agent can be killed before it asks the model; later it is the bundled server.
HANG_ONCE = """
import os, sys, pathlib
marker = pathlib.Path(sys.argv[1])
if not marker.exists():
    marker.write_text(str(os.getppid()))
    sys.stdin.read()  # until the killed agent's pipe closes
    sys.exit(0)
os.execv(sys.executable, [sys.executable, "-m", "agent.server", "--root", sys.argv[2]])
"""


def test_a_run_killed_from_outside_before_asking_the_model_is_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What CI once saw (SIGKILL 0.6 s into a run) no longer fails a measurement."""
    script, marker = tmp_path / "hang_once.py", tmp_path / "agent.pid"
    script.write_text(HANG_ONCE)
    server = f"{sys.executable} {script} {marker} {tmp_path}"
    results: list[ProcResult | BaseException] = []
    with TimedLLM(text("hello")) as llm:

        def run() -> None:
            try:
                results.append(run_cli(["--server-command", server, "-p", "hi"], llm, tmp_path))
            except BaseException as exc:
                results.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()):
            assert time.monotonic() < deadline, "the agent never started its server"
            time.sleep(0.02)
        os.kill(int(marker.read_text()), signal.SIGKILL)
        worker.join(120)
    [result] = results
    assert isinstance(result, ProcResult), result
    assert result.returncode == 0 and result.stdout == "hello\n"
    assert "was killed by signal 9" in capsys.readouterr().err
    llm.assert_complete()


def test_the_benchmarks_import_without_pytest() -> None:
    """The bench shares the scripted model and the server helpers with the tests, but runs
    where pytest is not installed: every bench module imports with pytest made unimportable."""
    modules = sorted(p.stem for p in (REPO_ROOT / "bench").glob("*.py") if p.stem != "__init__")
    probe = "import sys, importlib\nsys.modules['pytest'] = None\n" + "".join(
        f"importlib.import_module('bench.{name}')\n" for name in modules
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert len(modules) >= 10, modules
