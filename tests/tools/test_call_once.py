"""A tool call runs at most once, and only the transport says a connection is gone.

Real servers: the hand-written stdio server in tests/support/raw_server.py (which counts the runs
of its tool in a file) and the bundled server over streamable HTTP, restarted on its port.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.config.settings import ServerConfig
from agent.tools.base import MAX_RESTARTS
from agent.tools.registry import ToolRegistry
from tests.support.servers import SUPPORT, free_port, http_server_on, settings_for, stdio

pytestmark = pytest.mark.anyio

RAW_SERVER = str(SUPPORT / "raw_server.py")


def raw(mode: str, runs: Path, **kw: object) -> ServerConfig:
    return stdio(
        "raw", (sys.executable, [RAW_SERVER, mode]), env={"RAW_SERVER_RUNS": str(runs)}, **kw
    )


def runs_of(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@contextlib.asynccontextmanager
async def raw_ready_throughout(tmp_path: Path, server: ServerConfig) -> AsyncIterator[ToolRegistry]:
    """A registry with the raw server connected (all within a minute); on leaving, the server
    must still be ready and never restarted: a tool's error reply is its answer, not a lost
    connection."""
    with anyio.fail_after(60):
        async with ToolRegistry(settings_for(tmp_path, server)) as registry:
            assert await registry.connect_all() == []
            yield registry
            status = registry.servers["raw"].status
            assert status.state == "ready" and status.restarts == 0, status


async def test_an_error_that_mentions_a_session_is_the_tools_answer_not_a_lost_session(
    tmp_path: Path,
) -> None:
    """`charge card $100` must not run twice because its error says "session … not found"."""
    runs = tmp_path / "runs"
    async with raw_ready_throughout(tmp_path, raw("sessionerror", runs)) as registry:
        obs = await registry.call("raw__echo", {"card": "4242", "amount": 100})
        assert obs.is_error and "checkout session 42 not found" in obs.text, obs.text
        assert len(runs_of(runs)) == 1


async def test_error_code_32000_from_a_tool_neither_restarts_nor_downs_its_server(
    tmp_path: Path,
) -> None:
    """-32000 is the SDK's code for a closed connection, but a server may send it too."""
    runs = tmp_path / "runs"
    calls = MAX_RESTARTS + 3  # more than it takes to mark a dying server down
    async with raw_ready_throughout(tmp_path, raw("closederror", runs)) as registry:
        for _ in range(calls):
            obs = await registry.call("raw__echo", {})
            assert obs.is_error and "Connection closed" in obs.text, obs.text
            assert "stopped" not in obs.text, obs.text
        pids = runs_of(runs)
        assert len(pids) == calls and len(set(pids)) == 1  # one process ran them all


@pytest.mark.parametrize(
    ("mode", "reason"),
    [("surrogate", "hex escape"), ("deep", "recursion limit")],
)
async def test_a_reply_the_sdk_cannot_parse_fails_its_call_at_once(
    mode: str, reason: str, tmp_path: Path
) -> None:
    """Not after tool_timeout: fail_after is far below it."""
    runs = tmp_path / "runs"
    server = raw(mode, runs, tool_timeout=600)
    async with raw_ready_throughout(tmp_path, server) as registry:
        for _ in range(2):  # and the connection stays usable
            obs = await registry.call("raw__echo", {})
            assert obs.is_error and "could not be parsed" in obs.text, obs.text
            assert reason in obs.text, obs.text
        assert len(runs_of(runs)) == 2


@contextlib.asynccontextmanager
async def connected_then_stopped(
    tmp_path: Path, port: int, tool: str, arguments: dict[str, Any]
) -> AsyncIterator[ToolRegistry]:
    """The bundled server over HTTP on `port` as `net`, connected and `tool` called once, then
    stopped: the registry is yielded still holding a session of a server that is gone (a
    test starts the next one on the same port, logging to 2.log)."""
    with contextlib.ExitStack() as first:
        url = first.enter_context(
            http_server_on("bundled-http", port, tmp_path, tmp_path / "1.log")
        )
        server = ServerConfig(name="net", type="http", url=url)
        async with ToolRegistry(settings_for(tmp_path, server)) as registry:
            with anyio.fail_after(30):
                assert await registry.connect_all() == []
                assert not (await registry.call(tool, arguments)).is_error
            first.close()  # the server stops ...
            yield registry


async def test_http_server_restarted_between_calls_runs_the_next_call_once(
    tmp_path: Path,
) -> None:
    """The restarted server answers our old session with 404: it ran nothing, so the call
    is sent again on a new session, and runs exactly once."""
    port = free_port()
    ran = tmp_path / "ran"
    command = {"command": f"echo run >> {ran}"}
    async with connected_then_stopped(tmp_path, port, "net__bash", command) as registry:
        with http_server_on("bundled-http", port, tmp_path, tmp_path / "2.log"):
            with anyio.fail_after(30):
                obs = await registry.call("net__bash", command)
            assert not obs.is_error, obs.text
            assert ran.read_text().split() == ["run", "run"]
            status = registry.servers["net"].status
            assert status.state == "ready" and status.restarts == 1, status


async def test_http_server_that_is_gone_at_a_call_is_reconnected_once_it_is_back(
    tmp_path: Path,
) -> None:
    """A POST that cannot connect takes the SDK's whole transport down: that is the
    transport's word that the connection is gone (no error code is)."""
    port = free_port()
    async with connected_then_stopped(tmp_path, port, "net__list_dir", {}) as registry:
        with anyio.fail_after(30):  # the server is still gone at this call
            obs = await registry.call("net__list_dir", {})
        assert obs.is_error and "stopped while running" in obs.text, obs.text
        with http_server_on("bundled-http", port, tmp_path, tmp_path / "2.log"):
            with anyio.fail_after(30):
                obs = await registry.call("net__list_dir", {})
            assert not obs.is_error, obs.text
            status = registry.servers["net"].status
            assert status.state == "ready" and status.restarts == 1, status
