"""Other clients' config files, each written the way that client's docs show, read the way
that client reads it: through `run_mcp.py -p` with the scripted model and real servers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.support.cli import RUN_MCP, cli_env, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import SUPPORT

ENV_SERVER = str(SUPPORT / "env_server.py")
TWIN_SERVER = str(SUPPORT / "twin_server.py")
ANSWER = "typed-at-the-terminal-7f3a"


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2))
    return path


def tool_results(llm: ScriptedLLM, request: int = 1) -> list[str]:
    return [m["content"] for m in llm.requests[request]["messages"] if m["role"] == "tool"]


def environment_seen(llm: ScriptedLLM) -> dict[str, str]:
    tool = tool_results(llm)[0]
    return json.loads(tool[tool.index("{") : tool.rindex("}") + 1])


def vscode_file(tmp_path: Path) -> Path:
    """`.vscode/mcp.json` as VS Code's docs show it: `servers`, `inputs`, its variables."""
    return write(
        tmp_path / ".vscode" / "mcp.json",
        {
            "inputs": [
                {
                    "type": "promptString",
                    "id": "api-token",
                    "description": "Service API token",
                    "password": True,
                }
            ],
            "servers": {
                "env": {
                    "type": "stdio",
                    "command": sys.executable,
                    "args": [ENV_SERVER, "--root", "${workspaceFolder}"],
                    "env": {
                        "SERVICE_TOKEN": "${input:api-token}",
                        "SAME_TOKEN": "Bearer ${input:api-token}",
                        "WORKSPACE": "${workspaceFolder}",
                        "FROM_ENV": "${env:DIALECT_TEST_VALUE}",
                    },
                }
            },
        },
    )


def test_vscode_input_is_asked_once_masked_and_never_written(tmp_path: Path) -> None:
    config = vscode_file(tmp_path)
    config.chmod(0o644)  # readable by all: a reference is not a secret written out
    script = [tool_calls(("env__environment", {})), text("done")]
    with ScriptedLLM(*script) as llm:
        env = {**cli_env(tmp_path, llm.base_url, "sk-e2e-secret"), "DIALECT_TEST_VALUE": "v1"}
        child = pexpect.spawn(
            sys.executable,
            [RUN_MCP, "--mcp-config", ".vscode/mcp.json", "-p", "env?"],
            cwd=str(tmp_path),
            env=env,
            encoding="utf-8",
            timeout=90,
        )
        child.expect_exact("Service API token (input 'api-token', hidden): ")
        child.sendline(ANSWER)
        child.expect(pexpect.EOF)
        child.close()
        shown = (child.before or "") + "".join(child.buffer or "")
    assert child.exitstatus == 0, shown
    seen = environment_seen(llm)
    assert seen["SERVICE_TOKEN"] == ANSWER and seen["SAME_TOKEN"] == f"Bearer {ANSWER}"
    assert seen["WORKSPACE"] == str(tmp_path.resolve()) and seen["FROM_ENV"] == "v1"
    assert ANSWER not in shown  # not echoed, not in the tool trace
    assert "holds secrets" not in shown
    written = [p for p in tmp_path.rglob("*") if p.is_file() and ANSWER in p.read_text("utf-8")]
    assert written == []  # transcript, logs, config: the answer is in none


def test_vscode_input_without_a_terminal_is_a_one_line_error(tmp_path: Path) -> None:
    vscode_file(tmp_path)
    proc = run_cli(["--mcp-config", ".vscode/mcp.json", "-p", "env?"], tmp_path, base_url=None)
    assert proc.returncode == 2, proc.stderr
    assert "needs ${input:api-token} (Service API token), which is asked only at a terminal" in (
        proc.stderr
    )


