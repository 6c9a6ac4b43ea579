"""`run_mcp.py batch --cluster` as a user runs it: a Dask scheduler and two worker processes
on 127.0.0.1 (free ports from the OS, every process stopped after), the driver a
subprocess, real stdio servers started in the workers, the scripted model answering each
row by what its request holds (rows run in any order, a retried row asks again)."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli_env, mcp_json, run_cli, start_cli
from tests.support.fake_llm import ScriptedLLM, Turn, text, tool_calls
from tests.support.processes import alive
from tests.support.servers import REPO_ROOT, SUPPORT

DRIVER_KEY = "sk-driver-key-0001"  # the driver's OPENAI_API_KEY
WORKER_KEY = "sk-worker-key-0002"  # the workers' own
DASK = str(Path(sys.executable).parent / "dask")

# Notes "PID PPID" of the slow server (support/slow_server.py), then becomes it.
COUNTED = """
import os, sys
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()} {os.getppid()}\\n")
os.execv(sys.executable, [sys.executable, sys.argv[2]])
"""


def prompt_of(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def replies(body: dict[str, Any]) -> Turn:
    """`wait N` rows call the slow server's wait for N seconds once; the others answer."""
    prompt, last = prompt_of(body), body["messages"][-1]
    if last["role"] == "tool":
        return text(f"done: {prompt}")
    if prompt.startswith("wait"):
        return tool_calls(("slow__wait", {"seconds": float(prompt.split()[1])}))
    return text(f"answer to {prompt}")


@dataclass
class Cluster:
    address: str
    workers: list[subprocess.Popen[bytes]]
    state: Path  # the workers' state folder (their transcripts)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)


def _until(ready: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """A scheduler and two worker processes (no nanny: a killed worker stays dead), all
    on 127.0.0.1; `worker_key=None` starts workers without the API key."""
    started: list[subprocess.Popen[bytes]] = []

    def start(worker_key: str | None = WORKER_KEY) -> Cluster:
        base = tmp_path / "cluster"
        base.mkdir()
        env = cli_env(base, None, worker_key)  # the workers' own HOME-less agent env
        env["PYTHONPATH"] = str(REPO_ROOT)  # the workers and scheduler import agent
        env["MCP_AGENT_STATE_DIR"] = str(base / "worker-state")
        scheduler_file = base / "scheduler.json"
        loopback = ["--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"]

        def spawn(*args: str, log: str) -> subprocess.Popen[bytes]:
            with (base / log).open("wb") as out:
                proc = subprocess.Popen([DASK, *args], cwd=base, env=env, stdout=out, stderr=out)
            started.append(proc)
            return proc

        spawn("scheduler", "--port", "0", "--scheduler-file", str(scheduler_file), *loopback,
              log="scheduler.log")  # fmt: skip
        _until(scheduler_file.exists, "the scheduler")
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        workers = [
            spawn("worker", address, "--no-nanny", "--nthreads", "1", "--name", f"w{i}",
                  "--local-directory", str(base / f"w{i}"), *loopback, log=f"w{i}.log")
            for i in (1, 2)
        ]  # fmt: skip
        _until(lambda: _connected_workers(base) == 2, "two workers")
        return Cluster(address, workers, base / "worker-state", started)

    yield start
    for proc in started:
        proc.terminate()
    for proc in started:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def _connected_workers(base: Path) -> int:
    logs = [base / "w1.log", base / "w2.log"]
    return sum(1 for log in logs if log.exists() and "Registered to:" in log.read_text())


def write_rows(folder: Path, *rows: dict[str, Any]) -> Path:
    path = folder / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def out_lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "out.jsonl").read_text().splitlines()]


def slow_server(folder: Path) -> list[str]:
    """The command line of a slow server that notes its pid and its parent's in `pids`."""
    (folder / "counted.py").write_text(COUNTED)
    command = f"{sys.executable} {folder / 'counted.py'} {folder / 'pids'} "
    return ["--server-command", command + str(SUPPORT / "slow_server.py"), "--server-name", "slow"]


def servers_started(folder: Path) -> list[tuple[int, int]]:
    pids = folder / "pids"
    lines = pids.read_text().split("\n") if pids.exists() else []
    return [(int(a), int(b)) for a, b in (line.split() for line in lines if line)]


def batch(cluster: Cluster, *flags: str) -> list[str]:
    return ["batch", "in.jsonl", "--out", "out.jsonl", "--cluster", cluster.address, *flags]


