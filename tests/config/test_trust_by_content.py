"""Trust is given to what a folder's files are, not to its path (issue 29, item 14).

A folder trusted with `run_mcp.py trust` (or a "yes" at the REPL) that later gains a hook
or changes a server's command runs neither until the user trusts it again: a single-shot
run says so in one line naming the changed files and how to re-trust; the REPL asks again,
showing what changed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import RUN_MCP, run_cli
from tests.support.fake_llm import ScriptedLLM, text
from tests.support.servers import time_server_command
from tests.support.terminal import Terminal

KEY = "sk-user-secret-key"
# A stdio server that writes a marker, then serves the time tools.
MARKING_SERVER = (
    "import runpy, sys; open(sys.argv[1], 'w').write('ran'); "
    "sys.argv = ['mcp-server-time', '--local-timezone', 'UTC']; "
    "runpy.run_module('mcp_server_time', run_name='__main__')"
)


def run(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), work, base_url=None, api_key=KEY)


def servers(work: Path, marker: Path | None = None) -> None:
    command, args = time_server_command()
    if marker is not None:
        args = ["-c", MARKING_SERVER, str(marker)]
    doc = {"mcpServers": {"time": {"command": command, "args": args}}}
    (work / "config").mkdir(exist_ok=True)
    (work / "config" / "mcp.json").write_text(json.dumps(doc))


def hook(work: Path, marker: Path) -> None:
    command = shlex.join([sys.executable, "-c", "import sys; open(sys.argv[1], 'w')", str(marker)])
    groups = [{"hooks": [{"type": "command", "command": command}]}]
    doc = {"hooks": {"UserPromptSubmit": groups}}
    (work / "config" / "hooks.json").write_text(json.dumps(doc))


def user_endpoint(work: Path, base_url: str) -> None:
    path = work / "xdg-config" / "mcp-agent" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[llm]\nbase_url = "{base_url}"\nmodel = "mine"\n')


@pytest.mark.parametrize("change", ["a hook added", "a server's command changed"])
def test_a_trusted_folder_whose_files_change_is_untrusted_until_trusted_again(
    tmp_path: Path, change: str
) -> None:
    marker = tmp_path / "changed-code-ran"
    servers(tmp_path)
    assert run(tmp_path, "trust", str(tmp_path)).returncode == 0
    if change == "a hook added":
        hook(tmp_path, marker)
        changed = "config/hooks.json"
    else:
        servers(tmp_path, marker)
        changed = "config/mcp.json"
    with ScriptedLLM(text("untrusted run"), text("trusted again")) as llm:
        user_endpoint(tmp_path, llm.base_url)
        proc = run(tmp_path, "-p", "hi")
        assert proc.returncode == 0, proc.stderr
        assert not marker.exists()  # neither the new hook nor the new command ran
        [line] = [line for line in proc.stderr.splitlines() if line.startswith("note: ignoring")]
        assert f"(its files changed since you trusted it: {changed})" in line
        assert f"run 'run_mcp.py trust {tmp_path.resolve()}' again" in line
        names = {t["function"]["name"] for t in llm.requests[0]["tools"]}
        assert not any(n.startswith("time__") for n in names)
        again = run(tmp_path, "trust", str(tmp_path))
        assert again.returncode == 0, again.stderr
        proc = run(tmp_path, "-p", "hi")
    assert proc.returncode == 0, proc.stderr
    assert marker.exists() and "note: ignoring" not in proc.stderr
    llm.assert_complete()


@pytest.mark.skipif(shutil.which("tmux") is None and os.environ.get("CI") != "true", reason="tmux")
def test_the_repl_asks_again_showing_what_changed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "hook-ran"
    servers(work)
    assert run(work, "trust", str(work)).returncode == 0
    hook(work, marker)
    with ScriptedLLM() as llm:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MCP_AGENT_"))}
        env |= {
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": KEY,
            "MCP_AGENT_STATE_DIR": str(work / "state"),
            "XDG_CONFIG_HOME": str(work / "xdg-config"),
            "TERM": "xterm-256color",
            "NO_COLOR": "1",
        }
        term = Terminal([sys.executable, RUN_MCP], cwd=work, env=env, log=tmp_path / "screen.txt")
        try:
            term.wait_for(r"Trust this folder and use its files\?")
            screen = " ".join(term.screen().split())  # rich wraps long lines
            assert "changed since you trusted it: config/hooks.json" in screen
            assert "+ config/hooks.json: on UserPromptSubmit (*) runs" in screen
            term.type("n")
            term.wait_for(r"tools from 1 server")
            term.leave()
        finally:
            term.close()
    assert not marker.exists()
