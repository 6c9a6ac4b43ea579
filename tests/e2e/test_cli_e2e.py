"""`python run_mcp.py` as a user runs it: a subprocess, real MCP servers, the scripted model.

Each test starts its own scripted model endpoint and works in its own temp dir (the bundled
server's workspace and the state dir), so the tests run in parallel.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli_env, run_cli, start_cli
from tests.support.fake_llm import ScriptedLLM, error, text, tool_calls, tool_messages
from tests.support.servers import SUPPORT, everything_stdio_command, free_port, time_server_command


@pytest.fixture
def everything_stdio_args() -> list[str]:
    command, args = everything_stdio_command()
    return ["--server-command", " ".join([command, *args])]


def time_server_args() -> list[str]:
    command, args = time_server_command()
    return ["--server-command", " ".join([command, *args]), "--server-name", "time"]


def test_single_shot_over_stdio_prints_only_the_answer(tmp_path: Path) -> None:
    script = [
        tool_calls(("time__get_current_time", {"timezone": "Asia/Tokyo"})),
        text("It is **late** in Tokyo."),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            [*time_server_args(), "-p", "time in Tokyo?"], tmp_path, base_url=llm.base_url
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "It is **late** in Tokyo.\n"  # verbatim: stdout is not a terminal
    assert "time › get_current_time" in proc.stderr
    assert "+09:00" in tool_messages(llm.requests[1])[0]
    names = [t["function"]["name"] for t in llm.requests[0]["tools"]]
    own = ["task", "terminate", "update_plan"]  # the agent's own, in a 128,000-token window
    assert sorted(names) == sorted([*own, "time__convert_time", "time__get_current_time"])
    llm.assert_complete()


def test_output_json_is_valid_and_complete(tmp_path: Path) -> None:
    script = [
        tool_calls(("time__get_current_time", {"timezone": "UTC"}), ("time__nope", {})),
        text("done"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            [*time_server_args(), "-p", "time?", "--output", "json"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    keys = {"answer", "status", "steps", "tool_calls", "usage", "error", "servers", "plan"}
    assert set(result) == keys
    assert result["servers"] == [{"name": "time", "state": "ready", "error": None}]
    assert result["answer"] == "done" and result["status"] == "answered"
    assert result["steps"] == 2 and result["error"] is None
    # The default model's list price: 24 x $0.15 + 14 x $0.60 per million tokens.
    turn = {"prompt_tokens": 24, "completion_tokens": 14, "cached_tokens": 0, "cost_usd": 1.2e-05}
    assert result["usage"] == {**turn, "session": turn}
    good, unknown = result["tool_calls"]
    assert good["server"] == "time" and good["tool"] == "get_current_time"
    assert good["name"] == "time__get_current_time" and good["arguments"] == {"timezone": "UTC"}
    assert good["is_error"] is False and '"timezone": "UTC"' in good["output"]
    assert isinstance(good["duration_ms"], float)
    assert unknown["is_error"] is True and "unknown tool" in unknown["output"]
    assert "sk-e2e-secret" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("transport", ["sse", "http"])
def test_single_shot_over_sse_and_http(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(f"everything_{transport}_url")
    script = [tool_calls(("main__echo", {"message": f"hello over {transport}"})), text("echoed")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            ["-c", transport, "--server-url", url, "-p", "echo it"], tmp_path, base_url=llm.base_url
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "echoed\n"
    assert f"Echo: hello over {transport}" in tool_messages(llm.requests[1])[0]


def test_bundled_server_is_the_default(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the launch code is 4711\n")
    script = [tool_calls(("local__read_file", {"path": "notes.txt"})), text("It is 4711.")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "what is the launch code?"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "It is 4711.\n"
    assert "4711" in tool_messages(llm.requests[1])[0]
    names = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert {"local__bash", "local__read_file", "local__write_file", "local__edit_file"} <= names


def slow_spans(tmp_path: Path, tool: str) -> tuple[list[tuple[float, float]], Any]:
    """Two 1-second calls of `tool` in one reply (support/slow_server.py): (start, end) each."""
    server = f"{sys.executable} {SUPPORT / 'slow_server.py'}"
    # Two calls, not one written twice (a copy in the same reply is not run again).
    calls = (f"slow__{tool}", {"seconds": 1}), (f"slow__{tool}", {"seconds": 1.0})
    with ScriptedLLM(tool_calls(*calls), text("both done")) as llm:
        args = ["--server-command", server, "--server-name", "slow"]
        proc = run_cli([*args, "-p", "run both", "--yes", "--output", "json"], tmp_path,
                       base_url=llm.base_url)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    spans = []
    for done in json.loads(proc.stdout)["tool_calls"]:
        start, end = (float(w) for w in done["output"].split())
        spans.append((start, end))
    ids = [m["tool_call_id"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert ids == ["call_1", "call_2"]  # results in call order
    return spans, llm


def test_two_slow_read_only_calls_from_one_reply_run_concurrently(tmp_path: Path) -> None:
    """Each call says when it started and ended; concurrent calls overlap."""
    (start1, end1), (start2, end2) = slow_spans(tmp_path, "wait")[0]
    assert start1 < end2 and start2 < end1, "the read-only calls ran one after another"


def test_two_calls_that_may_change_state_run_in_the_order_written(tmp_path: Path) -> None:
    (start1, end1), (start2, end2) = slow_spans(tmp_path, "write")[0]
    assert end1 <= start2, "the second state-changing call started before the first ended"


def test_max_steps_reached_exits_3(tmp_path: Path) -> None:
    call = tool_calls(("time__get_current_time", {"timezone": "UTC"}))
    with ScriptedLLM(
        call, tool_calls(("time__get_current_time", {"timezone": "Europe/Oslo"}))
    ) as llm:
        proc = run_cli(
            [*time_server_args(), "-p", "loop", "--max-steps", "2", "--output", "json"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 3, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "max_steps" and result["steps"] == 2
    assert len(result["tool_calls"]) == 2
    llm.assert_complete()


def test_missing_api_key_exits_2_naming_the_setting(tmp_path: Path) -> None:
    proc = run_cli(["-p", "hi"], tmp_path, base_url="https://api.example.com/v1", api_key=None)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "OPENAI_API_KEY" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-steps", "0"], "Invalid value for '--max-steps'"),
        (["--server-command", ""], "--server-command is empty"),
        (["-H", "X-Key: 1"], "--header is for sse, http or openapi servers"),
        (["-c", "http"], "--connection http needs --server-url URL"),
        (["--output", "yaml"], "--output 'yaml': use text, json or stream-json"),
    ],
)
def test_bad_flags_exit_2_with_one_line_naming_the_flag(
    tmp_path: Path, flags: list[str], message: str
) -> None:
    proc = run_cli([*flags, "-p", "hi"], tmp_path, base_url="http://127.0.0.1:9/v1")
    assert proc.returncode == 2
    assert proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line


def test_unreachable_endpoint_exits_1_naming_the_setting(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    proc = run_cli([*time_server_args(), "-p", "hi"], tmp_path, base_url=dead)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert dead in proc.stderr and "OPENAI_BASE_URL" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_rejected_key_exits_1_at_once(tmp_path: Path) -> None:
    with ScriptedLLM(error(401, "Incorrect API key provided: sk-e2e-secret")) as llm:
        proc = run_cli([*time_server_args(), "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 1
    assert "OPENAI_API_KEY" in proc.stderr and "sk-e2e-secret" not in proc.stderr
    assert len(llm.requests) == 1
    assert "Traceback" not in proc.stderr


def test_a_fatal_error_masks_the_settings_secrets(tmp_path: Path) -> None:
    """The one-line error is masked with the secrets of the settings being run (a key no
    pattern would recognise), not only by the patterns."""
    key = "plaincredential0123456789"
    with ScriptedLLM(error(400, f"unknown account for {key}")) as llm:
        proc = run_cli(["-p", "hi"], tmp_path, base_url=llm.base_url, api_key=key)
    assert proc.returncode == 1
    assert "unknown account for [REDACTED]" in proc.stderr and key not in proc.stderr


def test_resume_says_which_session_and_the_state_folder_is_private(tmp_path: Path) -> None:
    with ScriptedLLM(text("first"), text("second")) as llm:
        first = run_cli(["-p", "one"], tmp_path, base_url=llm.base_url)
        second = run_cli(["-p", "two", "--resume"], tmp_path, base_url=llm.base_url)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert "resumed" not in first.stderr
    [session] = [p.stem for p in (tmp_path / "state" / "sessions").glob("*.jsonl")]
    assert f"resumed session {session} (2 messages)" in second.stderr
    assert second.stdout == "second\n"
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700  # the folder itself, too


def test_piped_stdin_is_one_request(tmp_path: Path) -> None:
    with ScriptedLLM(text("piped answer")) as llm:
        proc = run_cli(
            time_server_args(), tmp_path, base_url=llm.base_url, stdin="summarise this\nplease\n"
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "piped answer\n"
    assert llm.requests[0]["messages"][-1] == {
        "role": "user",
        "content": "summarise this\nplease",
    }


def test_resource_reference_in_a_single_shot_request(
    tmp_path: Path, everything_http_url: str
) -> None:
    doc = "demo://resource/static/document/architecture.md"
    with ScriptedLLM(text("summarised")) as llm:
        proc = run_cli(
            ["-c", "http", "--server-url", everything_http_url, "-p", f"summarise @main:{doc}"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    sent = llm.requests[0]["messages"][-1]["content"]
    assert sent.startswith(f"summarise @main:{doc}\n\n") and '<untrusted-data server="main"' in sent
    assert "read_resource" in {t["function"]["name"] for t in llm.requests[0]["tools"]}


def test_interactive_with_piped_lines_runs_each_line_as_a_turn(tmp_path: Path) -> None:
    """`-i` on a pipe: lines end in LF, not a terminal's CR, and each one is still a turn."""
    with ScriptedLLM(text("first answer"), text("second answer")) as llm:
        proc = run_cli(["-i"], tmp_path, base_url=llm.base_url, stdin="hello\nagain\n/usage\n")
        llm.assert_complete()
        second = llm.messages(1)
    assert proc.returncode == 0, proc.stderr
    assert "first answer" in proc.stdout and "second answer" in proc.stdout
    assert [m["content"] for m in second if m["role"] == "user"] == ["hello", "again"]
    assert "session" in proc.stdout  # /usage ran too


