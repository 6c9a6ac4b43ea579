"""A secret written out in a world-readable config file is warned about, value by value."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from agent.config.build import load_toml
from agent.config.servers import SECRET_WARNINGS_FILE, load_mcp_config
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text

ENVIRON = {"HOME": "/home/me", "T": "tok-123456", "K": "key-123456", "MYKEY": "sk-abcdef"}


@pytest.fixture(autouse=True)
def state_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the files already warned about are remembered: the test's own folder."""
    monkeypatch.setenv("MCP_AGENT_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def toml_file(tmp_path: Path, text: str, mode: int = 0o644) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    path.chmod(mode)
    return path


def warning_of(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("warning:") <= 1, err
    return err


def test_literal_api_key_next_to_a_reference_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = toml_file(
        tmp_path, '[llm]\napi_key = "sk-literal-abcdef"\nbase_url = "${BASE:-http://h/v1}"\n'
    )
    load_toml(path)
    err = warning_of(capsys)
    assert f"warning: {path}" in err and "[llm].api_key" in err and "readable by every" in err
    assert "sk-literal-abcdef" not in err


@pytest.mark.parametrize(
    ("server", "key"),
    [
        (
            {"url": "http://h/mcp", "headers": {"Authorization": "Bearer lit-abc", "X": "${HOME}"}},
            "mcpServers.s.headers.Authorization",
        ),
        ({"url": "http://h/mcp", "headers": {"X-Api-Key": "abc12345"}}, "headers.X-Api-Key"),
        ({"type": "openapi", "url": "http://h", "key": "zzzliteral123456"}, "mcpServers.s.key"),
        ({"command": "x", "env": {"DB_PASS": "hunter22", "A": "${HOME}"}}, "env.DB_PASS"),
        ({"command": "x", "args": ["--token=abc123456"]}, "mcpServers.s.args[0]"),
        ({"url": "http://u:pw123456@h/mcp"}, "mcpServers.s.url"),
    ],
)
def test_literal_secret_in_a_world_readable_mcp_file_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: dict[str, Any], key: str
) -> None:
    load_mcp_config(mcp_json(tmp_path, {"s": server}, mode=0o644), ENVIRON)
    err = warning_of(capsys)
    assert "mcp.json holds secrets written out in full" in err and key in err


def test_only_references_means_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = {
        "h": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${T}", "X": "${HOME}"}},
        "o": {"type": "openapi", "url": "http://h", "auth_type": "bearer", "key": "${K}"},
        "s": {"command": "x", "env": {"DB_PASS": "${T}", "MODE": "debug", "PATH": "/bin"}},
    }
    load_mcp_config(mcp_json(tmp_path, servers, mode=0o644), ENVIRON)
    load_toml(toml_file(tmp_path, '[llm]\napi_key = "${MYKEY}"\nmodel = "gpt-x"\n'))
    assert capsys.readouterr().err == ""


def test_literal_secrets_in_a_private_file_are_not_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = {"type": "openapi", "url": "http://h", "key": "zzzliteral123456"}
    load_mcp_config(mcp_json(tmp_path, {"s": server}, mode=0o600), ENVIRON)
    load_toml(toml_file(tmp_path, '[llm]\napi_key = "sk-literal-abcdef"\n', mode=0o600))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "server",
    [
        {"command": "x", "env": {"GITHUB_TOKEN": "MY_TOKEN", "API_KEY": "YOUR_API_KEY"}},
        {"url": "http://h/mcp", "headers": {"Authorization": "Bearer <your-token>"}},
        {"url": "http://h/mcp", "headers": {"X-Api-Key": "your-key-here"}},
        {"command": "x", "args": ["--token=YOUR_TOKEN"], "env": {"DB_PASS": "changeme"}},
        {"type": "openapi", "url": "http://h", "key": "xxxxxxxx"},
    ],
)
def test_a_readme_s_placeholders_are_not_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], server: dict[str, Any]
) -> None:
    load_mcp_config(mcp_json(tmp_path, {"s": server}, mode=0o644), ENVIRON)
    assert capsys.readouterr().err == ""


def test_the_warning_comes_once_per_file_and_content(tmp_path: Path) -> None:
    """Run after run with the same file, one warning; a changed file is warned about again."""
    local = [sys.executable, "-m", "agent.server", "--root", str(tmp_path)]
    env = {"DB_PASS": "hunter22", "GITHUB_TOKEN": "MY_TOKEN"}  # a placeholder: never named
    entry = {"command": local[0], "args": local[1:], "env": env}
    config = mcp_json(tmp_path, {"local": entry}, mode=0o644)

    def warnings() -> str:
        with ScriptedLLM(text("ok")) as llm:
            run = run_cli(
                ["--mcp-config", str(config), "-p", "hi"], tmp_path, base_url=llm.base_url
            )
        assert run.returncode == 0, run.stderr
        return "\n".join(line for line in run.stderr.splitlines() if "warning:" in line)

    first = warnings()
    assert "mcpServers.local.env.DB_PASS" in first and "GITHUB_TOKEN" not in first, first
    assert "said once for this content" in first
    assert warnings() == ""
    config.write_text(config.read_text() + "\n")
    assert "env.DB_PASS" in warnings()
    record = tmp_path / "state" / SECRET_WARNINGS_FILE
    assert record.stat().st_mode & 0o777 == 0o600