def test_cursor_env_file_under_the_entrys_own_env(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text('# secrets\nA=from-file\nB=loses\nexport C="quoted value"\n')
    write(
        tmp_path / ".cursor" / "mcp.json",
        {
            "mcpServers": {
                "env": {
                    "command": sys.executable,
                    "args": [ENV_SERVER],
                    "env": {"B": "from-env"},
                    "envFile": "${workspaceFolder}/.env",
                }
            }
        },
    )
    with ScriptedLLM(tool_calls(("env__environment", {})), text("done")) as llm:
        # The project's file by its path; its .env is the folder's: read once it is trusted.
        args = ["--mcp-config", ".cursor/mcp.json", "--trust-workspace", "-p", "env?"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    seen = environment_seen(llm)
    assert (seen["A"], seen["B"], seen["C"]) == ("from-file", "from-env", "quoted value")


def test_windsurf_server_url(tmp_path: Path, everything_http_url: str) -> None:
    config = write(
        tmp_path / "mcp_config.json",
        {"mcpServers": {"remote": {"serverUrl": everything_http_url}}},
    )
    script = [tool_calls(("remote__echo", {"message": "over serverUrl"})), text("done")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["--mcp-config", str(config), "-p", "echo"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert "over serverUrl" in tool_results(llm)[0]


def test_cline_disabled_is_off_and_auto_approve_is_read_as_trust_and_said(
    tmp_path: Path,
) -> None:
    config = write(
        tmp_path / "cline_mcp_settings.json",
        {
            "mcpServers": {
                "twin": {
                    "command": sys.executable,
                    "args": [TWIN_SERVER, "cline"],
                    "env": {},
                    "disabled": False,
                    "autoApprove": ["delete"],
                },
                "off": {"command": "no-such-command-here", "args": [], "disabled": True},
            }
        },
    )
    script = [tool_calls(("twin__delete", {})), text("done")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            ["--mcp-config", str(config), "-p", "delete", "--output", "json"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    assert "cline: delete ran" in tool_results(llm)[0]  # ran in -p without --yes: trusted
    assert "autoApprove is read as trust: delete run without asking" in proc.stderr
    assert [s["name"] for s in json.loads(proc.stdout)["servers"]] == ["twin"]


def test_claude_code_project_file_with_its_type_values(
    tmp_path: Path, everything_http_url: str
) -> None:
    config = write(
        tmp_path / ".mcp.json",
        {
            "mcpServers": {
                "twin": {"type": "stdio", "command": sys.executable, "args": [TWIN_SERVER, "cc"]},
                "remote": {"type": "http", "url": "${EVERYTHING_URL:-http://127.0.0.1:9/mcp}"},
            }
        },
    )
    with ScriptedLLM(text("listed")) as llm:
        proc = run_cli(
            ["--mcp-config", str(config), "-p", "hi"],
            tmp_path,
            base_url=llm.base_url,
            extra_env={"EVERYTHING_URL": everything_http_url},
        )
    assert proc.returncode == 0, proc.stderr
    names = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert {"twin__delete", "remote__echo"} <= names


@pytest.mark.parametrize("key", ["autoApprove", "alwaysAllow"])
def test_auto_approve_beside_trust_is_said_not_read(
    tmp_path: Path, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent.config.servers import load_mcp_config

    path = write(
        tmp_path / "m.json",
        {"mcpServers": {"s": {"command": "x", "trust": ["a"], key: ["b"]}}},
    )
    (server,) = load_mcp_config(path, {})
    assert server.trust == ("a",)
    assert "autoApprove is not read: this entry sets its own 'trust'" in capsys.readouterr().err


def test_a_projects_claude_code_file_is_read_only_once_the_folder_is_trusted(
    tmp_path: Path,
) -> None:
    twin = {"command": sys.executable, "args": [TWIN_SERVER, "project"]}
    write(tmp_path / ".mcp.json", {"mcpServers": {"twin": twin}})
    with ScriptedLLM(text("untrusted"), text("trusted")) as llm:
        untrusted = run_cli(["-p", "hi"], tmp_path, base_url=llm.base_url)
        trusted = run_cli(["--trust-workspace", "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert untrusted.returncode == 0 and trusted.returncode == 0, trusted.stderr
    before = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    after = {t["function"]["name"] for t in llm.requests[1]["tools"]}
    assert "twin__delete" not in before and "twin__delete" in after
