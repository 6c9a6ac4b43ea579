"""`python run_mcp.py` run as a user runs it, for the end-to-end tests.

State and logs go to `workdir/state`, so tests run in parallel; the agent's own environment
variables (OPENAI_*, MCP_AGENT_*) of the machine never leak into a test, nor its HOME (the
test's own, tests/support/hermetic.py, comes with the rest of os.environ).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.hermetic import assert_own_home
from tests.support.servers import REPO_ROOT

RUN_MCP = str(REPO_ROOT / "run_mcp.py")


def mcp_json(folder: Path, servers: dict[str, Any], *, mode: int | None = None) -> Path:
    """`folder/mcp.json` listing `servers`, the file a user points `--mcp-config` at; `mode`
    for the tests of what a group- or world-readable secret file is told."""
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    if mode is not None:
        path.chmod(mode)
    return path


def cli_env(workdir: Path, base_url: str | None, api_key: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MCP_AGENT_"))}
    assert_own_home(env)
    # The user-level folder is the test's: `workdir/xdg-config/mcp-agent`.
    env |= {"MCP_AGENT_STATE_DIR": str(workdir / "state"), "NO_COLOR": "1"}
    env["XDG_CONFIG_HOME"] = str(workdir / "xdg-config")
    if base_url:
        env["OPENAI_BASE_URL"] = base_url
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    return env


def start_cli(
    args: list[str], workdir: Path, env: dict[str, str], *, stdin_pipe: bool = False
) -> subprocess.Popen[str]:
    """`run_mcp.py ARGS` started and not waited for, for a test that signals it, types into
    it or reads its output as it comes: stdout and stderr piped, stdin piped when asked
    (else /dev/null, so nothing waits for a terminal). The test stops what it started."""
    return subprocess.Popen(
        [sys.executable, RUN_MCP, *args],
        cwd=workdir,
        env=env,
        stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_cli(
    args: list[str],
    workdir: Path,
    *,
    base_url: str | None,
    api_key: str | None = "sk-e2e-secret",
    stdin: str | None = None,
    extra_env: dict[str, str] | None = None,
    timeout: float = 90,
    run_mcp: Path | str = RUN_MCP,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(run_mcp), *args],
        cwd=workdir,
        env={**(extra_env or {}), **cli_env(workdir, base_url, api_key)},
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
