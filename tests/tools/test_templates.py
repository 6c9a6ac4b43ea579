"""Resource templates reach the model: read_resource names server-everything's URI
templates, and a URI the model makes from one is read end to end."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from agent.common.memory import Memory
from agent.config.settings import Settings
from agent.loop.events import ToolCallFinished
from agent.loop.react import Agent
from agent.tools.catalog import READ_RESOURCE, Catalog
from agent.tools.registry import ToolRegistry
from tests.support.fake_model import FakeModel, answer, calls
from tests.support.servers import everything_stdio_command, stdio

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def everything_catalog(tmp_path: Path) -> AsyncIterator[tuple[ToolRegistry, Catalog]]:
    """server-everything as `main`, connected, and a catalog that has listed its resources."""
    server = stdio("main", everything_stdio_command())
    settings = Settings(servers=(server,), state_dir=tmp_path / "state")
    async with ToolRegistry(settings) as registry:
        assert await registry.connect_all() == []
        catalog = Catalog(registry)
        await catalog.refresh()
        yield registry, catalog


async def test_the_model_fills_a_template_and_reads_it(tmp_path: Path) -> None:
    async with everything_catalog(tmp_path) as (registry, catalog):
        uri = "demo://resource/dynamic/text/7"
        model = FakeModel([calls((READ_RESOURCE, {"server": "main", "uri": uri})), answer("ok")])
        agent = Agent(model, registry, Memory(), agent_tools=catalog.agent_tools)
        with anyio.fail_after(30):
            events = [e async for e in agent.run("read resource 7")]
    offered = next(t for t in model.tools_seen[0] if t["function"]["name"] == READ_RESOURCE)
    assert "main:demo://resource/dynamic/text/{resourceId}" in offered["function"]["description"]
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert not finished.is_error and "7" in finished.output
    model.assert_complete()


async def test_an_attached_resource_that_updates_is_read_again_for_the_next_request(
    tmp_path: Path,
) -> None:
    async with everything_catalog(tmp_path) as (registry, catalog):
        uri = "demo://resource/static/document/features.md"
        first, problems = await catalog.expand_refs(f"summarise @main:{uri}")
        assert problems == [] and f"resource {uri}:" in first
        assert ("main", uri) in catalog.attached
        await registry.call("main__toggle-subscriber-updates", {})  # every 5 s from now
        with anyio.fail_after(30):
            while not catalog.changed:  # noqa: ASYNC110 -- the server's own timer
                await anyio.sleep(0.1)
        later, _ = await catalog.expand_refs("and what changed?")
        await registry.call("main__toggle-subscriber-updates", {})
    assert f"resource {uri} (updated since):" in later
    assert later.startswith("and what changed?")
