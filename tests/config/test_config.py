"""Settings precedence, mcpServers parsing, ${VAR} expansion and the stdio environment."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.common.errors import ConfigError
from agent.config.build import BUNDLED_SERVER_NAME, build_settings
from agent.config.server_env import server_env
from agent.config.servers import expand_vars, load_mcp_config
from tests.support.servers import REPO_ROOT


def write_json(tmp_path: Path, doc: Any) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def build(
    tmp_path: Path,
    *,
    toml: str | None = None,
    mcp: Any = None,
    env: dict[str, str] | None = None,
    flags: dict[str, Any] | None = None,
):
    config = None
    if toml is not None:
        config = tmp_path / "config.toml"
        config.write_text(toml)
    mcp_path = write_json(tmp_path, mcp) if mcp is not None else None
    return build_settings(
        config_path=config,
        mcp_config_path=mcp_path,
        cli_server=None,
        environ=env or {},
        flags=flags,
        workspace=tmp_path,
    )


def test_precedence_defaults_file_env_flags(tmp_path: Path) -> None:
    toml = '[llm]\nmodel = "from-file"\nbase_url = "http://file/v1"\n[agent]\nmax_steps = 7\n'
    s = build(tmp_path, toml=toml)
    assert (s.llm.model, s.agent.max_steps, s.llm.base_url) == ("from-file", 7, "http://file/v1")
    s = build(tmp_path, toml=toml, env={"OPENAI_MODEL": "from-env"})
    assert s.llm.model == "from-env" and s.llm.base_url == "http://file/v1"
    s = build(
        tmp_path,
        toml=toml,
        env={"OPENAI_MODEL": "from-env"},
        flags={"llm": {"model": "from-flag", "base_url": None}},
    )
    assert s.llm.model == "from-flag" and s.llm.base_url == "http://file/v1"


def test_no_servers_means_the_bundled_server(tmp_path: Path) -> None:
    s = build(tmp_path)
    assert [srv.name for srv in s.servers] == [BUNDLED_SERVER_NAME]
    assert s.servers[0].args[:2] == ("-P", str(REPO_ROOT / "agent" / "server" / "__main__.py"))
    off = {"mcpServers": {"a": {"command": "x", "enabled": False}}}
    assert [srv.name for srv in build(tmp_path, mcp=off).servers] == [BUNDLED_SERVER_NAME]


def test_read_only_approval_can_be_configured(tmp_path: Path) -> None:
    assert build(tmp_path, toml='[ui]\napproval = "read-only"\n').ui.approval == "read-only"


def test_claude_desktop_format_with_types_inferred(tmp_path: Path) -> None:
    doc = {
        "mcpServers": {
            "files": {
                "command": "python",
                "args": ["-m", "x"],
                "env": {"A": "${A:-1}"},
                "cwd": ".",
            },
            "remote": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "legacy": {"url": "http://127.0.0.1:8000/sse"},
            "api": {"type": "openapi", "url": "http://127.0.0.1:8811", "key": "${K:-}"},
            "off": {"command": "x", "enabled": False, "env": {"S": "${UNSET_VAR}"}},
        }
    }
    s = build(tmp_path, mcp=doc, env={"TOKEN": "t0k"})
    by = {srv.name: srv for srv in s.servers}
    assert set(by) == {"files", "remote", "legacy", "api"}
    assert by["files"].type == "stdio" and by["files"].env == {"A": "1"}
    assert by["remote"].type == "http" and by["remote"].headers["Authorization"] == "Bearer t0k"
    assert by["legacy"].type == "sse" and by["api"].type == "openapi"


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ("{not json", "invalid JSON at line 1"),
        ({"mcpServers": []}, "'mcpServers' object"),
        ({"mcpServers": {"a": {"type": "carrier-pigeon", "url": "x"}}}, "mcpServers.a.type"),
        ({"mcpServers": {"a": {"args": []}}}, "mcpServers.a: needs either 'command'"),
        ({"mcpServers": {"a": {"command": "x", "timeout": "soon"}}}, "mcpServers.a.timeout"),
        ({"mcpServers": {"a": {"command": "x", "env": {"K": "${MISSING}"}}}}, "MISSING is not set"),
        ({"mcpServers": {"a": "python"}}, "mcpServers.a: must be an object"),
        ({"mcp_servers": {"a": {"command": "x"}}}, "no 'mcpServers' object (found 'mcp_servers')"),
        ({"servers": {"a": {"command": "x", "timeout": "soon"}}}, "servers.a.timeout"),
    ],
)
def test_bad_files_name_the_file_and_key(tmp_path: Path, doc: Any, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_mcp_config(write_json(tmp_path, doc), {})
    assert fragment in str(info.value) and "mcp.json" in str(info.value)


def test_vs_code_servers_key_is_read_like_mcp_servers(tmp_path: Path) -> None:
    doc = {"servers": {"t": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"]}}}
    [server] = load_mcp_config(write_json(tmp_path, doc), {})
    assert (server.name, server.type, server.command) == ("t", "stdio", "uvx")


def test_bad_toml_names_section_and_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\[agent\]\.max_steps"):
        build(tmp_path, toml="[agent]\nmax_steps = 0\n")
    with pytest.raises(ConfigError, match="unknown section"):
        build(tmp_path, toml="[lmm]\nmodel='x'\n")
    with pytest.raises(ConfigError, match=r"\[llm\]\.modle"):
        build(tmp_path, toml="[llm]\nmodle='x'\n")


def test_stdio_env_keeps_path_and_drops_secrets() -> None:
    parent = {
        "PATH": "/bin",
        "HOME": "/h",
        "LC_ALL": "C",
        "OPENAI_API_KEY": "sk-secret",
        "AWS_SECRET_ACCESS_KEY": "x",
    }
    env = server_env({"OWN": "1"}, parent)
    assert env == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "OWN": "1"}
    assert server_env({"OPENAI_API_KEY": "given"}, parent)["OPENAI_API_KEY"] == "given"


def test_expansion_defaults_and_nesting() -> None:
    env = {"A": "a", "EMPTY": ""}
    value = {"x": ["${A}", "${B:-b}", "${EMPTY:-d}", "pre-${A}-post"], "n": 3}
    assert expand_vars(value, env, "w") == {"x": ["a", "b", "d", "pre-a-post"], "n": 3}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_config_loader_fuzz_errors_never_crashes(
    tmp_path_factory: pytest.TempPathFactory, doc: Any
) -> None:
    path = write_json(tmp_path_factory.mktemp("fuzz"), {"mcpServers": {"s": doc}})
    try:
        load_mcp_config(path, {})
    except ConfigError as exc:
        assert "mcpServers.s" in str(exc)


def test_the_shipped_examples_load_and_the_local_server_runs_from_the_checkout(
    tmp_path: Path,
) -> None:
    """config/*.example.* are what users copy: they must parse, and the enabled one work."""
    config_dir = REPO_ROOT / "config"
    settings = build_settings(
        config_path=config_dir / "config.example.toml",
        mcp_config_path=config_dir / "mcp.example.json",
        cli_server=None,
        environ={},
    )
    enabled = [s for s in settings.servers if s.enabled]
    assert [s.name for s in enabled] == ["local"]
    local = enabled[0]
    assert local.env == {"LOG_LEVEL": "warning"}  # ${LOG_LEVEL:-warning}
    checkout = config_dir.parent
    assert (checkout / str(local.command)).is_file()  # .venv/bin/python, as set up by the README
    # -P: run from another folder holding an `agent` package, it still imports the checkout's
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "__init__.py").write_text("")
    probe = [
        str(checkout / str(local.command)),
        local.args[0],
        "-c",
        "import agent; print(agent.__file__)",
    ]
    found = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert found.stdout.strip() == str(checkout / "agent" / "__init__.py"), found.stderr


def test_roots_are_none_unless_configured_per_server_or_by_default(tmp_path: Path) -> None:
    servers = {
        "plain": {"command": "x"},
        "listed": {"command": "x", "roots": ["~/photos", "sub"]},
        "off": {"command": "x", "roots": False},
    }
    got = {s.name: s for s in build(tmp_path, mcp={"mcpServers": servers}).servers}
    assert got["plain"].offered_roots() == () and got["off"].offered_roots() == ()
    listed = got["listed"].offered_roots()
    assert listed == (Path("~/photos").expanduser().resolve(), (tmp_path / "sub").resolve())
    toml = '[agent]\nroots = ["."]\n'
    got = {s.name: s for s in build(tmp_path, toml=toml, mcp={"mcpServers": servers}).servers}
    assert got["plain"].offered_roots() == (tmp_path.resolve(),)  # the default applies
    assert got["off"].offered_roots() == ()  # false wins over the default
    with pytest.raises(ConfigError, match="roots"):
        build(tmp_path, mcp={"mcpServers": {"bad": {"command": "x", "roots": "yes"}}})
