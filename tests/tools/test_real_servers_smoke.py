"""Smoke tests: the real-server helpers/fixtures work, using only the raw mcp SDK.

If these fail, every higher-level test against real servers will too, so they pin down
whether the fault is in the environment (node, npm install, ports) or in the product.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client

from tests.support.processes import alive
from tests.support.servers import (
    ServerStartError,
    everything_stdio_command,
    free_port,
    run_http_server,
    time_server_command,
)

pytestmark = pytest.mark.slow

CONNECT_TIMEOUT = 30  # a hung handshake must fail the test, not the 120 s pytest-timeout
EVERYTHING_TOOLS = {"echo", "get-sum"}


async def _tool_names(client: Client) -> set[str]:
    result = await client.list_tools()
    # One page is enough for these servers; a cursor here means the server changed.
    assert result.next_cursor is None
    return {tool.name for tool in result.tools}


async def _stdio_tool_names(command: str, args: list[str], log: Path) -> set[str]:
    params = StdioServerParameters(command=command, args=args)
    # Opening a local log file is instant; stdio_client needs a real file (it uses fileno()).
    with open(log, "w") as errlog, anyio.fail_after(CONNECT_TIMEOUT):  # noqa: ASYNC230
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            return await _tool_names(client)


@pytest.mark.anyio
async def test_everything_stdio(tmp_path: Path) -> None:
    command, args = everything_stdio_command()
    names = await _stdio_tool_names(command, args, tmp_path / "everything-stdio.log")
    assert names >= EVERYTHING_TOOLS


@pytest.mark.anyio
async def test_everything_streamable_http(everything_http_url: str) -> None:
    assert everything_http_url.endswith("/mcp")
    with anyio.fail_after(CONNECT_TIMEOUT):
        async with Client(everything_http_url, mode="legacy") as client:
            assert await _tool_names(client) >= EVERYTHING_TOOLS


@pytest.mark.anyio
async def test_everything_sse(everything_sse_url: str) -> None:
    assert everything_sse_url.endswith("/sse")
    with anyio.fail_after(CONNECT_TIMEOUT):
        async with Client(sse_client(everything_sse_url), mode="legacy") as client:
            assert await _tool_names(client) >= EVERYTHING_TOOLS


@pytest.mark.anyio
async def test_time_server_stdio(tmp_path: Path) -> None:
    command, args = time_server_command()
    names = await _stdio_tool_names(command, args, tmp_path / "time-stdio.log")
    assert "get_current_time" in names


# The helpers' failure paths: a broken server must fail fast with its log, and never linger.


def test_run_http_server_reports_early_exit(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import sys; print('boom-marker', file=sys.stderr); sys.exit(3)"]
    with (
        pytest.raises(ServerStartError, match=r"(?s)ended \(exit code 3\).*boom-marker"),
        run_http_server(cmd, free_port(), None, "/mcp", tmp_path / "exit.log"),
    ):
        pytest.fail("server that exits must not yield")


def test_run_http_server_deadline_kills_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    # The leader spawns a grandchild that would outlive a plain proc.kill().
    script = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "print('waiting-marker', flush=True); time.sleep(60)\n"
    )
    with (
        pytest.raises(ServerStartError, match=r"(?s)did not open port.*waiting-marker"),
        run_http_server(
            [sys.executable, "-c", script],
            free_port(),
            None,
            "",
            tmp_path / "slow.log",
            timeout=1.5,
        ),
    ):
        pytest.fail("server that never listens must not yield")
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), "grandchild survived teardown"
