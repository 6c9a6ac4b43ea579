"""${VAR} expands before a server's type is decided, and in every config.toml string."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.common.errors import ConfigError
from agent.config.build import build_settings
from agent.config.servers import load_mcp_config
from tests.support.cli import mcp_json


def toml_settings(tmp_path: Path, text: str, environ: dict[str, str]):
    path = tmp_path / "config.toml"
    path.write_text(text)
    path.chmod(0o600)
    return build_settings(
        config_path=path,
        mcp_config_path=None,
        cli_server=None,
        environ=environ,
        workspace=tmp_path,
    )


def test_url_from_a_variable_decides_the_type_after_expansion(tmp_path: Path) -> None:
    path = mcp_json(tmp_path, {"s": {"url": "${SSE_URL}"}, "h": {"url": "${H_URL}"}}, mode=0o600)
    environ = {"SSE_URL": "http://host/sse", "H_URL": "http://host/mcp"}
    by = {s.name: s for s in load_mcp_config(path, environ)}
    assert (by["s"].type, by["s"].url) == ("sse", "http://host/sse")
    assert by["h"].type == "http"


@pytest.mark.parametrize(
    ("environ", "expected"), [({}, "http"), ({"T_TYPE": "sse"}, "sse"), ({"T_TYPE": ""}, "http")]
)
def test_type_from_a_variable_with_a_default(
    tmp_path: Path, environ: dict[str, str], expected: str
) -> None:
    path = mcp_json(tmp_path, {"s": {"type": "${T_TYPE:-http}", "url": "http://h/x"}}, mode=0o600)
    assert load_mcp_config(path, environ)[0].type == expected


def test_unset_type_variable_is_an_error_naming_file_and_key(tmp_path: Path) -> None:
    path = mcp_json(tmp_path, {"s": {"type": "${T_TYPE}", "url": "http://h/x"}}, mode=0o600)
    with pytest.raises(ConfigError) as info:
        load_mcp_config(path, {})
    assert str(info.value).startswith(f"{path}: mcpServers.s.type: environment variable T_TYPE")


def test_type_variable_that_expands_to_nonsense_is_an_unknown_type(tmp_path: Path) -> None:
    path = mcp_json(tmp_path, {"s": {"type": "${T_TYPE}", "url": "http://h/x"}}, mode=0o600)
    with pytest.raises(ConfigError, match=r"mcpServers\.s\.type: unknown server type 'pigeon'"):
        load_mcp_config(path, {"T_TYPE": "pigeon"})


def test_disabled_server_with_an_unset_type_variable_is_no_error(tmp_path: Path) -> None:
    path = mcp_json(
        tmp_path, {"s": {"type": "${T_TYPE}", "url": "${U}", "disabled": True}}, mode=0o600
    )
    (server,) = load_mcp_config(path, {})
    assert server.enabled is False


def test_toml_strings_expand_variables_and_defaults(tmp_path: Path) -> None:
    toml = (
        '[llm]\napi_key = "${MYKEY}"\nmodel = "${MODEL:-m-default}"\n'
        'base_url = "http://${HOST:-localhost}:8080/v1"\n'
        '[agent]\nsystem_prompt = "You help ${WHO:-everyone}."\n'
    )
    s = toml_settings(tmp_path, toml, {"MYKEY": "sk-from-env-123", "WHO": "Ada"})
    assert s.llm.api_key == "sk-from-env-123" and s.llm.model == "m-default"
    assert s.llm.base_url == "http://localhost:8080/v1"
    assert s.agent.system_prompt == "You help Ada."


def test_toml_unset_variable_is_an_error_naming_file_and_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        toml_settings(tmp_path, '[llm]\napi_key = "${MYKEY}"\n', {})
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'config.toml'}: [llm].api_key: ")
    assert "environment variable MYKEY is not set" in message


def test_toml_value_overridden_by_the_environment_need_not_resolve(tmp_path: Path) -> None:
    s = toml_settings(tmp_path, '[llm]\napi_key = "${MYKEY}"\n', {"OPENAI_API_KEY": "sk-env-9"})
    assert s.llm.api_key == "sk-env-9"


def test_toml_expanded_value_is_still_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[ui\]\.approval"):
        toml_settings(tmp_path, '[ui]\napproval = "${MODE:-sometimes}"\n', {})
