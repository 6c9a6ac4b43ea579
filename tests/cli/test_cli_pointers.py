"""Habits from other CLIs get a pointer to ours, not a bare "No such option" (issue 41 #10).

Each runs `run_mcp.py` as a user does (tests/support/cli.py), with the scripted model
where a run gets that far: another agent's flag, a request without -p, a bare run from
a script, an `--allowed-tools` entry that names no tool, a README's block with `"name"`
for `mcp add-json`, a uvx server uv could not resolve, a batch and a stream-json turn
stopped half way.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli_env, run_cli, start_cli
from tests.support.fake_llm import ScriptedLLM, Turn, text, tool_calls
from tests.support.servers import REPO_ROOT

SLOW_SERVER = f"{sys.executable} {REPO_ROOT / 'tests' / 'support' / 'slow_server.py'}"
SLOW = ["--server-command", SLOW_SERVER, "--server-name", "slow"]


def test_a_request_without_p_is_pointed_at_p(tmp_path: Path) -> None:
    proc = run_cli(["what time is it"], tmp_path, base_url=None)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error: a request goes after -p: run_mcp.py -p 'what time is it'"
    ]


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [
        (["--continue"], "--resume"),
        (["--yolo", "-p", "hi"], "--yes"),
        (["--max-turns", "3", "-p", "hi"], "--max-steps"),
        (["--output-format", "json", "-p", "hi"], "--output"),
    ],
)
def test_another_agents_flag_names_ours(tmp_path: Path, theirs: list[str], ours: str) -> None:
    proc = run_cli(theirs, tmp_path, base_url=None)
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"error: No such option: {theirs[0]} (here it is {ours}")


def test_a_bare_run_with_no_terminal_and_no_stdin_says_how_and_exits_0(tmp_path: Path) -> None:
    """The README's install line ends in `run_mcp.py`: from a script (no TTY, stdin
    /dev/null) that is usage, not an error."""
    proc = run_cli([], tmp_path, base_url=None)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "-p TEXT" in proc.stdout and "--help" in proc.stdout


def test_a_request_piped_to_a_bare_run_still_runs(tmp_path: Path) -> None:
    with ScriptedLLM(text("piped answer")) as llm:
        proc = run_cli([], tmp_path, base_url=llm.base_url, stdin="what time is it\n")
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "piped answer"


def test_an_allowed_tools_entry_that_matches_no_tool_is_said_once(tmp_path: Path) -> None:
    args = ["--allowed-tools", "slow__wait,slow__wiat", "--allowed-tools", "mcp__slow__wait"]
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli([*SLOW, *args, "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "allowed-tools" in line]
    assert said == [
        "warning: --allowed-tools slow__wiat matches no tool (did you mean slow__wait?)"
    ]


def test_add_json_leaves_out_the_name_claude_desktop_ignores(tmp_path: Path) -> None:
    block = json.dumps({"name": "time", "command": "uvx", "args": ["mcp-server-time"]})
    proc = run_cli(["mcp", "add-json", "time", block], tmp_path, base_url=None)
    assert proc.returncode == 0, proc.stderr
    written = json.loads((tmp_path / "xdg-config" / "mcp-agent" / "mcp.json").read_text())
    assert written["mcpServers"]["time"] == {"command": "uvx", "args": ["mcp-server-time"]}
    assert "left out name" in proc.stderr


# What uvx writes when the package does not resolve (uv 0.9), then its hints: the reason
# is the wrapped paragraph after "No solution found", above the last lines of stderr.
UV_FAILURE = """\
  \u00d7 No solution found when resolving tool dependencies:
  \u2570\u2500\u25b6 Because mcp-server-tiem was not found in the package registry
      and you require mcp-server-tiem, we can conclude that your
      requirements are unsatisfiable.

      hint: Packages were unavailable because the network was disabled. When
      the network is disabled, registry packages may only be read from the
      cache.
"""


def test_uvs_reason_is_shown_when_a_uvx_server_fails(tmp_path: Path) -> None:
    uvx = tmp_path / "bin" / "uvx"
    uvx.parent.mkdir()
    uvx.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stderr.write({UV_FAILURE!r})\nsys.exit(1)\n"
    )
    uvx.chmod(0o755)
    with ScriptedLLM() as llm:
        proc = run_cli(
            ["--server-command", f"{uvx} mcp-server-tiem", "-p", "hi"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 1
    [line] = proc.stderr.splitlines()
    assert (
        "No solution found when resolving tool dependencies: Because mcp-server-tiem was not "
        "found in the package registry and you require mcp-server-tiem, we can conclude that "
        "your requirements are unsatisfiable." in line
    ), line


def stop_with(proc: subprocess.Popen[str], ready: Any, signum: int) -> tuple[str, str]:
    """Wait (bounded) until `ready()`, send `signum`, and collect what the run wrote."""
    try:
        deadline = time.monotonic() + 60
        while not ready():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signum)
        return proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_batch_stopped_by_ctrl_c_says_what_out_holds_and_to_resume(tmp_path: Path) -> None:
    rows = [{"id": "quick", "prompt": "hello"}, {"id": "slow", "prompt": "wait"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def model(body: dict[str, Any]) -> Turn:
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if prompt == "wait" and body["messages"][-1]["role"] == "user":
            return tool_calls(("slow__wait", {"seconds": 60}))
        return text(f"answer to {prompt}")

    with ScriptedLLM(model, model) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-e2e")
        proc = start_cli(["batch", "in.jsonl", "--out", "out.jsonl", *SLOW], tmp_path, env)
        _, stderr = stop_with(proc, lambda: len(llm.requests) >= 2, signal.SIGINT)
    assert proc.returncode == 130, stderr
    assert "batch stopped: 1 rows in out.jsonl; rerun with --resume for the rest" in stderr


def test_a_tool_call_cut_short_by_an_interrupt_gets_its_tool_result_line(tmp_path: Path) -> None:
    with ScriptedLLM(tool_calls(("slow__wait", {"seconds": 60}))) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-e2e")
        args = ["--input-format", "stream-json", "--output", "stream-json", "-y", *SLOW]
        proc = start_cli(args, tmp_path, env, stdin_pipe=True)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            turn = {"type": "user", "message": {"role": "user", "content": "wait a minute"}}
            proc.stdin.write(json.dumps(turn) + "\n")
            proc.stdin.flush()
            seen = [json.loads(proc.stdout.readline())]
            while seen[-1]["type"] != "tool_use":
                seen.append(json.loads(proc.stdout.readline()))
            interrupt = {"type": "control_request", "request_id": "r1",
                         "request": {"subtype": "interrupt"}}  # fmt: skip
            proc.stdin.write(json.dumps(interrupt) + "\n")
            proc.stdin.close()
            rest = [json.loads(line) for line in proc.stdout]
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    call_id = seen[-1]["id"]
    [result] = [line for line in rest if line["type"] == "tool_result"]
    assert result["id"] == call_id and result["is_error"] is True
    assert "interrupted" in result["output"]
    assert rest.index(result) < next(i for i, line in enumerate(rest) if line["type"] == "result")
