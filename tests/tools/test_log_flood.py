"""A log flood during one call: every message reaches the server's log file (written in
blocks, redacted), and -v shows a burst in a few prints rather than one per line."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from agent.config.settings import ServerConfig, Settings
from agent.tools.registry import ToolRegistry
from agent.ui.render import LOG_BATCH, LogLines
from tests.support.servers import REPO_ROOT

pytestmark = pytest.mark.anyio
FLOOD = str(REPO_ROOT / "bench" / "flood_server.py")


async def test_a_flood_is_logged_whole_and_shown_in_batches(tmp_path: Path) -> None:
    server = ServerConfig(name="flood", type="stdio", command=sys.executable, args=(FLOOD,))
    settings = Settings(servers=(server,), state_dir=tmp_path / "state")
    out = io.StringIO()
    prints: list[object] = []
    console = Console(file=out, width=200)
    original = console.print

    def recording(*a: Any, **k: Any) -> None:
        prints.append(a)
        original(*a, **k)

    console.print = recording  # type: ignore[method-assign]
    logs = LogLines(console, interval=3600)  # one burst: the first line, then the rest
    async with ToolRegistry(settings) as registry:
        assert await registry.connect_all() == []
        registry.log_listener = logs.add
        with anyio.fail_after(60):
            observation = await registry.call("flood__flood", {"n": 3000})
        log = await anyio.Path(tmp_path / "state" / "logs" / "flood.log").read_text()
    logs.flush()
    assert "sent 3000 log messages" in observation.text
    assert log.count("log line ") == 3000  # on disk when the call returns
    assert len(prints) == 2  # the first line at once, the burst in one print
    assert out.getvalue().count("log line ") == 1 + LOG_BATCH
    assert f"{3000 - 1 - LOG_BATCH} more log lines" in out.getvalue()
