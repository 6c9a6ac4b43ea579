"""A tool result larger than max_observe: kept whole in the session's folder, the model
gets head, tail and a handle, and pages through it with the agent's own `read_result`."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.big_result_server import big_text
from tests.support.cli import cli_env, run_cli, start_cli
from tests.support.fake_llm import Script, ScriptedLLM, Turn, text, tool_calls
from tests.support.processes import alive
from tests.support.servers import SUPPORT

MAX_OBSERVE = 20_000
LINES = 20_000  # 2,000,000 characters
MIDDLE = 1_000_000


def big_args(tmp_path: Path) -> list[str]:
    config = tmp_path / "config.toml"
    config.write_text(f"[agent]\nmax_observe = {MAX_OBSERVE}\n")
    server = f"{sys.executable} {SUPPORT / 'big_result_server.py'}"
    return ["--config", str(config), "--server-command", server, "--server-name", "big"]


def tool_message(body: dict[str, Any]) -> str:
    return [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]


def test_a_2mb_result_stays_out_of_the_window_and_its_middle_reads_back_exactly(
    tmp_path: Path,
) -> None:
    seen: dict[str, Any] = {}

    def page_the_middle(body: dict[str, Any]) -> Turn:
        seen["cut"] = tool_message(body)
        seen["tools"] = [t["function"]["name"] for t in body["tools"]]
        page = {"id": "r1", "offset": MIDDLE, "limit": 3000}
        return tool_calls(
            ("read_result", page), ("read_result", {"id": "r1", "pattern": "^0012345:"})
        )

    script: list[Script] = [
        tool_calls(("big__lines", {"count": LINES})),
        page_the_middle,
        text("Read it."),
    ]
    with ScriptedLLM(*script) as llm:
        args = [*big_args(tmp_path), "-p", "dump it", "--output", "json", "--yes"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    whole = big_text(LINES)
    assert len(whole) == 2_000_000
    # The request after the big result: head and tail and a handle, under max_observe.
    cut = seen["cut"]
    assert len(cut) < MAX_OBSERVE + 600
    assert whole[:1000] in cut and whole[-1000:] in cut and '"r1"' in cut
    assert "read_result" in seen["tools"]
    assert "read_result" not in [t["function"]["name"] for t in llm.requests[0]["tools"]]
    # Paging returns the middle exactly, and the pattern finds the line by its offset.
    page, found = [m["content"] for m in llm.messages(2) if m["role"] == "tool"][-2:]
    assert f"\n{whole[MIDDLE : MIDDLE + 3000]}\n</untrusted-data" in page
    assert f"{12345 * 100}: 0012345:" in found
    # The whole text is in the session's folder.
    [kept] = (tmp_path / "state" / "sessions").glob("*.results/r1.txt")
    assert kept.read_text() == whole
    assert json.loads(proc.stdout)["status"] == "answered"
    llm.assert_complete()


# `([a-j]+)+!` never matches a line of the big server and backtracks exponentially on its
# 91 letters: in the agent's own process it would hold the GIL for longer than anyone waits.
BACKTRACKING = {"id": "r1", "pattern": "([a-j]+)+!"}


def test_a_backtracking_read_result_pattern_stops_at_its_deadline_and_the_run_answers(
    tmp_path: Path,
) -> None:
    script: list[Script] = [
        tool_calls(("big__lines", {"count": 300})),
        tool_calls(("read_result", BACKTRACKING)),
        text("Done."),
    ]
    with ScriptedLLM(*script) as llm:
        args = [*big_args(tmp_path), "-p", "dump it", "--output", "json", "--yes"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    told = tool_message(llm.requests[2])
    assert "search stopped" in told and "backtrack" in told
    assert json.loads(proc.stdout)["status"] == "answered"
    llm.assert_complete()


def _worker_of(pid: int, timeout: float = 60) -> int:
    """The pid of the agent's read_result search worker, once it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if parent == pid and b"result_search.py" in cmdline:
                return int(entry.name)
        time.sleep(0.05)
    raise AssertionError("the search worker never started")


def test_sigterm_during_a_backtracking_search_ends_the_run_with_its_json(tmp_path: Path) -> None:
    """The pattern runs off the event loop: SIGTERM is handled at once (it was ignored while
    the regex held the agent's own thread), the JSON is printed, the worker is gone."""
    script: list[Script] = [
        tool_calls(("big__lines", {"count": 300})),
        tool_calls(("read_result", BACKTRACKING)),
    ]
    with ScriptedLLM(*script) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-e2e")
        args = [*big_args(tmp_path), "-p", "dump it", "--output", "json", "--yes"]
        proc = start_cli(args, tmp_path, env)
        try:
            worker = _worker_of(proc.pid)
            proc.send_signal(signal.SIGTERM)
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 143, stderr
    assert json.loads(stdout)["status"] == "cancelled"
    assert not alive(worker), "the search worker outlived the agent"
