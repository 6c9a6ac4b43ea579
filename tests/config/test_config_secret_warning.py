"""A secret written out in a world-readable config file is warned about, value by value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.config.build import load_toml
from agent.config.servers import load_mcp_config
from tests.support.cli import mcp_json

ENVIRON = {"HOME": "/home/me", "T": "tok-123456", "K": "key-123456", "MYKEY": "sk-abcdef"}


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
