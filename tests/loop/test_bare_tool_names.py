"""A call to a tool's own name (issue 32, item 4), through `python run_mcp.py -p` with the
scripted model: `get_current_time` (or Claude Code's `mcp__local__get_current_time`) where
`local__get_current_time` is offered runs that tool; with two servers offering a tool of
that name, nothing runs and the model is told both full names."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.config.build import BUNDLED_MAIN
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages


@pytest.mark.parametrize("written", ["get_current_time", "mcp__local__get_current_time"])
def test_a_tool_s_own_name_runs_the_one_offered_tool_of_that_name(
    tmp_path: Path, written: str
) -> None:
    script = [tool_calls((written, {"timezone": "Asia/Tokyo"})), text("It is late.")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "time?", "--output", "json"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    call = json.loads(proc.stdout)["tool_calls"][0]
    assert call["name"] == "local__get_current_time" and call["is_error"] is False
    assert "Asia/Tokyo" in tool_messages(llm.requests[1])[0]
    # The model's call is kept under the full name, so it learns the name to use.
    sent = [m for m in llm.requests[1]["messages"] if m.get("tool_calls")]
    assert sent[0]["tool_calls"][0]["function"]["name"] == "local__get_current_time"


def test_a_name_two_servers_share_runs_nothing_and_names_the_candidates(tmp_path: Path) -> None:
    server = {"command": sys.executable, "args": ["-P", str(BUNDLED_MAIN), "--root", str(tmp_path)]}
    config = mcp_json(tmp_path, {"east": server, "west": server})
    script = [tool_calls(("get_current_time", {})), text("Which one?")]
    with ScriptedLLM(*script) as llm:
        args = ["--mcp-config", str(config), "-p", "time?", "--output", "json"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    told = tool_messages(llm.requests[1])[0]
    assert "east__get_current_time, west__get_current_time" in told
    assert "by its full name" in told
    call = json.loads(proc.stdout)["tool_calls"][0]
    assert call["is_error"] is True and call["server"] is None


def test_an_unknown_name_still_says_so(tmp_path: Path) -> None:
    script = [tool_calls(("no_such_tool", {})), text("ok")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "x", "--output", "json"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert "unknown tool 'no_such_tool'" in tool_messages(llm.requests[1])[0], proc.stderr
