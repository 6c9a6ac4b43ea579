"""`python bench/run.py --smoke` runs end to end and reports every measurement as numbers.

A benchmark is not a test of its targets: this only guards against the bench rotting (a
crashed measurement exits non-zero). Everything it starts lives in temp dirs on free ports
and is stopped by the bench itself.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import REPO_ROOT

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
