"""Servers that implement part of MCP are whole citizens: each kind (tools, resources,
templates, prompts) is listed on its own, only when declared, through every page; a missing
method is no warning, and one malformed tool is skipped by name while the rest are offered.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from agent.config.settings import Settings
from agent.tools.catalog import Catalog
from agent.tools.registry import ToolRegistry
from tests.support.servers import SUPPORT, settings_for, stdio

RAW = (sys.executable, [str(SUPPORT / "raw_server.py"), "partial"])

pytestmark = pytest.mark.anyio


@pytest.fixture
def registry_settings(tmp_path: Path) -> Settings:
    return settings_for(tmp_path, stdio("part", RAW))


async def test_one_malformed_tool_is_skipped_by_name_and_every_page_is_read(
    registry: ToolRegistry,
) -> None:
    assert sorted(registry.tools) == ["part__first", "part__second"]
    assert len(registry.warnings) == 1
    assert "skipped tool 'broken'" in registry.warnings[0]
    observation = await registry.call("part__second", {})
    assert not observation.is_error and "ok" in observation.text


async def test_resources_without_templates_or_prompts_are_listed_and_read_quietly(
    registry: ToolRegistry,
) -> None:
    catalog = Catalog(registry)
    await catalog.refresh()
    assert catalog.errors == {}  # -32601 for templates is not a problem worth a word
    assert [str(r.uri) for _, r in catalog.resources] == ["memo://one", "memo://two"]
    assert catalog.templates == [] and catalog.prompts == []
    assert "read_resource" in catalog.agent_tools()
    assert await catalog.read("part", "memo://two") == "text of memo://two"
    log = await anyio.Path(registry.servers["part"].status.log_path or "").read_text()
    assert "asked resources/templates/list" in log
    assert "asked prompts/list" not in log  # not declared: not asked
