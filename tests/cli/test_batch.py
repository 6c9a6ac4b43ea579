"""`run_mcp.py batch` as a user runs it: a subprocess, real stdio servers, the scripted
model answering each row by what its request holds (rows run in any order)."""

from __future__ import annotations

import json
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.cli import cli_env, run_cli, start_cli
from tests.support.fake_llm import ScriptedLLM, Turn, error, text, tool_calls
from tests.support.servers import REPO_ROOT, SUPPORT
from tests.support.terminal import Terminal, agent_env, needs_tmux, terminals, workspace

__all__ = ["terminals", "workspace"]  # the shared fixtures

SECRET = "sk-e2e-secret"  # run_cli's API key

# Starts the slow server (support/slow_server.py) with the same pid, after noting the pid.
COUNTED = """
import os, sys
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()}\\n")
os.execv(sys.executable, [sys.executable, sys.argv[2]])
"""


def prompt_of(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def replies(body: dict[str, Any]) -> Turn:
    """Each row's model: `wait` rows call the slow server's wait once, `fail` rows get a
    400, `write` rows ask to change a file, the others answer at once."""
    prompt, last = prompt_of(body), body["messages"][-1]
    if "fail" in prompt:
        return error(400, "scripted refusal")
    if last["role"] == "tool":
        return text(f"done: {prompt} {SECRET}")
    if "wait" in prompt:
        return tool_calls(("slow__wait", {"seconds": 1}))
    if "write" in prompt:
        return tool_calls(("local__write_file", {"path": "x.txt", "content": "y"}))
    return text(f"answer to {prompt}")


def write_rows(folder: Path, *rows: dict[str, Any] | str) -> Path:
    path = folder / "in.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def results(folder: Path) -> dict[Any, dict[str, Any]]:
    lines = [json.loads(line) for line in (folder / "out.jsonl").read_text().splitlines()]
    return {
        line["id"] if line["id"] is not None else f"line {line['line']}": line for line in lines
    }


def test_rows_run_in_parallel_over_one_set_of_servers(tmp_path: Path) -> None:
    (tmp_path / "counted.py").write_text(COUNTED)
    pids = tmp_path / "pids"
    server = f"{sys.executable} counted.py {pids} {SUPPORT / 'slow_server.py'}"
    write_rows(tmp_path, *({"id": f"r{i}", "prompt": f"wait {i}", "n": i} for i in range(4)))
    with ScriptedLLM(*[replies] * 8) as llm:
        proc = run_cli(["batch", "in.jsonl", "--out", "out.jsonl", "--parallel", "4",
                        "--server-command", server, "--server-name", "slow"],
                       tmp_path, base_url=llm.base_url)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    got = results(tmp_path)
    assert sorted(got) == ["r0", "r1", "r2", "r3"]
    assert all(r["status"] == "answered" and r["steps"] == 2 for r in got.values())
    assert [got[f"r{i}"]["n"] for i in range(4)] == [0, 1, 2, 3]  # other fields echoed
    assert len({r["session_id"] for r in got.values()}) == 4  # each its own conversation
    saved = {p.stem for p in (tmp_path / "state" / "sessions").glob("*.jsonl")}
    assert saved == {r["session_id"] for r in got.values()}  # and no empty one of the batch
    spans = [tuple(map(float, r["tool_calls"][0]["output"].split())) for r in got.values()]
    assert max(start for start, _ in spans) < min(end for _, end in spans), "rows did not overlap"
    assert len(pids.read_text().split()) == 1  # one server process for the whole batch
    assert "batch: 4 rows: 4 answered" in proc.stderr
    # Each row's requests hold its own prompt only: no row saw another's conversation.
    for body in llm.requests:
        assert len([m for m in body["messages"] if m["role"] == "user"]) == 1
    assert SECRET not in (tmp_path / "out.jsonl").read_text()
    assert stat.S_IMODE((tmp_path / "out.jsonl").stat().st_mode) == 0o600


def test_a_failing_row_is_recorded_and_the_rest_go_on(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        {"id": "a", "prompt": "first"},
        {"id": "b", "prompt": "please fail"},
        "not json",
        {"id": "a", "prompt": "again"},
        {"id": "c", "prompt": "third", "answer": "shadowed"},
        {"id": "d", "prompt": "write it"},
    )
    with ScriptedLLM(*[replies] * 4) as llm:
        proc = run_cli(["batch", "in.jsonl", "--out", "out.jsonl"], tmp_path,
                       base_url=llm.base_url)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 1, proc.stderr
    got = results(tmp_path)
    assert got["a"]["answer"] == "answer to first"
    assert got["b"]["status"] == "error" and "scripted refusal" in got["b"]["error"]
    assert "not JSON" in got["line 3"]["error"]
    assert 'id "a" is already used' in got["line 4"]["error"]
    assert "'answer' clashes with a result field" in got["c"]["error"]
    # Without --yes a call that may change things is refused, as in -p.
    assert "rerun with --yes" in got["d"]["tool_calls"][0]["output"]
    assert not (tmp_path / "x.txt").exists()


def test_a_deeply_nested_row_is_that_row_s_error_and_the_rest_go_on(tmp_path: Path) -> None:
    write_rows(
        tmp_path,
        {"id": "a", "prompt": "first"},
        "[" * 100_000 + "]" * 100_000,  # the parser itself gives up (RecursionError)
        '{"id": "b", "prompt": "deep", "echoed": %s}' % ("[" * 600 + "]" * 600),
        {"id": "c", "prompt": "last"},
    )
    with ScriptedLLM(replies, replies) as llm:
        proc = run_cli(["batch", "in.jsonl", "--out", "out.jsonl"], tmp_path,
                       base_url=llm.base_url)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    got = results(tmp_path)
    assert got["a"]["answer"] == "answer to first" and got["c"]["answer"] == "answer to last"
    assert got["line 2"]["error"] == "line 2: JSON nested deeper than 64 levels"
    assert got["line 3"]["error"] == "line 3: JSON nested deeper than 64 levels"
    assert "batch: 4 rows: 2 answered, 2 error" in proc.stderr


def test_max_errors_stops_starting_rows(tmp_path: Path) -> None:
    rows = [{"id": i, "prompt": "fail" if i < 2 else "fine"} for i in range(5)]
    write_rows(tmp_path, *rows)
    with ScriptedLLM(*[replies] * 2) as llm:
        proc = run_cli(["batch", "in.jsonl", "--out", "out.jsonl", "--max-errors", "2"],
                       tmp_path, base_url=llm.base_url)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 1
    assert sorted(results(tmp_path)) == [0, 1]
    assert "stopped after 2 failed rows (--max-errors 2): 3 rows not run" in proc.stderr


def test_resume_skips_the_ids_already_in_out(tmp_path: Path) -> None:
    write_rows(tmp_path, *({"id": i, "prompt": f"q{i}"} for i in range(3)))
    done = {"id": 1, "answer": "from before", "status": "answered"}
    (tmp_path / "out.jsonl").write_text(json.dumps(done) + "\n" + '{"id": 2, "ans')  # cut short
    args = ["batch", "in.jsonl", "--out", "out.jsonl"]
    refused = run_cli(args, tmp_path, base_url=None)
    assert refused.returncode == 2 and "exists: pass --resume" in refused.stderr
    with ScriptedLLM(replies, replies) as llm:
        proc = run_cli([*args, "--resume"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert sorted(prompt_of(body) for body in llm.requests) == ["q0", "q2"]
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["answer"] == "from before" and lines[1] == '{"id": 2, "ans'
    assert results_ids(lines[2:]) == [0, 2]
    assert "1 skipped (already in out.jsonl)" in proc.stderr


def test_out_is_never_written_through_a_symbolic_link(tmp_path: Path) -> None:
    write_rows(tmp_path, {"id": 1, "prompt": "q1"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out.jsonl").symlink_to(elsewhere / "made.jsonl")  # dangling
    args = ["batch", "in.jsonl", "--out", "out.jsonl"]
    for flags in ([], ["--resume"]):
        proc = run_cli([*args, *flags], tmp_path, base_url=None)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "error: --out out.jsonl is a symbolic link: give the file itself, or a new name"
        ]
        assert not (elsewhere / "made.jsonl").exists()
    # --resume through a link to a file of the user's would append to it.
    victim = elsewhere / "victim"
    victim.write_text("kept\n")
    (tmp_path / "out.jsonl").unlink()
    (tmp_path / "out.jsonl").symlink_to(victim)
    proc = run_cli([*args, "--resume"], tmp_path, base_url=None)
    assert proc.returncode == 2 and "is a symbolic link" in proc.stderr
    assert victim.read_text() == "kept\n"


def test_resume_makes_out_readable_by_the_user_alone(tmp_path: Path) -> None:
    write_rows(tmp_path, {"id": 1, "prompt": "q1"}, {"id": 2, "prompt": "q2"})
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"id": 1, "answer": "before", "status": "answered"}) + "\n")
    out.chmod(0o644)
    with ScriptedLLM(replies) as llm:
        proc = run_cli(["batch", "in.jsonl", "--out", "out.jsonl", "--resume"], tmp_path,
                       base_url=llm.base_url)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert results_ids(out.read_text().splitlines()) == [1, 2]
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def results_ids(lines: list[str]) -> list[Any]:
    return sorted(json.loads(line)["id"] for line in lines)


@needs_tmux
def test_a_progress_bar_counts_the_rows_at_a_terminal(
    workspace: Path, terminals: list[Terminal]
) -> None:
    write_rows(workspace, *({"id": i, "prompt": f"wait {i}"} for i in range(3)))
    server = f"{sys.executable} {SUPPORT / 'slow_server.py'}"
    args = ["batch", "in.jsonl", "--out", "out.jsonl", "--server-command", server,
            "--server-name", "slow"]  # fmt: skip
    with ScriptedLLM(*[replies] * 6) as llm:
        term = Terminal(
            [sys.executable, str(REPO_ROOT / "run_mcp.py"), *args],
            cwd=workspace,
            env=agent_env(llm.base_url, workspace.parent / "state"),
            log=workspace.parent / "batch.screen.txt",
        )
        terminals.append(term)
        term.wait_for(r"batch .*[12]/3 rows")  # counted while the rows run
        assert term.exit_code(timeout=60) == 0
        term.wait_for(r"batch: 3 rows: 3 answered")


def test_ctrl_c_leaves_the_running_rows_out_so_resume_runs_them(tmp_path: Path) -> None:
    write_rows(tmp_path, {"id": "quick", "prompt": "hello"}, {"id": "slow", "prompt": "wait"})

    def slow(body: dict[str, Any]) -> Turn:
        if prompt_of(body) == "wait" and body["messages"][-1]["role"] == "user":
            return tool_calls(("slow__wait", {"seconds": 60}))
        return replies(body)

    server = f"{sys.executable} {SUPPORT / 'slow_server.py'}"
    with ScriptedLLM(slow, slow) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-e2e")
        args = ["batch", "in.jsonl", "--out", "out.jsonl", "--server-command", server,
                "--server-name", "slow"]  # fmt: skip
        proc = start_cli(args, tmp_path, env)
        try:
            assert proc.stderr is not None
            deadline = time.monotonic() + 60
            while len(llm.requests) < 2:  # the slow row's call is running
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, stderr
    assert sorted(results(tmp_path)) == ["quick"]  # the running row was not written
