"""One server whose entry names an unset `${VAR}` stops nothing else (issue 41 #5).

The user's own `mcp.json` (under the test's XDG_CONFIG_HOME) has a server that works and
one that needs a variable the environment lacks: the run, `--servers` and `mcp list` go
on with the rest, and the one skipped is said once, naming the server and the variable,
only when the run wanted it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages
from tests.support.servers import REPO_ROOT

ENV_SERVER = str(REPO_ROOT / "tests" / "support" / "env_server.py")
UNSET = "MCP_AGENT_TEST_UNSET_TOKEN_41"  # set by nobody


def env_server(**env: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [ENV_SERVER], "env": env}


def user_servers(workdir: Path, servers: dict[str, Any]) -> None:
    """The user-level mcp.json that tests/support/cli.py's XDG_CONFIG_HOME points at."""
    folder = workdir / "xdg-config" / "mcp-agent"
    folder.mkdir(parents=True)
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (folder / "mcp.json").chmod(0o600)


def configured(workdir: Path, **more: Any) -> None:
    user_servers(
        workdir,
        {
            "good": env_server(MARK="good"),
            "needs": env_server(TOKEN=f"${{{UNSET}}}"),
            "off": {**env_server(TOKEN=f"${{{UNSET}}}"), "disabled": True},
            **more,
        },
    )


def offered(llm: ScriptedLLM) -> set[str]:
    return {t["function"]["name"] for t in llm.requests[0]["tools"]}


def test_the_other_servers_run_and_the_skipped_one_is_said_once(tmp_path: Path) -> None:
    configured(tmp_path)
    with ScriptedLLM(tool_calls(("good__environment", {})), text("done")) as llm:
        proc = run_cli(["-p", "env?", "-y"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert '"MARK": "good"' in tool_messages(llm.requests[1])[0]
    assert "good__environment" in offered(llm)
    assert not any(name.startswith(("needs__", "off__")) for name in offered(llm))
    said = [line for line in proc.stderr.splitlines() if UNSET in line]
    assert len(said) == 1, proc.stderr
    assert said[0].startswith("warning: server 'needs' skipped: ")
    assert f"mcpServers.needs.env.TOKEN: environment variable {UNSET} is not set" in said[0]


def test_servers_leaving_it_out_say_nothing_of_it(tmp_path: Path) -> None:
    configured(tmp_path)
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli(["--servers", "good", "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert UNSET not in proc.stderr and "needs" not in proc.stderr
    assert "good__environment" in offered(llm)


def test_servers_naming_only_it_is_the_error_that_names_the_variable(tmp_path: Path) -> None:
    """Nothing else to run: the run does not go on with a server it was not asked for."""
    configured(tmp_path)
    with ScriptedLLM() as llm:
        proc = run_cli(["--servers", "needs", "-p", "hi"], tmp_path, base_url=llm.base_url)
        assert llm.requests == []
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith("error: ") and f"{UNSET} is not set" in line


def test_a_required_server_with_an_unset_variable_stops_the_run(tmp_path: Path) -> None:
    configured(tmp_path, needs={**env_server(TOKEN=f"${{{UNSET}}}"), "required": True})
    with ScriptedLLM() as llm:
        proc = run_cli(["-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 2
    assert "mcpServers.needs.env.TOKEN" in proc.stderr and f"{UNSET} is not set" in proc.stderr


def test_mcp_list_shows_it_failed_with_the_reason_and_lists_the_others(tmp_path: Path) -> None:
    configured(tmp_path)
    proc = run_cli(["mcp", "list"], tmp_path, base_url=None)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("good: ") and "✓ connected" in line for line in lines), lines
    [failed] = [line for line in lines if line.startswith("needs: ")]
    assert failed.startswith("needs: ✗ failed: ") and f"{UNSET} is not set" in failed
    assert UNSET not in proc.stderr  # said once, in its line
