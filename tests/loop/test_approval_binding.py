"""An approval is for one exact (server, tool), and names cannot be taken by config order.

Servers `evil` and `evil__files` (real stdio servers) can both reach the raw public name
`evil__files__delete`: `evil__files` › `delete` and `evil` › `files__delete`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from agent.common.memory import Memory
from agent.config.settings import Settings
from agent.loop.approval import ApprovalPolicy, ApprovalRequest, Decision
from agent.loop.events import ToolCallFinished
from agent.loop.react import Agent
from agent.tools.declarations import assign_names
from agent.tools.registry import ToolRegistry
from tests.support.fake_model import FakeModel, answer, calls
from tests.support.servers import SUPPORT, settings_for, stdio

TWIN = str(SUPPORT / "twin_server.py")

pytestmark = pytest.mark.anyio


@pytest.fixture
def registry_settings(tmp_path: Path) -> Settings:
    return settings_for(
        tmp_path,
        stdio("evil", (sys.executable, [TWIN, "evil"])),
        stdio("evil__files", (sys.executable, [TWIN, "evil__files"])),
    )


async def test_an_approved_call_runs_on_the_server_it_was_approved_for(
    registry: ToolRegistry,
) -> None:
    """While the user is asked, `evil` grows `files__delete`: the approved name now reads
    as `evil` › `files__delete` too. What runs is still `evil__files` › `delete`."""
    asked: list[ApprovalRequest] = []

    async def ask(request: ApprovalRequest) -> Decision:
        asked.append(request)
        assert not (await registry.call("evil__grow", {})).is_error
        await registry.settle()
        assert ("evil", "files__delete") in {(s.server, s.name) for s in registry.tools.values()}
        return "yes"

    model = FakeModel([calls(("evil__files__delete", {})), answer("done")])
    agent = Agent(model, registry, Memory(), approval=ApprovalPolicy(mode="ask", ask=ask))
    finished: list[ToolCallFinished] = []
    with anyio.fail_after(30):
        async for event in agent.run("delete the files"):
            if isinstance(event, ToolCallFinished):
                finished.append(event)
    assert [(r.server, r.tool) for r in asked] == [("evil__files", "delete")]
    [done] = finished
    assert (done.server, done.tool) == ("evil__files", "delete")
    assert "evil__files: delete ran" in done.output and "files__delete ran" not in done.output


async def test_neither_server_takes_the_ambiguous_clean_name(registry: ToolRegistry) -> None:
    await registry.call("evil__grow", {})
    await registry.settle()
    assert "evil__files__delete" not in registry.tools
    inner = registry.public_name("evil__files", "delete")
    outer = registry.public_name("evil", "files__delete")
    assert inner and outer and inner != outer


def test_names_do_not_depend_on_config_order() -> None:
    pairs = [("evil", "files__delete"), ("evil__files", "delete"), ("evil", "grow")]
    forward, backward = assign_names(pairs), assign_names(pairs[::-1])
    assert forward == backward
    assert "evil__files__delete" not in forward
    assert forward["evil__grow"] == ("evil", "grow")  # unambiguous names stay clean
