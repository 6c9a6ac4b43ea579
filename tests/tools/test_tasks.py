"""Tool calls that run as tasks, through the CLI as a user runs them.

Both forms: the 2026-07-28 extension `io.modelcontextprotocol/tasks` against our
spec-faithful test server (tests/support/tasks_server.py: the server answers with a task handle),
and the 2025-11-25 form against server-everything's `simulate-research-query` (the tool
requires a task). What counts is what the scripted model receives, what the JSON output
says and what the server saw (its state folder).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.tools.mcp_tasks import send_raw
from tests.support import tasks_server
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import everything_stdio_command
from tests.support.terminal import PROMPT, Terminal, start, terminals, workspace  # noqa: F401

TASKS_SCRIPT = str(Path(tasks_server.__file__))
# CI installs tmux (.ci/run); elsewhere a machine without it skips the REPL tests.
needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None and os.environ.get("CI") != "true", reason="needs tmux"
)


def _tasks_config(tmp_path: Path, **env: str) -> list[str]:
    state = tmp_path / "server-state"
    entry = {
        "command": sys.executable,
        "args": [TASKS_SCRIPT],
        "env": {"TASKS_SERVER_STATE": str(state), **env},
    }
    path = mcp_json(tmp_path, {"tasks": entry})
    return ["--mcp-config", str(path)]


def _run_json(
    tmp_path: Path, args: list[str], *calls: tuple[str, dict[str, Any]]
) -> tuple[dict[str, Any], str, ScriptedLLM]:
    """One single-shot run with --output json: (the JSON, stderr, the scripted model)."""
    with ScriptedLLM(tool_calls(*calls), text("done")) as llm:
        proc = run_cli(
            [*args, "-p", "go", "--yes", "--output", "json"], tmp_path, base_url=llm.base_url
        )
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr, llm


def _tool_texts(llm: ScriptedLLM) -> list[str]:
    return [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_a_call_answered_with_a_task_handle_is_polled_to_its_result(tmp_path: Path) -> None:
    args = _tasks_config(tmp_path)
    result, stderr, llm = _run_json(tmp_path, args, ("tasks__count_slowly", {"n": 3}))
    (answer,) = _tool_texts(llm)
    assert "counted to 3" in answer
    (call,) = result["tool_calls"]
    assert call["task"]["status"] == "completed" and not call["is_error"]
    assert _lines(tmp_path / "server-state" / "runs") == [call["task"]["id"]]
    assert "stage 1 of 3" in stderr and f"task {call['task']['id'][:12]} completed" in stderr


def test_a_server_restarted_mid_task_is_polled_again_and_the_work_runs_once(
    tmp_path: Path,
) -> None:
    """The server exits on its second poll; the agent restarts it and polls the same task
    id to its end: the counter file shows one start of the work, not two."""
    args = _tasks_config(tmp_path, TASKS_EXIT_AFTER_POLLS="2")
    result, stderr, llm = _run_json(tmp_path, args, ("tasks__count_slowly", {"n": 4}))
    assert "counted to 4" in _tool_texts(llm)[0]
    (call,) = result["tool_calls"]
    assert (tmp_path / "server-state" / "crashed").exists()  # it did die mid-task
    assert stderr.count("connection lost") == 1  # said once, not at every failed poll
    assert _lines(tmp_path / "server-state" / "runs") == [call["task"]["id"]]
    assert call["task"]["status"] == "completed"


def test_a_task_that_needs_input_is_answered_through_tasks_update(tmp_path: Path) -> None:
    """Without a person (-p) the elicitation in `inputRequests` is declined, and that
    answer reaches the server (it completes only after a tasks/update)."""
    args = _tasks_config(tmp_path)
    result, stderr, llm = _run_json(tmp_path, args, ("tasks__confirm", {"action": "deploy"}))
    assert "not confirmed: deploy" in _tool_texts(llm)[0]
    assert result["tool_calls"][0]["task"]["status"] == "completed"
    assert "input required: waiting for a confirmation" in stderr


def test_a_server_that_answers_directly_needs_no_task(tmp_path: Path) -> None:
    args = _tasks_config(tmp_path)
    result, _, llm = _run_json(tmp_path, args, ("tasks__quick", {"text": "hi"}))
    assert "quick hi" in _tool_texts(llm)[0]
    assert "task" not in result["tool_calls"][0]


def test_tool_timeout_bounds_each_wait_and_task_timeout_the_whole_task(tmp_path: Path) -> None:
    """A 1 s tool_timeout does not stop a 2.4 s task that keeps answering its polls; a 1 s
    task_timeout stops a longer one, cancelled on the server."""
    config = tmp_path / "config.toml"
    config.write_text("[agent]\ntool_timeout = 1.0\ntask_timeout = 4.0\n")
    args = [*_tasks_config(tmp_path), "--config", str(config)]
    calls = (("tasks__count_slowly", {"n": 8}), ("tasks__count_slowly", {"n": 60}))
    result, _, llm = _run_json(tmp_path, args, *calls)
    short, long = _tool_texts(llm)
    assert "counted to 8" in short
    assert "ran longer than task_timeout (4 s); cancelled on the server" in long
    done, stopped = result["tool_calls"]
    assert done["task"]["status"] == "completed"
    assert stopped["task"]["status"] == "cancelled" and stopped["is_error"]
    assert _lines(tmp_path / "server-state" / "cancelled") == [stopped["task"]["id"]]


@pytest.fixture
def everything_args() -> list[str]:
    command, args = everything_stdio_command()
    return ["--server-command", " ".join([command, *args])]


def test_simulate_research_query_runs_as_a_2025_11_25_task(
    tmp_path: Path, everything_args: list[str]
) -> None:
    """The tool requires task augmentation: it is called as a task, its stages are shown
    on stderr, and the model gets the final report (via tasks/result)."""
    query = ("main__simulate-research-query", {"topic": "tides"})
    result, stderr, llm = _run_json(tmp_path, everything_args, query)
    assert _tool_texts(llm)[0].count("# Research Report: tides") == 1
    # Its stages last 1 s each and it suggests 1 s polls, so a poll on a busy machine can land
    # past a stage: the first (in the task's first snapshot) and one later one are certain.
    later = ("Analyzing content", "Synthesizing findings", "Generating report")
    assert "Gathering sources" in stderr and any(stage in stderr for stage in later)
    (call,) = result["tool_calls"]
    assert call["task"]["status"] == "completed" and not call["is_error"]


def test_tasks_lists_a_finished_task_with_the_servers_own_last_word(
    tmp_path: Path, everything_args: list[str]
) -> None:
    """/tasks after a research task: ours, completed, with the last stage that only the
    server's `tasks/list` still knows (the final result carries no status message)."""
    script = [tool_calls(("main__simulate-research-query", {"topic": "tides"})), text("ok")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            [*everything_args, "-i", "--yes"],
            tmp_path,
            base_url=llm.base_url,
            stdin="research tides\n/tasks\n",
        )
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    listing = proc.stdout[proc.stdout.index("simulate-research-query") :]
    assert listing.split()[2] == "completed"  # stacked: tool · status · time, message below
    assert "Generating report" in listing


