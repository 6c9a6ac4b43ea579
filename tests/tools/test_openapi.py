"""OpenAPI tool servers end to end through real mcpo wrapping mcp-server-time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.common.errors import ToolServerError
from agent.config.settings import ServerConfig, Settings
from agent.tools.registry import ToolRegistry
from agent.tools.results import Observation
from tests.support.servers import mcpo_time_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
def mcpo_url(tmp_path_factory: pytest.TempPathFactory):
    with mcpo_time_server("topsecret", tmp_path_factory.mktemp("mcpo")) as url:
        yield url


async def call_time(
    url: str, tmp_path: Path, **auth: object
) -> tuple[list[ToolServerError], dict[str, Any], Observation]:
    config = ServerConfig(name="timeapi", type="openapi", url=url, **auth)  # type: ignore[arg-type]
    settings = Settings(servers=(config,), state_dir=tmp_path)
    with anyio.fail_after(30):
        async with ToolRegistry(settings) as registry:
            failures = await registry.connect_all()
            obs = await registry.call("timeapi__get_current_time", {"timezone": "Europe/Paris"})
            return failures, dict(registry.tools), obs


async def test_right_key_runs_the_tool(mcpo_url: str, tmp_path: Path) -> None:
    failures, tools, obs = await call_time(mcpo_url, tmp_path, key="topsecret", auth_type="bearer")
    assert failures == []
    assert set(tools) == {"timeapi__get_current_time", "timeapi__convert_time"}
    schema = tools["timeapi__get_current_time"].input_schema
    assert schema["required"] == ["timezone"] and "$ref" not in str(schema)
    assert not obs.is_error and '"timezone": "Europe/Paris"' in obs.text


async def test_header_auth_works_too(mcpo_url: str, tmp_path: Path) -> None:
    _, _, obs = await call_time(mcpo_url, tmp_path, headers={"Authorization": "Bearer topsecret"})
    assert not obs.is_error


async def test_wrong_key_is_a_clear_403(mcpo_url: str, tmp_path: Path) -> None:
    _, _, obs = await call_time(mcpo_url, tmp_path, key="wrong", auth_type="bearer")
    assert obs.is_error and "HTTP 403" in obs.text and "key was rejected" in obs.text


async def test_missing_key_is_a_clear_401(mcpo_url: str, tmp_path: Path) -> None:
    _, _, obs = await call_time(mcpo_url, tmp_path)
    assert obs.is_error and "HTTP 401" in obs.text and "authentication required" in obs.text


async def test_bad_arguments_are_a_422_observation(mcpo_url: str, tmp_path: Path) -> None:
    config = ServerConfig(name="t", type="openapi", url=mcpo_url, key="topsecret")
    async with ToolRegistry(Settings(servers=(config,), state_dir=tmp_path)) as registry:
        await registry.connect_all()
        obs = await registry.call("t__get_current_time", {})
    assert obs.is_error and "HTTP 422" in obs.text and "timezone" in obs.text


async def test_not_an_openapi_server_fails_at_connect(
    tmp_path: Path, everything_http_url: str
) -> None:
    base = everything_http_url.rsplit("/", 1)[0]
    config = ServerConfig(name="nope", type="openapi", url=base)
    async with ToolRegistry(Settings(servers=(config,), state_dir=tmp_path)) as registry:
        failures = await registry.connect_all()
    assert [f.server for f in failures] == ["nope"] and "openapi.json" in failures[0].cause
