"""`run_mcp.py serve`'s `ask` as a task (the 2026-07-28 tasks extension), through the real
path: our own agent (`run_mcp.py -p`) as the client, with `run_mcp.py serve` a stdio server
of the modern era in its `--mcp-config`, a scripted model on each side. What counts is what
the outer run recorded of the call (its task), what each model received, and what the
inner run's tools did."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support import tasks_server
from tests.support.cli import RUN_MCP, cli_env, mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, delayed, text, tool_calls

SECRET = "sk-e2e-secret"
INNER_KEYS = ("MCP_AGENT_STATE_DIR", "XDG_CONFIG_HOME", "OPENAI_BASE_URL", "OPENAI_API_KEY")
ASK = ("inner__ask", {"prompt": "inner question"})


def _outer_args(tmp_path: Path, inner: ScriptedLLM, *serve_args: str) -> list[str]:
    """An outer servers file naming `run_mcp.py serve` (working in tmp_path/inner, with the
    inner model) as the modern-era stdio server `inner`."""
    inner_dir = tmp_path / "inner"
    inner_dir.mkdir()
    env = cli_env(inner_dir, inner.base_url, SECRET)
    entry = {
        "command": sys.executable,
        "args": [RUN_MCP, "serve", *serve_args],
        "env": {key: env[key] for key in INNER_KEYS} | {"NO_COLOR": "1"},
        "cwd": str(inner_dir),
        "mode": "2026-07-28",
    }
    outer_dir = tmp_path / "outer"
    outer_dir.mkdir()
    return ["--mcp-config", str(mcp_json(outer_dir, {"inner": entry}))]


def _run_outer(
    tmp_path: Path, args: list[str], outer: ScriptedLLM
) -> tuple[dict[str, Any], str, str]:
    """The outer single-shot run: (its JSON output, its stderr, the tool text its model got)."""
    proc = run_cli(
        [*args, "-p", "go", "--yes", "--output", "json"],
        tmp_path / "outer",
        base_url=outer.base_url,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (told,) = [m["content"] for m in outer.requests[-1]["messages"] if m["role"] == "tool"]
    return json.loads(proc.stdout), proc.stderr, told


def test_an_agent_calling_ask_gets_the_inner_answer_through_a_task(tmp_path: Path) -> None:
    with (
        ScriptedLLM(delayed(1.0, text("the inner answer"))) as inner,
        ScriptedLLM(tool_calls(ASK), text("done")) as outer,
    ):
        result, stderr, told = _run_outer(tmp_path, _outer_args(tmp_path, inner), outer)
        inner.assert_complete()
        outer.assert_complete()
    assert inner.requests[0]["messages"][-1] == {"role": "user", "content": "inner question"}
    (call,) = result["tool_calls"]
    assert call["task"]["status"] == "completed" and not call["is_error"]
    assert len(call["task"]["id"]) == 32
    structured = call["structured_content"]
    assert structured["answer"] == "the inner answer" and structured["status"] == "answered"
    assert set(structured) == {"answer", "status", "session_id", "tool_calls", "usage"}
    assert "the inner answer" in told
    assert "step 1 of at most" in stderr  # the task's status message, as the outer polled it


def test_a_declined_approval_in_a_task_does_not_run_the_tool(tmp_path: Path) -> None:
    """The inner call needs approval: the task goes input_required carrying the question;
    the outer run (-p: nobody to ask) declines it through tasks/update; nothing is written."""
    write = tool_calls(("local__write_file", {"path": "x.txt", "content": "y"}))
    with (
        ScriptedLLM(write, text("not written")) as inner,
        ScriptedLLM(tool_calls(ASK), text("done")) as outer,
    ):
        result, stderr, told = _run_outer(tmp_path, _outer_args(tmp_path, inner), outer)
        inner.assert_complete()
        outer.assert_complete()
    assert not (tmp_path / "inner" / "x.txt").exists()
    assert "declined to run 'write_file'" in inner.requests[1]["messages"][-1]["content"]
    assert "input required: step 1 of at most" in stderr
    assert "waiting for approval of write_file" in stderr
    (call,) = result["tool_calls"]
    assert call["task"]["status"] == "completed"
    inner_call = call["structured_content"]["tool_calls"][0]
    assert inner_call["tool"] == "write_file" and inner_call["is_error"]
    assert call["structured_content"]["status"] == "refused"  # as the plain call says it
    assert "every tool call of this run was refused" in told


def test_cancelling_the_task_stops_the_inner_run_and_its_tool_calls(tmp_path: Path) -> None:
    """The outer run's task_timeout ends the task: tasks/cancel stops the inner turn, whose
    own call (a task on the test tasks server) is cancelled on that server in turn."""
    state = tmp_path / "tasks-state"
    tasks_entry = {
        "command": sys.executable,
        "args": [str(Path(tasks_server.__file__))],
        "env": {"TASKS_SERVER_STATE": str(state)},
    }
    inner_servers = mcp_json(tmp_path, {"tasks": tasks_entry})
    config = tmp_path / "config.toml"
    config.write_text("[agent]\ntask_timeout = 6.0\n")
    count = tool_calls(("tasks__count_slowly", {"n": 1000}))
    with ScriptedLLM(count) as inner, ScriptedLLM(tool_calls(ASK), text("gave up")) as outer:
        serve_args = ("--yes", "--mcp-config", str(inner_servers))
        args = [*_outer_args(tmp_path, inner, *serve_args), "--config", str(config)]
        result, _, told = _run_outer(tmp_path, args, outer)
        inner.assert_complete()  # the inner model was not asked again
        outer.assert_complete()
    assert "ran longer than task_timeout (6 s); cancelled on the server" in told
    (call,) = result["tool_calls"]
    assert call["task"]["status"] == "cancelled" and call["is_error"]
    runs = (state / "runs").read_text().split()
    assert len(runs) == 1 and (state / "cancelled").read_text().split() == runs
