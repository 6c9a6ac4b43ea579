"""`--output stream-json` and `--input-format stream-json` as a program runs them: the CLI in
a subprocess, the bundled server, the scripted model; every line held to docs/programs.md."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import typing
from pathlib import Path
from typing import Any

import pytest

from agent.loop import events as loop_events
from agent.loop.events import Usage
from agent.ui.stream_json import FIELDS, event_line
from tests.support.cli import cli_env, run_cli, start_cli
from tests.support.fake_llm import ScriptedLLM, error, forever, text, tool_calls
from tests.support.servers import REPO_ROOT

DOC = REPO_ROOT / "docs" / "programs.md"
SECRET = "sk-e2e-secret"  # run_cli's API key


def documented_fields() -> dict[str, tuple[str, ...]]:
    """Each line type's field table in docs/programs.md, in the order written."""
    found: dict[str, tuple[str, ...]] = {}
    for section in re.split(r"^### ", DOC.read_text(), flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        if heading.startswith("`"):
            kind = heading.strip().strip("`")
            found[kind] = tuple(re.findall(r"^\| `([a-z_]+)` \|", body, flags=re.M))
    return found


def check(line: dict[str, Any]) -> None:
    """One line against the documented schema: its type is documented, and it has exactly
    that type's fields, in the documented order (a sub-agent's line: then its
    `parent_tool_use_id`)."""
    kind = line["type"]
    assert kind in FIELDS, kind
    keys = tuple(line)
    if keys[-1] == "parent_tool_use_id":
        assert kind not in ("init", "result", "error", "control_response"), line
        keys = keys[:-1]
    assert keys == documented_fields()[kind], line


def lines(stdout: str) -> list[dict[str, Any]]:
    parsed = [json.loads(raw) for raw in stdout.splitlines()]
    for line in parsed:
        check(line)
    return parsed


def test_the_documented_schema_is_the_one_written_and_covers_every_event() -> None:
    """Every type the code writes is documented field by field (and nothing more), and
    every event the loop yields becomes a documented line or, by design, none."""
    assert documented_fields() == FIELDS
    overview = DOC.read_text().split("### The lines")[1].split("###")[0]
    assert tuple(re.findall(r"^\| `([a-z_]+)` \|", overview, flags=re.M)) == tuple(FIELDS)
    samples: dict[type, loop_events.Event] = {
        loop_events.RunStarted: loop_events.RunStarted("hi"),
        loop_events.StepStarted: loop_events.StepStarted(1, 20),
        loop_events.TextDelta: loop_events.TextDelta("pi"),
        loop_events.ModelRetry: loop_events.ModelRetry(1, 0.5, "HTTP 500", True),
        loop_events.AssistantMessage: loop_events.AssistantMessage("x", ("a__b",)),
        loop_events.ToolCallStarted: loop_events.ToolCallStarted("c1", "a__b", "a", "b", {}),
        loop_events.ToolProgress: loop_events.ToolProgress("c1", 1, 2, "half"),
        loop_events.TaskUpdate: loop_events.TaskUpdate("c1", "a", "b", "t1", "working", None, 1),
        loop_events.ToolCallFinished: loop_events.ToolCallFinished(
            "c1", "a__b", "a", "b", {}, "out", False, 3.0
        ),
        loop_events.PlanUpdated: loop_events.PlanUpdated(
            "c1", (loop_events.PlanStep("read", "in_progress"),), "first"
        ),
        loop_events.Notice: loop_events.Notice("note"),
        loop_events.RunFinished: loop_events.RunFinished("answered", "ok", 1, Usage()),
        loop_events.SubagentEvent: loop_events.SubagentEvent(
            "c0", "reader", loop_events.ToolCallStarted("c1", "a__b", "a", "b", {})
        ),
    }
    assert set(samples) == set(typing.get_args(loop_events.Event))
    silent = {loop_events.RunStarted, loop_events.StepStarted, loop_events.RunFinished}
    for cls, event in samples.items():
        line = event_line(event)
        assert (line is None) == (cls in silent), cls
        if line is not None:
            check(line)


def test_a_run_streams_every_event_in_order_and_ends_with_the_json_result(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    script = [
        error(500),  # retried: a retry line
        tool_calls(("local__read_file", {"path": "notes.txt"})),
        text(f"It says hello. {SECRET}"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "read notes.txt", "--output", "stream-json"], tmp_path,
                       base_url=llm.base_url)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    got = lines(proc.stdout)
    kinds = [line["type"] for line in got]
    assert kinds[0] == "init" and kinds[-1] == "result" and kinds.count("result") == 1
    assert {"retry", "message", "tool_use", "tool_result"} <= set(kinds)
    assert kinds.index("tool_use") < kinds.index("tool_result")
    init, result = got[0], got[-1]
    assert init["servers"] == [{"name": "local", "state": "ready", "error": None}]
    assert "local__read_file" in init["tools"] and init["approval"] == "ask"
    assert result["session_id"] == init["session_id"]
    use = next(line for line in got if line["type"] == "tool_use")
    done = next(line for line in got if line["type"] == "tool_result")
    assert use["id"] == done["id"] and use["arguments"] == {"path": "notes.txt"}
    assert done["output"] == "hello\n" and done["is_error"] is False
    pieces = [m["text"] for m in got if m["type"] == "message" and m["delta"]]
    whole = [m["text"] for m in got if m["type"] == "message" and not m["delta"]]
    assert "".join(pieces) == whole[-1] == result["answer"]
    # The result line holds every field of --output json.
    with ScriptedLLM(text("x")) as llm:
        single = run_cli(["-p", "x", "--output", "json"], tmp_path, base_url=llm.base_url)
    assert set(json.loads(single.stdout)) <= set(result)
    assert result["status"] == "answered" and result["steps"] == 2
    assert SECRET not in proc.stdout and "It says hello." in result["answer"]


def test_without_yes_a_call_that_may_change_things_is_refused(tmp_path: Path) -> None:
    write = ("local__write_file", {"path": "x.txt", "content": "y"})
    script = [tool_calls(("local__list_dir", {}), write), text("no")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "write", "--output", "stream-json"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    done = next(line for line in lines(proc.stdout) if line.get("tool") == "write_file"
                and line["type"] == "tool_result")  # fmt: skip
    assert done["denied"] is True and "rerun with --yes" in done["output"]
    assert not (tmp_path / "x.txt").exists()


def test_a_usage_error_is_one_result_line(tmp_path: Path) -> None:
    args = ["--output", "stream-json", "--input-format", "stream-json", "-p", "hi"]
    proc = run_cli(args, tmp_path, base_url=None)
    assert proc.returncode == 2
    [line] = lines(proc.stdout)
    assert line["status"] == "error" and line["session_id"] is None
    assert "reads the turns from stdin: drop --prompt" in line["error"]


def user(content: Any) -> str:
    return json.dumps({"type": "user", "message": {"role": "user", "content": content}})


def test_turns_from_stdin_share_one_session_and_bad_lines_are_error_lines(tmp_path: Path) -> None:
    stdin = "\n".join([
        user("first question"),
        "",
        "{not json",
        json.dumps({"type": "telepathy"}),
        user([{"type": "text", "text": "second"}, {"type": "text", "text": "question"}]),
        user([{"type": "image", "source": {}}]),
        user("x" * (9 * 2**20)),  # past the 8 MiB a line may hold
    ]) + "\n"  # fmt: skip
    with ScriptedLLM(text("one"), text("two")) as llm:
        proc = run_cli(["--input-format", "stream-json", "--output", "stream-json"], tmp_path,
                       base_url=llm.base_url, stdin=stdin)  # fmt: skip
        llm.assert_complete()
        second = [m["content"] for m in llm.messages(1) if m["role"] in ("user", "assistant")]
    assert proc.returncode == 0, proc.stderr
    got = lines(proc.stdout)
    results = [line for line in got if line["type"] == "result"]
    assert [r["answer"] for r in results] == ["one", "two"]
    assert len({line["session_id"] for line in [got[0], *results]}) == 1
    assert second == ["first question", "one", "second\nquestion"]  # one conversation
    errors = {line["line"]: line["error"] for line in got if line["type"] == "error"}
    assert set(errors) == {2, 3, 4, 6, 7}
    assert "longer than 8 MiB: skipped" in errors[7]
    assert "blank" in errors[2] and "not JSON" in errors[3] and "'telepathy'" in errors[4]
    assert "only text blocks" in errors[6]


def test_a_deeply_nested_line_is_that_line_s_error_and_the_turns_go_on(tmp_path: Path) -> None:
    nested = '{"type": "user", "message": {"role": "user", "content": "x", "a": %s}}'
    stdin = "\n".join([
        user("first question"),
        "[" * 100_000 + "]" * 100_000,  # the parser itself gives up (RecursionError)
        nested % ("[" * 500 + "]" * 500),  # parsed, but nothing after may recurse through it
        user("second question"),
    ]) + "\n"  # fmt: skip
    with ScriptedLLM(text("one"), text("two")) as llm:
        proc = run_cli(["--input-format", "stream-json", "--output", "stream-json"], tmp_path,
                       base_url=llm.base_url, stdin=stdin)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    got = lines(proc.stdout)
    assert [r["answer"] for r in got if r["type"] == "result"] == ["one", "two"]
    errors = {line["line"]: line["error"] for line in got if line["type"] == "error"}
    assert errors == {n: f"line {n}: JSON nested deeper than 64 levels" for n in (2, 3)}


def read_until(proc: subprocess.Popen[str], kind: str) -> list[dict[str, Any]]:
    assert proc.stdout is not None
    seen = []
    for raw in proc.stdout:
        seen.append(json.loads(raw))
        check(seen[-1])
        if seen[-1]["type"] == kind:
            return seen
    raise AssertionError(f"no {kind} line: {seen}")


def test_a_control_request_interrupts_the_turn_and_the_session_goes_on(tmp_path: Path) -> None:
    with ScriptedLLM(forever("la "), text("still here")) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-e2e")
        args = ["--input-format", "stream-json", "--output", "stream-json"]
        proc = start_cli(args, tmp_path, env, stdin_pipe=True)
        assert proc.stdin is not None
        try:
            proc.stdin.write(user("sing forever") + "\n")
            proc.stdin.flush()
            read_until(proc, "message")  # the endless reply is streaming
            interrupt = {"type": "control_request", "request_id": "r1",
                         "request": {"subtype": "interrupt"}}  # fmt: skip
            proc.stdin.write(json.dumps(interrupt) + "\n")
            proc.stdin.flush()
            seen = read_until(proc, "result")
            proc.stdin.write(user("are you there?") + "\n")
            proc.stdin.close()
            rest = read_until(proc, "result")
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        llm.assert_complete()
    response = next(line for line in seen if line["type"] == "control_response")
    assert response["response"] == {"request_id": "r1", "subtype": "success"}
    assert seen[-1]["status"] == "cancelled"
    assert rest[-1]["status"] == "answered" and rest[-1]["answer"] == "still here"


@pytest.mark.timeout(60)
def test_a_reader_that_closes_the_pipe_ends_the_run_cleanly(tmp_path: Path) -> None:
    with ScriptedLLM(forever("la ")) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-e2e")
        proc = start_cli(["-p", "sing", "--output", "stream-json"], tmp_path, env)
        assert proc.stdout is not None and proc.stderr is not None
        try:
            read_until(proc, "message")
            proc.stdout.close()  # the reader goes away mid-stream
            code = proc.wait(timeout=30)
            stderr = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 141, stderr
    assert "stdout was closed by its reader" in stderr and "Traceback" not in stderr


def test_ctrl_c_ends_the_turn_with_its_cancelled_result_line(tmp_path: Path) -> None:
    with ScriptedLLM(forever("la ")) as llm:
        proc = start_cli(["-p", "sing", "--output", "stream-json"], tmp_path,
                         cli_env(tmp_path, llm.base_url, "sk-e2e"))  # fmt: skip
        try:
            read_until(proc, "message")
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, stderr
    last = json.loads(stdout.splitlines()[-1])
    check(last)
    assert last["type"] == "result" and last["status"] == "cancelled"