def test_piped_interactive_stdout_is_exactly_the_answers(tmp_path: Path) -> None:
    """`printf ... | run_mcp.py -i`: no prompt-toolkit warning, prompts, cursor-position
    queries or carriage returns; answers on stdout, everything else on stderr. The approval
    question does not read the next line: `y` stays the next turn, the write is refused."""
    script = [
        tool_calls(("local__write_file", {"path": "pwned.txt", "content": "x"})),
        text("I did not write it.\nIt needs approval."),
        text("second answer"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-i"], tmp_path, base_url=llm.base_url, stdin="write it\ny\n")
        llm.assert_complete()
        last = llm.messages(-1)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "I did not write it.\nIt needs approval.\nsecond answer\n"
    assert "not a terminal" not in proc.stderr and "\x1b[" not in proc.stderr + proc.stdout
    assert "▸ local › write_file" in proc.stderr and "tools from 1 server" in proc.stderr
    assert [m["content"] for m in last if m["role"] == "user"] == ["write it", "y"]
    assert "rerun with --yes" in tool_messages({"messages": last})[0]
    assert not (tmp_path / "pwned.txt").exists()


def test_piped_interactive_never_answers_a_form_with_the_next_line(
    tmp_path: Path, everything_stdio_args: list[str]
) -> None:
    """A server's form is declined, said on stderr; the next line (here a would-be password)
    is the next turn, never a field's value."""
    script = [
        tool_calls(("main__trigger-elicitation-request", {})),
        text("declined"),
        text("second answer"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            [*everything_stdio_args, "-i", "--yes"],
            tmp_path,
            base_url=llm.base_url,
            stdin="go\nhunter2\n",
        )
        llm.assert_complete()
        last = llm.messages(-1)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "declined\nsecond answer\n"
    assert "asks you to fill in a form — declined: input is not a terminal" in proc.stderr
    assert "declined" in tool_messages({"messages": last})[0].lower()
    assert [m["content"] for m in last if m["role"] == "user"] == ["go", "hunter2"]


def test_ctrl_c_in_a_single_shot_json_run_reports_the_cut_short_call(tmp_path: Path) -> None:
    """SIGINT during a tool call: exit 130, one line on stderr, JSON that says what ran."""
    with ScriptedLLM(tool_calls(("local__bash", {"command": "sleep 30"}))) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-e2e")
        proc = start_cli(["-p", "sleep", "--yes", "--output", "json"], tmp_path, env)
        try:
            assert proc.stderr is not None
            for line in proc.stderr:  # the call is running once its trace line is out
                if "local › bash" in line:
                    break
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130
    assert "interrupted" in stderr
    report = json.loads(stdout)
    assert report["status"] == "cancelled" and report["steps"] == 1
    assert report["usage"]["prompt_tokens"] == 12 and report["usage"]["completion_tokens"] == 7
    [call] = report["tool_calls"]
    assert call["name"] == "local__bash" and call["is_error"]
    assert "cancelled" in call["output"] and call["duration_ms"] > 0


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_lone_surrogate_from_the_model_is_replaced_not_fatal(tmp_path: Path, output: str) -> None:
    """JSON may carry "\\ud800": no UTF-8 pipe, file or transcript can hold it."""
    with ScriptedLLM(text("bad \ud800 char")) as llm:
        proc = run_cli(["-p", "hi", "--output", output], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    answer = proc.stdout if output == "text" else json.loads(proc.stdout)["answer"]
    assert answer.strip() == "bad \ufffd char"


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("--bogus", "No such option: --bogus (see --help)"),
        ("--max-step", "No such option: --max-step (did you mean --max-steps?)"),
        ("--verbos", "No such option: --verbos (did you mean --verbose?)"),
    ],
)
def test_an_unknown_flag_gets_a_close_suggestion_or_none(
    flag: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent.cli.main import main

    assert main(["-p", "hi", flag]) == 2
    assert capsys.readouterr().err == f"error: {said}\n"


def test_max_steps_is_said_once(tmp_path: Path) -> None:
    call = tool_calls(("time__get_current_time", {"timezone": "UTC"}))
    with ScriptedLLM(call, call) as llm:
        proc = run_cli(
            [*time_server_args(), "-p", "loop", "--max-steps", "2"], tmp_path, base_url=llm.base_url
        )
    assert proc.returncode == 3
    assert [line for line in proc.stderr.splitlines() if "max_steps" in line] == [
        "stopped: max_steps (2) reached before an answer"
    ]


def test_the_system_prompt_says_where_the_agent_runs(tmp_path: Path) -> None:
    """Date, working directory, platform, shell and the connected servers, in a few lines."""
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli(
            [*time_server_args(), "-p", "where am I?"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    system = llm.requests[0]["messages"][0]
    assert system["role"] == "system"
    today = datetime.date.today()
    lines = system["content"].splitlines()
    start = lines.index("Environment:")
    assert lines[start + 1 : start + 6] == [
        f"- Date: {today.isoformat()} ({today.strftime('%A')})",
        f"- Working directory: {tmp_path}",
        f"- Platform: {platform.system()} ({platform.machine()})",
        f"- Shell: {os.path.basename(os.environ.get('SHELL', '')) or 'unknown'}",
        "- Connected MCP servers: time",
    ]
