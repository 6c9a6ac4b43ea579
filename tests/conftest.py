"""Shared fixtures. Server start/stop logic lives in tests/support/servers.py (importable)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

# `.venv/bin/pytest` (unlike `python -m pytest`) does not put the repo root on sys.path, and
# tests/ has no __init__.py; this makes `from tests.support.servers import ...` work either way.
if str(Path(__file__).resolve().parent.parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.config.settings import Settings
from agent.tools.registry import ToolRegistry
from tests.support.hermetic import agent_settings, home_env, kept_caches
from tests.support.servers import everything_server


@pytest.fixture(autouse=True)
def own_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own HOME and XDG folders, and none of the developer's agent settings
    (tests/support/hermetic.py says why), set in os.environ: in-process runs read them and
    every helper that starts the agent copies them. Its own temp folder, not `tmp_path`,
    which tests fill as they like (a `tmp_path / "home"` of their own among them)."""
    home = tmp_path_factory.mktemp("home")
    for name in agent_settings(os.environ):
        monkeypatch.delenv(name)
    for name, value in (kept_caches(os.environ) | home_env(home)).items():
        monkeypatch.setenv(name, value)
    return home


@pytest.fixture
def anyio_backend() -> str:
    """Only asyncio: the product runs on asyncio and trio is not installed."""
    return "asyncio"


@pytest.fixture
def registry_options() -> dict[str, Any]:
    """Keyword arguments of the `registry` fixture's ToolRegistry; a module overrides it."""
    return {}


@pytest.fixture
async def registry(
    registry_settings: Settings, registry_options: dict[str, Any]
) -> AsyncIterator[ToolRegistry]:
    """A ToolRegistry over the servers of the module's `registry_settings` fixture, each one
    connected: a server that fails to connect fails the test before it starts."""
    async with ToolRegistry(registry_settings, **registry_options) as reg:
        with anyio.fail_after(60):
            assert await reg.connect_all() == []
        yield reg


# Module scope: one node process per test module per xdist worker (each on its own free port),
# instead of a ~0.3 s start per test; modules that need a pristine server can use
# tests.support.servers.everything_server directly.
@pytest.fixture(scope="module")
def everything_http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Streamable-HTTP endpoint of a running server-everything, e.g. http://127.0.0.1:P/mcp."""
    with everything_server("http", tmp_path_factory.mktemp("everything-http")) as url:
        yield url


@pytest.fixture(scope="module")
def everything_sse_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Legacy SSE endpoint of a running server-everything, e.g. http://127.0.0.1:P/sse."""
    with everything_server("sse", tmp_path_factory.mktemp("everything-sse")) as url:
        yield url
