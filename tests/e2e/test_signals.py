"""SIGTERM and SIGHUP end a run like Ctrl-C: servers stopped, JSON printed, 143 / 129.

Real subprocesses: the agent (run_mcp.py), its bundled stdio server, and the `bash` tool's
`sleep` in its own process group. The tool tells the test its pids through a FIFO, so the
signal is sent while the call is provably running.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import cli_env, start_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.processes import alive, read_fifo

# The tool writes "<server pid> <its own pid>" into the FIFO, then becomes a long sleep.
BUSY = "echo $PPID $$ > ready.fifo; exec sleep 300"


def start_agent(tmp_path: Path, base_url: str, *args: str) -> subprocess.Popen[str]:
    env = cli_env(tmp_path, base_url, "sk-e2e")
    # The shell reports its pids with $PPID and $$, which a sandbox's own pid namespace
    # would renumber: these run unsandboxed (tests/server/test_shell_sandbox.py stops a
    # sandboxed command the same way).
    settings = tmp_path / "no-sandbox.toml"
    settings.write_text('[sandbox]\nmode = "off"\n')
    return start_cli(["--config", str(settings), *args], tmp_path, env, stdin_pipe="-i" in args)


@contextlib.contextmanager
def mid_call(
    tmp_path: Path, base_url: str, *args: str
) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """The agent started with `args` (a REPL is asked for "work"), yielded once its bash call
    has written the pids in ready.fifo, so a signal lands while the call provably runs; an
    agent still alive when the test leaves is killed."""
    proc = start_agent(tmp_path, base_url, *args)
    try:
        if "-i" in args:
            assert proc.stdin is not None
            proc.stdin.write("work\n")
            proc.stdin.flush()
        yield proc, [int(pid) for pid in read_fifo(tmp_path / "ready.fifo").split()]
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_terminating_signal_during_a_call_stops_servers_and_prints_the_json(
    tmp_path: Path, signum: int, code: int
) -> None:
    os.mkfifo(tmp_path / "ready.fifo")
    args = ("-p", "work", "--yes", "--output", "json")
    with (
        ScriptedLLM(tool_calls(("local__bash", {"command": BUSY}))) as llm,
        mid_call(tmp_path, llm.base_url, *args) as (proc, [server_pid, sleep_pid]),
    ):
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == code, stderr
    report = json.loads(stdout)
    assert report["status"] == "cancelled" and report["steps"] == 1
    [call] = report["tool_calls"]
    assert call["name"] == "local__bash" and call["is_error"] and "cancelled" in call["output"]
    assert not alive(server_pid), "the stdio server outlived the agent"
    assert not alive(sleep_pid), "the tool's process group outlived the agent"
    transcript = next((tmp_path / "state" / "sessions").glob("*.jsonl")).read_text()
    assert "sleep 300" in transcript


def test_a_closed_repl_terminal_leaves_no_server_behind(tmp_path: Path) -> None:
    """SIGHUP (the terminal closed) in the middle of a REPL turn: every server goes."""
    os.mkfifo(tmp_path / "ready.fifo")
    with (
        ScriptedLLM(tool_calls(("local__bash", {"command": BUSY})), text("unused")) as llm,
        mid_call(tmp_path, llm.base_url, "-i", "--yes") as (proc, [server_pid, sleep_pid]),
    ):
        proc.send_signal(signal.SIGHUP)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 129, stderr
    assert not alive(server_pid) and not alive(sleep_pid)


def test_a_hung_server_does_not_outlive_a_closed_repl(tmp_path: Path) -> None:
    """The server freezes (SIGSTOP: deaf to stdin EOF and SIGTERM) with a call in flight;
    the terminal closes: the agent still ends it (SIGKILL after the SIGTERM grace)."""
    os.mkfifo(tmp_path / "ready.fifo")
    os.mkfifo(tmp_path / "go.fifo")
    command = "echo $PPID $$ > ready.fifo; read line < go.fifo"
    with ScriptedLLM(tool_calls(("local__bash", {"command": command})), text("unused")) as llm:
        try:
            with mid_call(tmp_path, llm.base_url, "-i", "--yes") as (proc, [server_pid, _]):
                os.kill(server_pid, signal.SIGSTOP)
                proc.send_signal(signal.SIGHUP)
                _, stderr = proc.communicate(timeout=60)
        finally:
            with open(tmp_path / "go.fifo", "w") as go:  # let the tool's shell finish
                go.write("done\n")
    assert proc.returncode == 129, stderr
    assert not alive(server_pid), "a frozen server outlived the REPL"
