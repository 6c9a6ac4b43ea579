"""Sampling with tools end to end: a real server's createMessage carries its tools and a
tool choice; our (scripted) model calls the tool; the server gets tool_use content, runs it,
and asks again with the tool_result."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.config.settings import ServerConfig, Settings
from agent.model.llm import OpenAIModel
from agent.tools.registry import ToolRegistry
from agent.tools.results import strip_marker
from agent.tools.server_requests import SamplingRequest, ServerRequests
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import SUPPORT

pytestmark = pytest.mark.anyio
SERVER = str(SUPPORT / "sampling_server.py")


async def test_the_servers_tools_reach_our_model_and_tool_use_goes_back(tmp_path: Path) -> None:
    script = [tool_calls(("get_weather", {"city": "Paris"})), text("Pack sunglasses.")]
    with ScriptedLLM(*script) as llm:
        model = OpenAIModel(base_url=llm.base_url, api_key="sk-test", model="scripted")
        requests = ServerRequests(model, auto_approve=True)
        server = ServerConfig(name="s", type="stdio", command=sys.executable, args=(SERVER,))
        settings = Settings(servers=(server,), state_dir=tmp_path / "state")
        try:
            async with ToolRegistry(settings, callbacks=requests.callbacks) as registry:
                assert await registry.connect_all() == []
                with anyio.fail_after(30):
                    observation = await registry.call("s__plan_trip", {"city": "Paris"})
        finally:
            await model.aclose()
    assert not observation.is_error, observation.text
    result = json.loads(strip_marker(observation.text))
    assert result == {
        "tool": "get.weather",
        "input": {"city": "Paris"},
        "answer": "Pack sunglasses.",
    }
    first, second = llm.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert first["tool_choice"] == "required"
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": second["messages"][-2]["tool_calls"][0]["id"],
        "content": "sunny in Paris",
    }
    llm.assert_complete()


async def _plan_with_many_tools(tmp_path: Path, requests: ServerRequests) -> str:
    server = ServerConfig(name="s", type="stdio", command=sys.executable, args=(SERVER,))
    settings = Settings(servers=(server,), state_dir=tmp_path / "state")
    async with ToolRegistry(settings, callbacks=requests.callbacks) as registry:
        assert await registry.connect_all() == []
        with anyio.fail_after(30):
            observation = await registry.call("s__plan_with_many_tools", {"city": "Oslo"})
    return strip_marker(observation.text)


async def test_the_servers_tools_count_against_the_sampling_prompt_limit(tmp_path: Path) -> None:
    """Under --yes a short prompt with 100 tools of 20 KB is a 2 MB request: refused."""
    with ScriptedLLM() as llm:
        model = OpenAIModel(base_url=llm.base_url, api_key="sk-test", model="scripted")
        try:
            said = await _plan_with_many_tools(tmp_path, ServerRequests(model, auto_approve=True))
        finally:
            await model.aclose()
    assert said.startswith("refused: sampling prompt too large: about 5")
    assert "100 tool declarations included" in said and "at most 16,000 tokens" in said
    assert llm.requests == []  # nothing reached the model


class Recording:
    """The person asked: records the question, says no."""

    def __init__(self) -> None:
        self.asked: list[SamplingRequest] = []

    async def approve_sampling(self, request: SamplingRequest) -> bool:
        self.asked.append(request)
        return False

    async def elicit_form(self, server: str, message: str, schema: dict[str, Any]) -> Any:
        raise AssertionError("not asked here")

    async def elicit_url(self, server: str, message: str, url: str) -> Any:
        raise AssertionError("not asked here")


async def test_the_question_shows_the_estimate_with_the_tools(tmp_path: Path) -> None:
    with ScriptedLLM() as llm:
        model = OpenAIModel(base_url=llm.base_url, api_key="sk-test", model="scripted")
        person = Recording()
        requests = ServerRequests(model, ui=person, max_prompt_tokens=10_000_000)
        try:
            said = await _plan_with_many_tools(tmp_path, requests)
        finally:
            await model.aclose()
    assert "declined" in said
    (asked,) = person.asked
    assert asked.tool_count == 100
    assert asked.prompt_chars > 100 * 20_000 and asked.prompt_tokens > 500_000
