"""Config where users keep it: a user-level folder besides ./config/, other clients' files
by name (`--mcp-config claude|cursor|vscode`), and which files were read (-v, /servers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.common.errors import ConfigError
from agent.config.build import build_settings
from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text
from tests.support.servers import time_server_command


def write(path: Path, doc: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def settings(tmp_path: Path, mcp: Path | str | None = None):
    """Settings read in tmp_path, a folder the user trusts (its config/ counts)."""
    env = {"HOME": str(tmp_path / "home")}
    return build_settings(
        config_path=None,
        mcp_config_path=mcp,
        cli_server=None,
        environ=env,
        workspace=tmp_path,
        trust_workspace=True,
    )


def test_user_and_project_servers_are_both_read_the_project_winning_a_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    user = tmp_path / "home" / ".config" / "mcp-agent"
    write(user / "mcp.json", {"mcpServers": {"mine": {"command": "a"}, "both": {"command": "u"}}})
    (user / "config.toml").write_text('[llm]\nmodel = "from-user"\n')
    project = write(tmp_path / "config" / "mcp.json", {"mcpServers": {"both": {"command": "p"}}})
    got = settings(tmp_path)
    assert {s.name: s.command for s in got.servers} == {"mine": "a", "both": "p"}
    assert got.llm.model == "from-user"  # no ./config/config.toml: the user's settings
    assert got.config_files == (
        str(user / "config.toml"),
        str(user / "mcp.json"),
        str(project.relative_to(tmp_path)),
    )


def test_well_known_files_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    claude = tmp_path / "home" / ".config" / "Claude" / "claude_desktop_config.json"
    write(claude, {"mcpServers": {"desk": {"command": "x"}}})
    code = tmp_path / "home" / ".config" / "Code" / "User" / "mcp.json"
    write(code, {"servers": {"code": {"type": "stdio", "command": "y"}}})
    write(tmp_path / ".vscode" / "mcp.json", {"servers": {"planted": {"command": "evil"}}})
    assert [s.name for s in settings(tmp_path, Path("claude")).servers] == ["desk"]
    assert [s.name for s in settings(tmp_path, Path("vscode")).servers] == ["code"]
    with pytest.raises(ConfigError, match=r"no cursor config found \(looked in .*\.cursor"):
        settings(tmp_path, Path("cursor"))


def test_verbose_says_which_files_were_read(tmp_path: Path) -> None:
    command, args = time_server_command()
    vscode = {"servers": {"time": {"type": "stdio", "command": command, "args": args}}}
    write(tmp_path / ".vscode" / "mcp.json", vscode)
    with ScriptedLLM(text("hello")) as llm:
        proc = run_cli(
            ["--mcp-config", ".vscode/mcp.json", "-v", "-p", "hi"], tmp_path, base_url=llm.base_url
        )
    assert proc.returncode == 0, proc.stderr
    assert "config files read: .vscode/mcp.json" in proc.stderr
    assert [t["function"]["name"] for t in llm.requests[0]["tools"]][:2] == [
        "time__convert_time",
        "time__get_current_time",
    ]


def test_a_well_known_name_is_always_the_name_and_a_file_of_that_name_needs_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder holding a file called `claude` cannot stand in for Claude Desktop's config."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "claude", {"mcpServers": {"planted": {"command": "evil"}}})
    with pytest.raises(
        ConfigError, match=r"no claude config found .*the file claude here is ./claude"
    ):
        settings(tmp_path, "claude")  # the CLI passes the text as typed
    claude = tmp_path / "home" / ".config" / "Claude" / "claude_desktop_config.json"
    write(claude, {"mcpServers": {"desk": {"command": "x"}}})
    assert [s.name for s in settings(tmp_path, "claude").servers] == ["desk"]
    assert [s.name for s in settings(tmp_path, "Claude-Desktop").servers] == ["desk"]
    assert [s.name for s in settings(tmp_path, "./claude").servers] == ["planted"]
