"""A stdio server started early (before the heavy imports) that ignores SIGTERM does not
outlive the agent (issue 19, item 12): not after a config error found once it started, not
after SIGTERM / SIGHUP / Ctrl-C while the agent is still starting. The agent's handlers
are in place before the first server starts; SIGKILL follows SIGTERM after a short grace.

The server is a shell that ignores TERM, HUP and INT, tells the test its pid through a
FIFO the moment it runs, then sleeps (an `exec`ed sleep keeps the ignored signals).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.tools.prestart import STOP_GRACE, Prestarted, stop_all
from tests.support.cli import cli_env, start_cli
from tests.support.fake_llm import ScriptedLLM
from tests.support.processes import alive, read_fifo

DEAF = 'trap "" TERM HUP INT; echo $$ > {fifo}; exec sleep 300'


def deaf_config(tmp_path: Path) -> Path:
    fifo = tmp_path / "ready.fifo"
    os.mkfifo(fifo)
    config = tmp_path / "deaf.json"
    server = {"command": "sh", "args": ["-c", DEAF.format(fifo=fifo)]}
    config.write_text(json.dumps({"mcpServers": {"deaf": server}}))
    return config


@contextlib.contextmanager
def agent_on_a_deaf_server(
    tmp_path: Path, args: list[str]
) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """The agent started with the deaf server; yields it and the server's pid once the
    server runs (the agent is still starting then). An agent still running is killed."""
    config = deaf_config(tmp_path)
    with ScriptedLLM() as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-e2e")
        proc = start_cli(["--mcp-config", str(config), *args], tmp_path, env)
        try:
            yield proc, int(read_fifo(tmp_path / "ready.fifo"))
        finally:
            if proc.poll() is None:
                proc.kill()


def test_a_config_error_after_the_start_kills_a_server_that_ignores_sigterm(
    tmp_path: Path,
) -> None:
    with agent_on_a_deaf_server(tmp_path, ["--resume", "nope", "-p", "x"]) as (proc, pid):
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stderr
    assert "--resume" in stderr
    assert not alive(pid), "a server that ignores SIGTERM outlived a config error"


@pytest.mark.parametrize(
    ("signum", "code", "word"),
    [
        (signal.SIGTERM, 143, "terminated"),
        (signal.SIGHUP, 129, "hung up"),
        (signal.SIGINT, 130, "interrupted"),
    ],
)
def test_a_signal_while_starting_kills_a_server_that_ignores_sigterm(
    tmp_path: Path, signum: int, code: int, word: str
) -> None:
    with agent_on_a_deaf_server(tmp_path, ["-p", "x", "--output", "json"]) as (proc, pid):
        proc.send_signal(signum)
        started = time.monotonic()
        stdout, stderr = proc.communicate(timeout=60)
        took = time.monotonic() - started
    assert proc.returncode == code, stderr
    assert word in stderr
    assert not alive(pid), "a server that ignores SIGTERM outlived the agent"
    report = json.loads(stdout)  # one object, whether the run had begun or not
    assert report["status"] == "cancelled" and report["answer"] is None
    print(f"signal -> exit in {took:.2f} s")


def test_stop_all_escalates_to_sigkill_after_the_grace() -> None:
    """Two servers deaf to SIGTERM: both SIGKILLed after the grace."""
    servers = []
    for _ in range(2):
        popen = subprocess.Popen(
            ["sh", "-c", 'trap "" TERM; echo deaf; exec sleep 300'],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        assert popen.stdout is not None
        assert popen.stdout.readline() == b"deaf\n"  # the trap is set before it is tested
        servers.append(Prestarted(popen, os.open(os.devnull, os.O_RDONLY), ("sh",)))
    started = time.monotonic()
    stop_all(servers)
    took = time.monotonic() - started
    assert [s.popen.returncode for s in servers] == [-signal.SIGKILL, -signal.SIGKILL]
    assert took >= STOP_GRACE  # each had its grace first
    print(f"two deaf servers stopped in {took:.2f} s")
