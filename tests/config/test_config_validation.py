"""Config mistakes a user can act on, and small CLI words: did-you-mean for keys and for
trusted tool names, `trust` that is neither true/false nor a list, `--output json` on a
config error, `-p` without a value, `--version`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.common.errors import ConfigError
from agent.config.servers import parse_server
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text
from tests.support.servers import SUPPORT

TWIN_SERVER = str(SUPPORT / "twin_server.py")


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"comand": "x"}, "s.comand: unknown key (did you mean 'command'?)"),
        ({"command": "x", "include_tool": ["a"]}, "did you mean 'include_tools'?"),
        ({"command": "x", "trust": "yes"}, 's.trust: "yes" is a string: write true'),
        ({"command": "x", "trust": "save_note"}, 'a list of its tools, e.g. ["save_note"]'),
        ({"command": "x", "trust": 1}, "s.trust: must be true, false or a list of tool names"),
    ],
)
def test_entry_mistakes_say_what_to_write(entry: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_server("s", entry, {}, "mcp.json: mcpServers.s")
    assert said in caught.value.message


def test_a_misspelt_trusted_tool_is_warned_about_with_the_near_name(tmp_path: Path) -> None:
    server = {"command": sys.executable, "args": [TWIN_SERVER, "t"], "trust": ["delet"]}
    mcp_json(tmp_path, {"twin": server})
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli(
            ["--mcp-config", str(tmp_path / "mcp.json"), "-p", "hi"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    assert (
        "warning: server 'twin': trust names tools it does not have: delet (did you mean delete?)"
        in proc.stderr
    )


def test_output_json_prints_the_error_object_for_a_config_error(tmp_path: Path) -> None:
    mcp_json(tmp_path, {"s": {"comand": "x"}})
    proc = run_cli(
        ["--mcp-config", str(tmp_path / "mcp.json"), "--output", "json", "-p", "hi"],
        tmp_path,
        base_url=None,
    )
    assert proc.returncode == 2
    out = json.loads(proc.stdout)
    assert out["status"] == "error" and out["answer"] is None and out["tool_calls"] == []
    assert "mcpServers.s.comand: unknown key (did you mean 'command'?)" in out["error"]
    assert proc.stderr.count("error:") == 1


def test_p_without_a_value_and_version(tmp_path: Path) -> None:
    proc = run_cli(["-p"], tmp_path, base_url=None)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: -p needs a value (e.g. -p TEXT); see --help"
    version = run_cli(["--version"], tmp_path, base_url=None)
    assert version.returncode == 0 and version.stdout.startswith("run_mcp.py 0.")
