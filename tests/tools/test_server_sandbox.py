"""A stdio server from config run in its own sandbox ("sandbox" in its mcpServers entry):
it cannot write outside the workspace or dial out with the network off, and `/servers`-side
checks of the entry say what to fix. The server is a real MCP server of a few lines,
started by the agent as a user's config starts it. Needs bwrap (installed by .ci/run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.common.sandbox import unavailable
from agent.config.build import BUNDLED_MAIN
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages
from tests.support.sandbox_dirs import outside_temp_base
from tests.support.terminal import Terminal, needs_tmux, start, terminals

__all__ = ["terminals"]
pytestmark = pytest.mark.skipif(
    unavailable() is not None and os.environ.get("CI") != "true",
    reason=f"bubblewrap cannot sandbox here: {unavailable()}",
)

PROBE = '''
import socket
from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool()
def write(path: str) -> str:
    """Write a file."""
    try:
        with open(path, "w") as fh:
            fh.write("written")
    except OSError as exc:
        return f"failed: {exc}"
    return "wrote " + path


@server.tool()
def dial(host: str, port: int) -> str:
    """Open a TCP connection."""
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        return f"failed: {exc}"
    return "connected"


server.run("stdio")
'''


@pytest.fixture
def folders() -> Iterator[tuple[Path, Path]]:
    """(workspace, a folder outside it): outside every temp folder too, which a sandbox
    lets a server write; see tests/support/sandbox_dirs.py; removed afterwards."""
    base = outside_temp_base() / uuid.uuid4().hex
    (base / "ws").mkdir(parents=True)
    (base / "elsewhere").mkdir()
    yield base / "ws", base / "elsewhere"
    shutil.rmtree(base, ignore_errors=True)


def probe_run(workspace: Path, entry_extra: dict[str, Any], *args: str) -> tuple[Any, ScriptedLLM]:
    """The probe server configured with `entry_extra`; the model writes inside, outside,
    and dials a public address."""
    script = workspace.parent / "probe.py"
    script.write_text(PROBE)
    entry = {"command": sys.executable, "args": [str(script)], **entry_extra}
    config = mcp_json(workspace.parent, {"probe": entry})
    outside = workspace.parent / "elsewhere" / "x.txt"
    calls = tool_calls(
        ("probe__write", {"path": str(workspace / "in.txt")}),
        ("probe__write", {"path": str(outside)}),
        ("probe__dial", {"host": "10.255.255.1", "port": 80}),
    )
    with ScriptedLLM(calls, text("done")) as llm:
        argv = [*args, "--mcp-config", str(config), "-p", "go", "--yes", "--output", "json"]
        proc = run_cli(argv, workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), llm


def test_a_sandboxed_server_cannot_write_outside_or_dial_out(
    folders: tuple[Path, Path],
) -> None:
    workspace, elsewhere = folders
    sandbox = {"mode": "workspace-write", "network": False}
    _, llm = probe_run(workspace, {"sandbox": sandbox})
    inside, outside, dial = tool_messages(llm.requests[1])
    assert (workspace / "in.txt").read_text() == "written" and "wrote" in inside
    assert not (elsewhere / "x.txt").exists()
    assert "failed: [Errno 30] Read-only file system" in outside, outside
    assert "failed: [Errno 101] Network is unreachable" in dial, dial


def test_the_same_server_without_a_sandbox_writes_outside(folders: tuple[Path, Path]) -> None:
    """The control: with no "sandbox" in its entry ([sandbox] servers is false by default)
    the server writes where it likes."""
    workspace, elsewhere = folders
    _, llm = probe_run(workspace, {})
    assert (elsewhere / "x.txt").read_text() == "written"
    assert "wrote" in tool_messages(llm.requests[1])[1]


def test_servers_true_sandboxes_a_server_without_its_own_and_write_widens_one(
    folders: tuple[Path, Path],
) -> None:
    """[sandbox] servers = true: every stdio server runs under [sandbox] mode; an entry's
    `write` lets that server write one more folder (the network stays off)."""
    workspace, elsewhere = folders
    settings = workspace.parent / "settings.toml"
    settings.write_text("[sandbox]\nservers = true\n")
    _, llm = probe_run(workspace, {}, "--config", str(settings))
    assert not (elsewhere / "x.txt").exists()
    assert "Read-only file system" in tool_messages(llm.requests[1])[1]
    _, llm = probe_run(workspace, {"sandbox": {"write": [str(elsewhere)]}})
    assert (elsewhere / "x.txt").read_text() == "written"
    assert "Network is unreachable" in tool_messages(llm.requests[1])[2]


@pytest.mark.parametrize(
    ("sandbox", "said"),
    [
        ("yes", '.sandbox: "yes" is not a mode (use workspace-write, read-only, off)'),
        ({"mode": "workspace-write", "net": False}, ".sandbox.net: unknown key (did you mean"),
        ({"network": "no"}, ".sandbox.network: must be true or false"),
        ({"write": "~/.npm"}, '.sandbox.write: must be a list of folders, e.g. ["~/.npm"]'),
    ],
)
def test_a_bad_sandbox_entry_is_one_line_that_says_what_to_write(
    tmp_path: Path, sandbox: Any, said: str
) -> None:
    config = mcp_json(tmp_path, {"probe": {"command": "true", "sandbox": sandbox}})
    proc = run_cli(["--mcp-config", str(config), "-p", "hi"], tmp_path, base_url=None)
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert said in line and "mcpServers.probe" in line, line


def test_a_remote_server_cannot_be_sandboxed(tmp_path: Path) -> None:
    entry = {"url": "https://example.invalid/mcp", "sandbox": "read-only"}
    config = mcp_json(tmp_path, {"remote": entry})
    proc = run_cli(["--mcp-config", str(config), "-p", "hi"], tmp_path, base_url=None)
    assert proc.returncode == 2
    assert "mcpServers.remote.sandbox: only a stdio server runs here" in proc.stderr


@needs_tmux
def test_sandbox_and_servers_show_what_each_server_runs_under(
    folders: tuple[Path, Path], terminals: list[Terminal]
) -> None:
    workspace, _ = folders
    script = workspace.parent / "probe.py"
    script.write_text(PROBE)
    servers = {
        "local": {"command": sys.executable, "args": ["-P", str(BUNDLED_MAIN), "--root", "."]},
        "probe": {"command": sys.executable, "args": [str(script)], "sandbox": "read-only"},
        "remote": {"url": "http://127.0.0.1:9/mcp", "enabled": False},
    }
    config = mcp_json(workspace.parent, servers)
    with ScriptedLLM() as llm:
        term = start(
            terminals, llm, workspace, "sandbox-listing", "--mcp-config", str(config),
            ready=r"tools from 2 server",
        )  # fmt: skip
        term.type("/sandbox")
        term.wait_for(r"\[sandbox\] mode = workspace-write, network = false")
        screen = term.save()
        mark = term.mark()
        term.type("/servers")
        term.wait_for(r"config files read", after=mark)
        listing = term.screen()[mark:]
        term.leave()
    assert re.search(
        r"local\s+shell workspace-write: writes the workspace and temp folders; no network",
        screen,
    ), screen
    assert re.search(r"probe\s+read-only: writes nothing; no network", screen), screen
    hidden = re.search(r"hidden \(secrets\): (.*?)\nA command", screen, re.S)
    assert hidden and str(workspace.parent / "state") in hidden[1].replace("\n", ""), screen
    assert re.search(r"local .*shell workspace-write, no network", listing), listing
    assert re.search(r"probe .*read-only, no network", listing), listing
