"""Servers that change what they offer while the agent runs, on both protocol eras.

A tool call that makes its server add a tool, prompt or resource is followed at once by
the next model request: that request must already carry the change (the registry settles
announced re-listings before the tool list is read), not wait out the debounce.
"""

from __future__ import annotations

import sys
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
from tests.support.servers import SUPPORT, settings_for, stdio

DYNAMIC = (sys.executable, [str(SUPPORT / "dynamic_server.py")])
MODES = ["legacy", "auto"]  # 2025-11-25 handshake; 2026-07-28 (subscriptions/listen)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=MODES)
def registry_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    return settings_for(tmp_path, stdio("dyn", DYNAMIC, mode=request.param))


def names(tools: list[dict]) -> set[str]:
    return {tool["function"]["name"] for tool in tools}


async def run(agent: Agent, request: str) -> list[ToolCallFinished]:
    finished: list[ToolCallFinished] = []
    with anyio.fail_after(30):
        async for event in agent.run(request):
            if isinstance(event, ToolCallFinished):
                finished.append(event)
    return finished


async def test_a_tool_added_by_a_call_is_offered_in_the_very_next_request(
    registry: ToolRegistry,
) -> None:
    model = FakeModel(
        [calls(("dyn__add_tool", {})), calls(("dyn__dynamic_tool", {})), answer("done")]
    )
    agent = Agent(model, registry, Memory())
    finished = await run(agent, "add a tool and use it")
    assert "dyn__dynamic_tool" not in names(model.tools_seen[0])
    assert "dyn__dynamic_tool" in names(model.tools_seen[1])
    assert [f.is_error for f in finished] == [False, False]
    assert "new!" in finished[1].output
    model.assert_complete()


async def test_prompts_and_resources_published_later_reach_the_catalog_and_the_model(
    registry: ToolRegistry,
) -> None:
    catalog = Catalog(registry)
    await catalog.refresh()
    assert [p.name for _, p in catalog.prompts] == ["early"]
    assert not catalog.has_resources
    read_late = calls((READ_RESOURCE, {"server": "dyn", "uri": "late://doc"}))
    model = FakeModel([calls(("dyn__add_things", {})), read_late, answer("done")])
    agent = Agent(model, registry, Memory(), agent_tools=catalog.agent_tools)
    finished = await run(agent, "publish things")
    assert READ_RESOURCE not in names(model.tools_seen[0])
    assert READ_RESOURCE in names(model.tools_seen[1])  # offered once there is a resource
    assert "LATE DOC BODY" in finished[1].output and not finished[1].is_error
    assert isinstance(catalog.find_prompt("fresh"), tuple)
    assert catalog.refs() == ["dyn:late://doc"]
    model.assert_complete()


async def test_server_log_messages_arrive_on_both_protocols(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """2026-07-28 servers log only to requests that opt in; the connection opts in."""
    lines: list[tuple[str, str]] = []
    registry.log_listener = lambda server, line: lines.append((server, line))
    observation = await registry.call("dyn__say", {"text": "hello from the server"})
    assert "said" in observation.text
    with anyio.fail_after(10):
        while not lines:  # noqa: ASYNC110 -- the log notification precedes the result
            await anyio.sleep(0.02)
    assert lines == [("dyn", "[info] hello from the server")]
    log_path = tmp_path / "state" / "logs" / "dyn.log"
    assert "[info] hello from the server" in log_path.read_text()
    assert log_path.stat().st_mode & 0o777 == 0o600  # private, like the transcripts
    assert log_path.parent.stat().st_mode & 0o777 == 0o700


async def test_a_server_too_slow_to_list_keeps_what_it_listed_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent.tools.catalog.LIST_TIMEOUT", 0.5)
    raw = stdio("raw", (sys.executable, [str(SUPPORT / "raw_server.py"), "slowprompts"]))
    async with ToolRegistry(settings_for(tmp_path, raw)) as registry:
        with anyio.fail_after(30):
            assert await registry.connect_all() == []
            catalog = Catalog(registry)
            await catalog.refresh()
            assert [p.name for _, p in catalog.prompts] == ["p1"] and catalog.errors == {}
            await catalog.refresh()  # this time the server never answers
    assert [p.name for _, p in catalog.prompts] == ["p1"]
    assert "no answer within 0.5 s" in catalog.errors["raw"]


async def test_a_server_that_never_answers_its_relisting_stalls_one_step_only(
    tmp_path: Path,
) -> None:
    raw_server = str(SUPPORT / "raw_server.py")
    raw = stdio("raw", (sys.executable, [raw_server, "stuckrelist"]), timeout=30)
    async with ToolRegistry(settings_for(tmp_path, raw)) as registry:
        with anyio.fail_after(30):
            assert await registry.connect_all() == []
            assert not (await registry.call("raw__echo", {})).is_error  # announces a change
            await anyio.sleep(0.1)  # the notification follows the result
            started = anyio.current_time()
            await registry.settle(timeout=0.5)
            assert anyio.current_time() - started >= 0.5  # waited for it once...
            started = anyio.current_time()
            await registry.settle(timeout=0.5)
            assert anyio.current_time() - started < 0.2  # ...and not again
            assert "raw__echo" in registry.tools  # the old list stands
