"""`run_mcp.py mcp add|list|get|remove`, as a user types it: round trips on the user-level
file and on a project's `.mcp.json`, against real servers; secrets are never echoed.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

from agent.config_servers import load_mcp_config
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text
from tests.support.servers import SUPPORT, time_server_command

TWIN_SERVER = str(SUPPORT / "twin_server.py")
ENV_SECRET = "env-secret-5d1c9e"
HEADER_SECRET = "hdr-secret-88a2f0"


def mcp(tmp_path: Path, *args: str, cwd: Path | None = None) -> tuple[int, str]:
    proc = run_cli(["mcp", *args], cwd or tmp_path, base_url=None, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def test_user_scope_round_trip_with_live_status_and_no_secret_echoed(
    tmp_path: Path, everything_http_url: str
) -> None:
    command, args = time_server_command()
    rc, said = mcp(tmp_path, "add", "time", "-e", f"TIME_TOKEN={ENV_SECRET}", "--", command, *args)
    assert rc == 0, said
    user_file = tmp_path / "xdg-config" / "mcp-agent" / "mcp.json"
    assert f"added stdio server 'time' to {user_file}" in said
    assert "env: TIME_TOKEN (values not shown)" in said
    auth = f"Authorization: Bearer {HEADER_SECRET}"
    rc, said2 = mcp(tmp_path, "add", "--transport", "http", "web", everything_http_url, "-H", auth)
    assert rc == 0, said2
    assert stat.S_IMODE(user_file.stat().st_mode) == 0o600  # a new file: it may hold secrets

    # The file is Claude Code's shape, and our own reader takes it.
    doc = json.loads(user_file.read_text())
    assert doc["mcpServers"]["time"] == {
        "type": "stdio",
        "command": command,
        "args": args,
        "env": {"TIME_TOKEN": ENV_SECRET},
    }
    assert doc["mcpServers"]["web"] == {
        "type": "http",
        "url": everything_http_url,
        "headers": {"Authorization": f"Bearer {HEADER_SECRET}"},
    }
    assert [s.type for s in load_mcp_config(user_file, {})] == ["stdio", "http"]

    rc, listed = mcp(tmp_path, "list")
    assert rc == 0, listed
    assert "time: " in listed and "(stdio) - ✓ connected (2 tools)" in listed
    assert f"web: {everything_http_url} (http) - ✓ connected" in listed
    rc, got = mcp(tmp_path, "get", "web")
    assert rc == 0 and "headers: Authorization (values not shown)" in got
    for output in (said, said2, listed, got):
        assert ENV_SECRET not in output and HEADER_SECRET not in output

    user_file.chmod(0o640)
    rc, removed = mcp(tmp_path, "remove", "web")
    assert rc == 0 and f"removed server 'web' from {user_file}" in removed
    assert stat.S_IMODE(user_file.stat().st_mode) == 0o640  # permissions kept
    assert list(json.loads(user_file.read_text())["mcpServers"]) == ["time"]
    rc, again = mcp(tmp_path, "remove", "web")
    assert rc == 2 and "no server 'web' in" in again


def test_project_scope_writes_dot_mcp_json_used_once_the_folder_is_trusted(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    rc, said = mcp(
        tmp_path,
        "add",
        "-s",
        "project",
        "twin",
        "--",
        sys.executable,
        TWIN_SERVER,
        "p",
        cwd=project,
    )
    assert rc == 0, said
    assert "read once this folder is trusted" in said
    written = json.loads((project / ".mcp.json").read_text())
    assert written == {
        "mcpServers": {
            "twin": {"type": "stdio", "command": sys.executable, "args": [TWIN_SERVER, "p"]}
        }
    }
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli(["--trust-workspace", "-p", "hi"], project, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert "twin__delete" in {t["function"]["name"] for t in llm.requests[0]["tools"]}
    rc, removed = mcp(tmp_path, "remove", "-s", "project", "twin", cwd=project)
    assert rc == 0, removed
    assert json.loads((project / ".mcp.json").read_text()) == {"mcpServers": {}}


def test_add_refuses_a_name_taken_and_a_missing_command(tmp_path: Path) -> None:
    assert mcp(tmp_path, "add", "x", "--", "echo")[0] == 0
    rc, said = mcp(tmp_path, "add", "x", "--", "echo")
    assert rc == 2 and "server 'x' already exists in" in said and "mcp remove x" in said
    rc, said = mcp(tmp_path, "add", "y")
    assert rc == 2 and "the command is missing" in said
    rc, said = mcp(tmp_path, "add", "--transport", "http", "z", "ftp://x")
    assert rc == 2 and "must start with http:// or https://" in said


def test_repl_servers_disable_and_enable_for_the_session(tmp_path: Path) -> None:
    servers = {n: {"command": sys.executable, "args": [TWIN_SERVER, n]} for n in ("one", "two")}
    mcp_json(tmp_path, servers)
    with ScriptedLLM(text("first"), text("second")) as llm:
        proc = run_cli(
            ["--mcp-config", str(tmp_path / "mcp.json"), "-i"],
            tmp_path,
            base_url=llm.base_url,
            stdin="/servers disable two\nhi\n/servers enable two\nhi again\n",
        )
    assert proc.returncode == 0, proc.stderr
    offered = [{t["function"]["name"] for t in r["tools"]} for r in llm.requests]
    assert "two__delete" not in offered[0] and "one__delete" in offered[0]
    assert {"one__delete", "two__delete"} <= offered[1]
    said = proc.stdout + proc.stderr
    assert "server 'two' disabled for this session" in said
    assert "server 'two' enabled (2 tools)" in said
    assert json.loads((tmp_path / "mcp.json").read_text())["mcpServers"] == servers  # untouched
