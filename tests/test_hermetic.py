"""The tests are hermetic (issue 41 #1): a developer's own set-up of the agent changes no
test's outcome. Their config folder under HOME names another model and endpoint, a required
server that cannot start, every tool disallowed, and hooks that block every prompt and every
tool call; their shell sets the agent's variables too.

Representative tests (the REPL in tmux, the REPL headless, a run_cli run) run again in a
pytest of their own with that developer's HOME. They pass because tests/conftest.py gives
every test its own HOME and XDG folders (tests/support/hermetic.py); before it, the tmux
REPL read `~/.config/mcp-agent` and failed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.servers import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

REPRESENTATIVE = (
    "tests/e2e/test_repl_terminal.py::test_a_session_at_the_terminal[xterm-256color]",
    "tests/ui/test_repl.py::test_commands_and_a_turn_that_runs_a_tool",
    "tests/e2e/test_cli_e2e.py::test_single_shot_over_stdio_prints_only_the_answer",
)
DEAD_ENDPOINT = "http://127.0.0.1:9/v1"  # the discard port: nothing answers there


def developers_home(home: Path) -> Path:
    """A HOME whose `.config/mcp-agent` breaks every test that reads it; the folder."""
    user = home / ".config" / "mcp-agent"
    user.mkdir(parents=True)
    (user / "config.toml").write_text(
        f'[llm]\nmodel = "the-developers-model"\nbase_url = "{DEAD_ENDPOINT}"\n\n'
        '[agent]\ndisallowed_tools = ["*"]\n'
    )
    broken = {"command": str(home / "no-such-server"), "required": True}
    (user / "mcp.json").write_text(json.dumps({"mcpServers": {"mine": broken}}))
    block = {"hooks": [{"type": "command", "command": "echo the developer hook >&2; exit 2"}]}
    hooks = {"UserPromptSubmit": [block], "PreToolUse": [{"matcher": "*", **block}]}
    (user / "hooks.json").write_text(json.dumps({"hooks": hooks}))
    return user


def developers_env(home: Path, user: Path) -> dict[str, str]:
    """This test's environment as that developer's shell would have it: their HOME, no XDG
    folders named (so HOME's are used), the agent's variables set; no trace of the pytest
    this runs in. The caches tests/conftest.py kept stay."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "HOME" and not k.startswith(("XDG_", "PYTEST_", "OPENAI_", "MCP_AGENT_"))
    }
    return env | {
        "HOME": str(home),
        "OPENAI_BASE_URL": DEAD_ENDPOINT,
        "OPENAI_API_KEY": "sk-the-developers-own-key",
        "OPENAI_MODEL": "the-developers-model",
        "MCP_AGENT_CONFIG_DIR": str(user),
        "MCP_AGENT_TRUST_WORKSPACE": "1",
    }


def test_a_developers_own_config_changes_no_tests_outcome(tmp_path: Path) -> None:
    home = tmp_path / "developer"
    env = developers_env(home, developers_home(home))
    # The set-up is poison indeed: the agent run as that developer fails.
    (tmp_path / "ws").mkdir()
    agent = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_mcp.py"), "-p", "hi"],
        cwd=tmp_path / "ws",
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert agent.returncode != 0 and "mine" in agent.stderr, agent.stderr

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", "."]
        + ["--basetemp", str(tmp_path / "basetemp"), *REPRESENTATIVE],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=360,
    )
    summary = proc.stdout.strip().splitlines()[-1:] or [""]
    no_tmux = shutil.which("tmux") is None and os.environ.get("CI") != "true"  # needs_tmux
    ran = len(REPRESENTATIVE) - (1 if no_tmux else 0)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0 and summary[0].startswith(f"{ran} passed"), said