def test_rows_run_in_the_worker_processes_and_out_is_a_local_batch_s(
    tmp_path: Path, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster()
    write_rows(tmp_path, *({"id": f"r{i}", "prompt": f"wait 0.5 {i}", "n": i} for i in range(6)))
    with ScriptedLLM(*[replies] * 12) as llm:
        proc = run_cli([*batch(cluster, "--parallel", "2"), *slow_server(tmp_path)], tmp_path,
                       base_url=llm.base_url, api_key=DRIVER_KEY)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    got = {line["id"]: line for line in out_lines(tmp_path)}
    assert sorted(got) == [f"r{i}" for i in range(6)]  # every row, once
    assert all(r["status"] == "answered" and r["steps"] == 2 for r in got.values())
    assert [got[f"r{i}"]["n"] for i in range(6)] == list(range(6))  # other fields echoed
    assert "batch: 6 rows: 6 answered" in proc.stderr
    assert stat.S_IMODE((tmp_path / "out.jsonl").stat().st_mode) == 0o600
    # One server per worker, started by the worker process (not by the driver): both
    # workers ran rows, and each row's transcript is in the workers' state folder.
    parents = [parent for _, parent in servers_started(tmp_path)]
    assert sorted(parents) == sorted(w.pid for w in cluster.workers)
    saved = {p.stem for p in (cluster.state / "sessions").glob("*.jsonl")}
    assert saved == {r["session_id"] for r in got.values()}
    assert not (tmp_path / "state" / "sessions").exists() or not any(
        (tmp_path / "state" / "sessions").glob("*.jsonl")
    )
    # The key the model got is the workers' own: the driver's never left the driver.
    assert {h["authorization"] for h in llm.headers} == {f"Bearer {WORKER_KEY}"}
    # The sessions were closed when the batch ended: the servers are gone.
    _until(lambda: not any(alive(pid) for pid, _ in servers_started(tmp_path)), "servers closed")


def test_a_worker_missing_a_secret_fails_each_row_saying_which(
    tmp_path: Path, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster(worker_key=None)
    write_rows(tmp_path, *({"id": i, "prompt": f"q{i}"} for i in range(3)))
    with ScriptedLLM() as llm:
        proc = run_cli(batch(cluster), tmp_path, base_url=llm.base_url, api_key=DRIVER_KEY)
        llm.assert_complete()  # no request: the driver's key was not sent to the workers
    assert proc.returncode == 1, proc.stderr
    errors = [line["error"] for line in out_lines(tmp_path)]
    said = (
        ": environment variable OPENAI_API_KEY is not set there (the cluster sends no "
        "secrets: set OPENAI_API_KEY in each worker's environment)"
    )
    assert len(errors) == 3, errors
    for error in errors:  # one line a row, naming the worker
        assert error.startswith("worker tcp://127.0.0.1:") and error.endswith(said), error
    assert "Traceback" not in proc.stderr
    assert "batch: 3 rows: 3 error" in proc.stderr


def test_a_secret_written_in_a_file_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    server = {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer abc123456"}}
    mcp_json(tmp_path, {"remote": server}, mode=0o600)
    write_rows(tmp_path, {"id": 1, "prompt": "q"})
    args = ["batch", "in.jsonl", "--out", "out.jsonl", "--mcp-config", "mcp.json",
            "--cluster", "tcp://127.0.0.1:9"]  # fmt: skip
    proc = run_cli(args, tmp_path, base_url="http://127.0.0.1:9/v1", api_key=DRIVER_KEY)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: --cluster: server 'remote' headers.Authorization is not taken from an environment "
        "variable, and the task graph carries no secrets: write it as ${VAR} and set VAR on "
        "the workers"
    ]
    assert not (tmp_path / "out.jsonl").exists()


def test_resume_runs_only_the_rows_not_in_out(
    tmp_path: Path, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster()
    write_rows(tmp_path, *({"id": i, "prompt": f"q{i}"} for i in range(4)))
    done = {"id": 1, "answer": "from before", "status": "answered"}
    (tmp_path / "out.jsonl").write_text(json.dumps(done) + "\n" + '{"id": 2, "ans')  # cut short
    with ScriptedLLM(*[replies] * 3) as llm:
        proc = run_cli([*batch(cluster), "--resume"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert sorted(prompt_of(body) for body in llm.requests) == ["q0", "q2", "q3"]
    ids = [line.get("id") for line in map(json.loads, out_text_lines(tmp_path)[2:])]
    assert sorted(ids) == [0, 2, 3]
    assert "3 answered, 1 skipped (already in out.jsonl)" in proc.stderr


def out_text_lines(folder: Path) -> list[str]:
    return (folder / "out.jsonl").read_text().splitlines()


def test_a_killed_worker_s_rows_run_again_on_the_other(
    tmp_path: Path, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster()
    write_rows(tmp_path, *({"id": i, "prompt": f"wait 4 {i}"} for i in range(4)))
    with ScriptedLLM(*[replies] * 16) as llm:
        env = cli_env(tmp_path, llm.base_url, DRIVER_KEY)
        args = [*batch(cluster, "--parallel", "2"), *slow_server(tmp_path)]
        proc = start_cli(args, tmp_path, env)
        try:
            _until(lambda: len(llm.requests) >= 4, "every row's tool call")  # all four running
            victim = cluster.workers[0]
            victim.kill()  # the worker process dies with two rows running in it
            victim.wait(timeout=15)
            _, stderr = proc.communicate(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, stderr
    lines = out_lines(tmp_path)
    assert sorted(line["id"] for line in lines) == [0, 1, 2, 3]  # each once
    assert all(line["status"] == "answered" for line in lines), lines
    # Two rows ran twice: their first run died with the worker, the second finished.
    asked = [prompt_of(body) for body in llm.requests if body["messages"][-1]["role"] == "user"]
    assert len(asked) == 6 and len(set(asked)) == 4
    survivor = cluster.workers[1].pid
    assert {parent for _, parent in servers_started(tmp_path)} == {victim.pid, survivor}


def test_ctrl_c_cancels_the_rows_and_says_how_to_resume(
    tmp_path: Path, start_cluster: Callable[..., Cluster]
) -> None:
    cluster = start_cluster()
    write_rows(tmp_path, {"id": "quick", "prompt": "hello"}, {"id": "slow", "prompt": "wait 60"})
    with ScriptedLLM(replies, replies) as llm:
        env = cli_env(tmp_path, llm.base_url, DRIVER_KEY)
        proc = start_cli([*batch(cluster), *slow_server(tmp_path)], tmp_path, env)
        try:
            _until(lambda: len(llm.requests) >= 2 and len(out_text_lines_or_none(tmp_path)) == 1,
                   "the quick row written and the slow one's call running")  # fmt: skip
            graph = what_the_scheduler_holds(cluster)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, stderr
    # While the batch ran, the scheduler held its settings and rows, not the driver's key.
    assert b"mcp-agent-batch-" in graph and b"wait 60" in graph
    assert DRIVER_KEY.encode() not in graph
    assert [line["id"] for line in out_lines(tmp_path)] == ["quick"]  # the running row left out
    assert "batch stopped: 1 rows in out.jsonl; rerun with --resume for the rest" in stderr
    assert "Traceback" not in stderr
    # The slow row was cancelled where it ran: the workers' sessions and servers closed.
    _until(lambda: not any(alive(pid) for pid, _ in servers_started(tmp_path)), "servers closed")
    assert all(w.poll() is None for w in cluster.workers)  # the cluster itself goes on


def what_the_scheduler_holds(cluster: Cluster) -> bytes:
    """The worker plugins and the tasks the scheduler holds now, pickled: what anyone who
    reaches the scheduler could read."""
    from distributed import Client

    def held(dask_scheduler: Any) -> bytes:
        import pickle

        specs = [ts.run_spec for ts in dask_scheduler.tasks.values()]
        return pickle.dumps((dask_scheduler.worker_plugins, specs))

    with Client(cluster.address, timeout=30) as client:
        graph: bytes = client.run_on_scheduler(held)
    return graph


def out_text_lines_or_none(folder: Path) -> list[str]:
    path = folder / "out.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def test_no_scheduler_at_the_address_is_one_line(tmp_path: Path) -> None:
    write_rows(tmp_path, {"id": 1, "prompt": "q"})
    with socket_left_closed() as port:
        args = ["batch", "in.jsonl", "--out", "out.jsonl", "--cluster", f"tcp://127.0.0.1:{port}"]
        proc = run_cli(args, tmp_path, base_url="http://127.0.0.1:9/v1", api_key=DRIVER_KEY)
    assert proc.returncode == 1, proc.stderr
    [said] = proc.stderr.strip().splitlines()
    assert said.startswith(f"error: --cluster tcp://127.0.0.1:{port}: no Dask scheduler answered")
    assert not (tmp_path / "out.jsonl").exists()


class socket_left_closed:
    """A free loopback port nobody listens on (bound, then closed)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        pass
