"""The trust question reads every servers file as the agent reads it (issue 40, item 4).

VS Code writes `.vscode/mcp.json` with comments and trailing commas, and the agent loads it
so; the question used to read it as strict JSON, showed `unreadable (JSONDecodeError)`, and
left its `envFile` out of the remembered digest: a later `.env` change (`LD_PRELOAD=...`)
reached the server with no new question. Now the question shows the file's command and the
envFile's loader variables, a changed `.env` asks again, and a file the question cannot
read cannot be remembered as trusted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.cli import RUN_MCP, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import SUPPORT
from tests.support.terminal import Terminal, agent_env, needs_tmux

KEY = "sk-user-secret-key"
ENV_SERVER = str(SUPPORT / "env_server.py")
PRELOAD = "/nonexistent/evil.so"  # ld.so says it cannot preload it, and goes on
# What VS Code writes: comments, trailing commas, `servers`, `${workspaceFolder}`.
VSCODE_JSONC = """{
  // the project's servers
  "servers": {
    "env": {
      "command": %s,
      "args": [%s,],  /* a trailing comma */
      "envFile": "${workspaceFolder}/.env",
    },
  },
}
"""


def run(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(list(args), work, base_url=None, api_key=KEY)


def vscode_folder(work: Path, env_file: str) -> Path:
    """`work` with a JSONC `.vscode/mcp.json` whose server reports its environment and
    reads `.env`; the user's model settings beside, outside the folder."""
    (work / ".vscode").mkdir(parents=True)
    doc = VSCODE_JSONC % (json.dumps(sys.executable), json.dumps(ENV_SERVER))
    (work / ".vscode" / "mcp.json").write_text(doc)
    (work / ".env").write_text(env_file)
    user = work / "xdg-config" / "mcp-agent"
    user.mkdir(parents=True)
    (user / "config.toml").write_text("[llm]\nmodel = 'mine'\n")
    return work / ".env"


def test_a_jsonc_vscode_file_shows_its_command_and_its_env_files_loader_variable(
    tmp_path: Path,
) -> None:
    vscode_folder(tmp_path, f"MODE=fast\nLD_PRELOAD={PRELOAD}\n")
    said = run(tmp_path, "trust", str(tmp_path))
    assert said.returncode == 0, said.stderr
    lines = [line.strip() for line in said.stdout.splitlines()]
    assert not [line for line in lines if "unreadable" in line], lines
    [server] = [line for line in lines if line.startswith(".vscode/mcp.json: server 'env'")]
    assert f"runs {sys.executable} {ENV_SERVER}" in server
    assert (
        "envFile ${workspaceFolder}/.env: environment MODE; loader variables "
        f"LD_PRELOAD={PRELOAD} (code they name runs in the server)"
    ) in server


def test_after_trusting_a_jsonc_file_an_env_file_given_ld_preload_is_not_used_unasked(
    tmp_path: Path,
) -> None:
    env_file = vscode_folder(tmp_path, "MODE=fast\n")
    assert run(tmp_path, "trust", str(tmp_path)).returncode == 0
    env_file.write_text(f"MODE=fast\nLD_PRELOAD={PRELOAD}\n")  # after the "yes"
    with ScriptedLLM(tool_calls(("env__environment", {})), text("done")) as llm:
        proc = run_cli(["-p", "env?"], tmp_path, base_url=llm.base_url, api_key=KEY)
    assert proc.returncode == 0, proc.stderr
    [tool] = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert PRELOAD not in tool  # the server did not start with it (nor at all)
    names = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert "env__environment" not in names
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("note: ignoring")]
    assert "(its files changed since you trusted it: .env)" in line
    llm.assert_complete()


@needs_tmux
def test_the_repl_asks_again_when_the_env_file_of_a_jsonc_file_changes(tmp_path: Path) -> None:
    work = tmp_path / "work"
    env_file = vscode_folder(work, "MODE=fast\n")
    assert run(work, "trust", str(work)).returncode == 0
    env_file.write_text(f"MODE=fast\nLD_PRELOAD={PRELOAD}\n")
    with ScriptedLLM() as llm:
        env = agent_env(llm.base_url, work / "state") | {
            "XDG_CONFIG_HOME": str(work / "xdg-config")
        }
        term = Terminal([sys.executable, RUN_MCP], cwd=work, env=env, log=tmp_path / "screen.txt")
        try:
            term.wait_for(r"Trust this folder and use its files\?")
            screen = " ".join(term.screen().split())  # rich wraps long lines
            assert "changed since you trusted it: .env" in screen
            assert f"loader variables LD_PRELOAD={PRELOAD}" in screen
            term.type("n")
            term.wait_for(r"tools from 1 server")
            term.leave()
        finally:
            term.close()
    llm.assert_complete()


def test_a_servers_file_the_question_cannot_read_cannot_be_remembered_as_trusted(
    tmp_path: Path,
) -> None:
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {"x": {"command": "a" "b"}}}')
    said = run(tmp_path, "trust", str(tmp_path))
    assert said.returncode == 2, said.stdout
    [line] = said.stderr.splitlines()
    assert line.startswith(f"error: cannot trust {tmp_path.resolve()}: .mcp.json cannot be read")
    assert "fix it, or run with the folder untrusted" in line
    store = tmp_path / "state" / "trusted-folders.json"
    assert not store.exists() or str(tmp_path.resolve()) not in store.read_text()
    with ScriptedLLM(text("untrusted run")) as llm:
        proc = run_cli(["-p", "hi"], tmp_path, base_url=llm.base_url, api_key=KEY)
    assert proc.returncode == 0, proc.stderr
    assert "note: ignoring .mcp.json" in proc.stderr  # still a folder of no trust
    llm.assert_complete()


@needs_tmux
def test_the_repl_does_not_offer_to_trust_a_file_it_cannot_read(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".mcp.json").write_text('{"mcpServers": {"x": {"command": "a" "b"}}}')
    with ScriptedLLM() as llm:
        env = agent_env(llm.base_url, work / "state") | {
            "XDG_CONFIG_HOME": str(work / "xdg-config")
        }
        term = Terminal([sys.executable, RUN_MCP], cwd=work, env=env, log=tmp_path / "screen.txt")
        try:
            term.wait_for(r"tools from 1 server")
            screen = " ".join(term.screen().split())
            assert "first fix what the trust question cannot read: .mcp.json cannot be read" in (
                screen
            )
            assert "Trust this folder" not in screen
            term.leave()
        finally:
            term.close()
    assert not (work / "state" / "trusted-folders.json").exists()
    llm.assert_complete()
