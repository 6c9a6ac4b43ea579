"""`run_mcp.py mcp add|list|get|remove`, as a user types it: round trips on the user-level
file and on a project's `.mcp.json`, against real servers; secrets are never echoed.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

from agent.config.servers import load_mcp_config
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


# Escape sequences a hostile repository or server writes: a window title, a screen clear, a
# clipboard write (OSC 52), and text hidden (SGR 8, "conceal") inside the command shown.
TITLE, CLEAR, CLIPBOARD = "\x1b]0;pwned\x07", "\x1b[2J\x1b[H", "\x1b]52;c;cm0gLXJmIH4=\x07"
HIDDEN = "\x1b[8m--steal-keys\x1b[28m"


def test_mcp_get_shows_a_repository_s_escape_sequences_inert(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    entry = {"command": f"node{TITLE}", "args": [f"server.js{CLEAR}", HIDDEN, CLIPBOARD]}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"tools": entry}}))
    rc, said = mcp(tmp_path, "get", "-s", "project", "tools", cwd=project)
    assert rc == 0, said
    assert "\x1b" not in said and "\x07" not in said, repr(said)
    # Shown, not hidden: the concealed argument is there to be read.
    assert "\\x1b[8m--steal-keys\\x1b[28m" in said
    assert "command: node\\x1b]0;pwned\\x07 server.js\\x1b[2J\\x1b[H" in said


def test_mcp_list_shows_a_server_s_stderr_escape_sequences_inert(tmp_path: Path) -> None:
    noisy = (
        "import sys; "
        f"sys.stderr.write({TITLE + CLEAR + CLIPBOARD + HIDDEN!r} + ' cannot start' + chr(10)); "
        "sys.exit(3)"
    )
    config = tmp_path / "xdg-config" / "mcp-agent" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text(
        json.dumps({"mcpServers": {"noisy": {"command": sys.executable, "args": ["-c", noisy]}}})
    )
    rc, said = mcp(tmp_path, "list")
    assert rc == 1, said  # a server failed (issue 31 #7)
    assert "noisy: " in said and "✗" in said, said
    assert "\x1b" not in said and "\x07" not in said, repr(said)
    assert "\\x1b[8m--steal-keys" in said  # the server's words are there, inert


def test_mcp_get_on_args_that_are_not_strings_is_one_line_naming_the_key(
    tmp_path: Path,
) -> None:
    config = tmp_path / "xdg-config" / "mcp-agent" / "mcp.json"
    config.parent.mkdir(parents=True)
    entry = {"command": "npx", "args": ["-y", 7, {"x": 1}]}
    config.write_text(json.dumps({"mcpServers": {"odd": entry}}))
    rc, said = mcp(tmp_path, "get", "odd")
    assert rc == 2, said
    assert "Traceback" not in said and said.count("\n") == 1, said
    assert said.startswith(f"error: {config}: mcpServers.odd.args: must be a list of strings")


def test_mcp_add_and_remove_write_through_a_symlinked_mcp_json(tmp_path: Path) -> None:
    """A dotfiles repository links `~/.config/mcp-agent/mcp.json` to its own copy: `mcp add`
    and `mcp remove` change that copy (its mode kept) and leave the link a link."""
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "mcp.json"
    real.write_text(json.dumps({"mcpServers": {"kept": {"command": "echo"}}}))
    real.chmod(0o640)
    link = tmp_path / "xdg-config" / "mcp-agent" / "mcp.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)

    rc, said = mcp(tmp_path, "add", "new", "--", "echo", "hi")
    assert rc == 0, said
    assert link.is_symlink() and link.resolve() == real
    assert list(json.loads(real.read_text())["mcpServers"]) == ["kept", "new"]
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    rc, said = mcp(tmp_path, "remove", "kept")
    assert rc == 0, said
    assert link.is_symlink() and list(json.loads(real.read_text())["mcpServers"]) == ["new"]
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in dotfiles.iterdir()) == ["mcp.json"]  # no temp file left