@needs_tmux
def test_ctrl_c_during_a_research_task_cancels_it_on_the_server(
    workspace: Path,  # noqa: F811
    terminals: list[Terminal],  # noqa: F811
    everything_args: list[str],
) -> None:
    """The REPL shows the task's stage live; Ctrl-C ends the turn and sends tasks/cancel;
    /tasks shows the server's own word that the task was cancelled."""
    script = [tool_calls(("main__simulate-research-query", {"topic": "tides"})), text("later")]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, "research", *everything_args, "--yes")
        mark = term.mark()
        term.type("research tides")
        term.wait_for(r"task working: (Gathering sources|Analyzing content)", after=mark)
        term.send("C-c")
        term.wait_for(r"cancelled" + PROMPT, after=mark, timeout=20)
        term.type("/tasks")
        term.wait_for(r"cancelled\s+[\d.]+ s\s+Client cancelled task execution", after=mark)
        term.leave()


@needs_tmux
def test_the_ambiguous_research_query_asks_its_question_in_the_repl(
    workspace: Path,  # noqa: F811
    terminals: list[Terminal],  # noqa: F811
    everything_args: list[str],
) -> None:
    query = {"topic": "python", "ambiguous": True}
    script = [tool_calls(("main__simulate-research-query", query)), text("researched")]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, "ambiguous", *everything_args, "--yes")
        mark = term.mark()
        term.type("research python")
        term.wait_for(r"could have multiple interpretations", after=mark)
        term.type("y")
        term.wait_for(r"Clarification", after=mark)
        term.type("Python snake species")
        term.wait_for(r"researched\s*" + PROMPT, after=mark, timeout=30)
        llm.assert_complete()
        term.leave()
    answer = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "# Research Report: python (snake)" in answer


def test_send_raw_still_reaches_the_sdk_it_was_written_for() -> None:
    """send_raw uses the session's private `_stamp` and `_dispatcher` (the task methods are
    not in the SDK's tables): this fails first when an SDK upgrade moves them."""
    from mcp.client.session import ClientSession

    assert "_stamp" in ClientSession.__init__.__code__.co_names
    assert "_dispatcher" in ClientSession.__init__.__code__.co_names
    assert callable(send_raw)
