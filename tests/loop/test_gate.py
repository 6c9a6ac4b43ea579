"""The one gate (agent/loop/gate.py): every tool call, whoever starts it, passes the same hooks,
approval, run and record. Through `python run_mcp.py` with the scripted model and real hook
commands; the page's side (an app's call blocked by the same hook) is in
tests/apps/test_apps_browser.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages
from tests.support.servers import SUPPORT

# Logs every PreToolUse event it sees; blocks the agent's own read_result.
RECORDER = """
import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(os.path.dirname(__file__), "seen.jsonl"), "a") as fh:
    fh.write(json.dumps(event) + "\\n")
if event["tool_name"] == "read_result":
    print("reading kept results is off in this project", file=sys.stderr)
    sys.exit(2)
"""


def test_hooks_see_and_may_block_the_agent_s_own_tools(tmp_path: Path) -> None:
    """A `*` PreToolUse hook sees read_result (server "agent") as it sees a server's tool,
    and its exit 2 keeps it from running, the model told why (issue 29, defect 16)."""
    hook = tmp_path / "hooks" / "recorder.py"
    hook.parent.mkdir()
    hook.write_text(RECORDER, encoding="utf-8")
    hooks = tmp_path / "xdg-config" / "mcp-agent" / "hooks.json"
    hooks.parent.mkdir(parents=True)
    entry = {"matcher": "*", "hooks": [{"type": "command", "command": f"{sys.executable} {hook}"}]}
    hooks.write_text(json.dumps({"hooks": {"PreToolUse": [entry]}}), encoding="utf-8")
    config = tmp_path / "config.toml"
    config.write_text("[agent]\nmax_observe = 20000\n")
    server = f"{sys.executable} {SUPPORT / 'big_result_server.py'}"
    args = ["--config", str(config), "--server-command", server, "--server-name", "big"]
    script = [
        tool_calls(("big__lines", {"count": 300})),
        tool_calls(("read_result", {"id": "r1", "offset": 0, "limit": 100})),
        text("Done."),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli([*args, "-p", "dump it", "--yes"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    seen = [json.loads(line) for line in (hook.parent / "seen.jsonl").read_text().splitlines()]
    assert [(e["mcp_server"], e["tool_name"]) for e in seen] == [
        ("big", "big__lines"),
        ("agent", "read_result"),
    ]
    told = tool_messages(llm.requests[2])[-1]
    assert "PreToolUse hook blocked it" in told and "reading kept results is off" in told
    assert "0000000:" not in told  # the kept result was not read
