"""`run_mcp.py serve` as docs/programs.md tells a user to set it up: its servers-file entry
taken from the docs as written and run by another `run_mcp.py` (the scripted model as both
the outer and the inner agent's), what serve says when that entry passes it no model key,
`--http`'s one line saying where it listens (and a busy port's), and the server name
`agent`, which the agent's own tools hold."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from tests.support.cli import RUN_MCP, mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls

SECRET = "sk-e2e-secret"
DEAD_MODEL = "http://127.0.0.1:9/v1"  # never asked: these runs end before a request


def test_a_server_named_agent_is_one_config_error_at_every_door(tmp_path: Path) -> None:
    """A server called `agent` would pass for the agent's own tools: its refused calls
    went uncounted (a run of nothing but refusals exited 0, not 4) and hooks matched its
    tools as the agent's own. The name is refused in a file, on the command line and by
    `mcp add`, with one line, before anything runs."""
    entry = {"command": sys.executable, "args": ["-m", "agent.server"]}
    config = mcp_json(tmp_path, {"agent": entry})
    doors = {
        "file": ["-p", "write x.txt", "--mcp-config", str(config)],
        "flag": ["-p", "hi", "--server-command", "true", "--server-name", "agent"],
        "mcp add": ["mcp", "add", "agent", "--", "python", "-m", "x"],
    }
    with ScriptedLLM() as llm:
        for door, args in doors.items():
            proc = run_cli(args, tmp_path, base_url=llm.base_url, api_key=SECRET, timeout=60)
            assert proc.returncode == 2, (door, proc.stderr)
            said = proc.stderr.strip()
            assert "\n" not in said, (door, said)
            assert "'agent' is the name of the agent's own tools" in said, (door, said)
            assert "give this server another name" in said
        llm.assert_complete()  # nothing ran: the model was never asked
    assert not (tmp_path / "xdg-config" / "mcp-agent" / "mcp.json").exists()
