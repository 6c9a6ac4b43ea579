"""Half a model reply is never an answer, half a tool call never runs, and no reply takes
longer than `request_deadline`.

The real `openai` client against the scripted server (tests/support/fake_llm.py), which cuts its
streams cleanly (no finish_reason, no [DONE]) at a chosen chunk, stops at `length`, or
never ends; then `run_mcp.py -p` as a user runs it, with the bundled server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.common.errors import ModelError
from agent.model.llm import warm_model_imports
from agent.model.model_types import Reply, RetryNotice, ToolCall
from tests.support.cli import run_cli
from tests.support.fake_llm import (
    TOOL,
    ScriptedLLM,
    Turn,
    collect,
    cut,
    forever,
    model_for,
    text,
    tool_calls,
)

ANSWER = "The migration is complete."


def length_cut(*calls: tuple[str, dict[str, Any]]) -> Turn:
    """Tool calls whose reply ended with finish_reason "length" (the output limit)."""
    turn = tool_calls(*calls)
    turn.finish_reason = "length"
    return turn


# --------------------------------------------------------------------------- the model client


@pytest.mark.anyio
async def test_a_stream_cut_mid_text_is_retried_and_its_text_declared_void() -> None:
    with ScriptedLLM(cut(text(ANSWER), after=3), text(ANSWER)) as llm:
        items = await collect(model_for(llm))
    [notice] = [i for i in items if isinstance(i, RetryNotice)]
    assert notice.discarded_text and "ended before the reply was finished" in notice.reason
    assert items[-1] == Reply(ANSWER, (), items[-1].usage, "stop")
    llm.assert_complete()


@pytest.mark.anyio
async def test_a_tool_call_cut_after_its_name_is_retried_not_returned() -> None:
    whole = tool_calls(("t__x", {"path": "a/b.txt"}))
    with ScriptedLLM(cut(tool_calls(("t__x", {"path": "a/b.txt"})), after=1), whole) as llm:
        items = await collect(model_for(llm), [TOOL])
    assert sum(isinstance(i, RetryNotice) for i in items) == 1
    assert items[-1].tool_calls == (ToolCall("call_1", "t__x", '{"path": "a/b.txt"}'),)
    llm.assert_complete()


@pytest.mark.anyio
async def test_a_stream_that_keeps_ending_early_is_an_error_after_the_retries() -> None:
    script = (cut(text(ANSWER), after=2), cut(text(ANSWER), after=2))
    gave_up = "after 2 attempts: the reply stream ended before"
    with ScriptedLLM(*script) as llm, pytest.raises(ModelError, match=gave_up):
        await collect(model_for(llm, max_retries=1))
    llm.assert_complete()


@pytest.mark.anyio
@pytest.mark.parametrize("content", ["la ", ""], ids=["text-forever", "keep-alive-forever"])
async def test_a_stream_that_never_ends_is_cut_at_the_deadline(content: str) -> None:
    warm_model_imports()  # the client's first import would eat this short deadline
    cut_off = r"did not finish within 2 s \(request_deadline"
    with ScriptedLLM(forever(content)) as llm, pytest.raises(ModelError, match=cut_off):
        await collect(model_for(llm, request_deadline=2))
    llm.assert_complete()


# --------------------------------------------------------------------------- end to end


def run_p(llm: ScriptedLLM, tmp_path: Path, *args: str) -> Any:
    return run_cli(["-p", "migrate", "--yes", *args], tmp_path, base_url=llm.base_url)


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_reply_cut_on_every_attempt_exits_1_without_an_answer(
    tmp_path: Path, output: str
) -> None:
    with ScriptedLLM(*(cut(text(ANSWER), after=3) for _ in range(4))) as llm:
        proc = run_p(llm, tmp_path, "--output", output)
    assert proc.returncode == 1, proc.stderr
    assert "The migration" not in proc.stdout
    assert "ended before the reply was finished" in proc.stderr
    if output == "json":
        report = json.loads(proc.stdout)
        assert report["status"] == "error" and report["answer"] is None
        assert "ended before the reply was finished" in report["error"]
    else:
        assert proc.stdout == ""
    llm.assert_complete()


def test_a_call_cut_after_its_name_runs_once_with_its_whole_arguments(tmp_path: Path) -> None:
    call = ("local__bash", {"command": "echo ran >> runs.txt"})
    script = [cut(tool_calls(call), after=1), tool_calls(call), text(ANSWER)]
    with ScriptedLLM(*script) as llm:
        proc = run_p(llm, tmp_path, "--output", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["answer"] == ANSWER
    assert [c["arguments"] for c in report["tool_calls"]] == [call[1]]
    assert (tmp_path / "runs.txt").read_text() == "ran\n"
    llm.assert_complete()


def test_calls_of_a_reply_cut_by_the_output_limit_never_run(tmp_path: Path) -> None:
    script = [
        length_cut(("local__bash", {"command": "touch first"}), ("local__bash", {})),
        text(ANSWER),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_p(llm, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ANSWER + "\n"
    assert not (tmp_path / "first").exists()
    told = [m["content"] for m in llm.messages(1) if m["role"] == "tool"]
    assert len(told) == 2 and all("not run" in t and "token limit" in t for t in told)
    llm.assert_complete()


def test_p_returns_when_the_model_streams_forever(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[llm]\nrequest_deadline = 2\n")
    with ScriptedLLM(forever("la ")) as llm:
        proc = run_p(llm, tmp_path, "--config", str(config), "--output", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "error" and report["answer"] is None
    assert "did not finish within 2 s" in report["error"]
