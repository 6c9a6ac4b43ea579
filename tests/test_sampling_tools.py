"""Sampling with tools end to end: a real server's createMessage carries its tools and a
tool choice; our (scripted) model calls the tool; the server gets tool_use content, runs it,
and asks again with the tool_result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from agent.config import ServerConfig, Settings
from agent.llm import OpenAIModel
from agent.server_requests import ServerRequests
from agent.tools.registry import ToolRegistry
from agent.tools.results import strip_marker
from tests.fake_llm import ScriptedLLM, text, tool_calls

pytestmark = pytest.mark.anyio
SERVER = str(Path(__file__).with_name("sampling_server.py"))


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
