"""Stdio servers started before the heavy imports are adopted by their connections."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from agent.tools.prestart import prestart
from agent.tools.registry import ToolRegistry
from tests.support.servers import SUPPORT, settings_for, stdio

pytestmark = pytest.mark.anyio
MANY_SERVER = str(SUPPORT / "many_tools_server.py")


async def test_the_connection_adopts_the_prestarted_server(tmp_path: Path) -> None:
    server = stdio("many", (sys.executable, [MANY_SERVER, "5"]))
    settings = settings_for(tmp_path, server)
    started = prestart(settings.servers, os.environ)
    popen = started.waiting["many"].popen
    try:
        with anyio.fail_after(30):
            async with ToolRegistry(settings, prestarts=started) as registry:
                assert started.waiting == {}  # handed to the connection
                assert await registry.connect_all() == []
                first = await registry.call("many__get_issue", {"id": "1"})
                assert popen.poll() is None
        assert f"by pid {popen.pid}" in first.text  # the very process started early
        assert popen.poll() is not None  # and closed with the registry
        log = (tmp_path / "state" / "logs" / "many.log").read_text()
        assert "tools/list page 1" in log  # its stderr still reaches the log
    finally:
        started.close()


async def test_a_reconnect_spawns_afresh(tmp_path: Path) -> None:
    server = stdio("many", (sys.executable, [MANY_SERVER, "5"]))
    settings = settings_for(tmp_path, server)
    started = prestart(settings.servers, os.environ)
    popen = started.waiting["many"].popen
    with anyio.fail_after(30):
        async with ToolRegistry(settings, prestarts=started) as registry:
            assert await registry.connect_all() == []
            popen.kill()  # the adopted server dies; the next call reconnects
            await anyio.to_thread.run_sync(popen.wait)
            text = ""
            for _ in range(3):  # the first call may see the death, a later one reconnects
                text = (await registry.call("many__get_issue", {"id": "2"})).text
                if "by pid" in text:
                    break
    assert "by pid" in text and f"by pid {popen.pid}" not in text


def test_servers_no_run_took_are_stopped(tmp_path: Path) -> None:
    server = stdio("many", (sys.executable, [MANY_SERVER, "5"]))
    missing = stdio("nope", ("/nonexistent/server", []))
    started = prestart(settings_for(tmp_path, server, missing).servers, os.environ)
    assert list(started.waiting) == ["many"]  # a command that cannot start is left to connect
    popen = started.waiting["many"].popen
    started.close()
    assert popen.poll() is not None and started.waiting == {}
