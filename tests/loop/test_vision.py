"""Images from tools reach vision models: server-everything's get-tiny-image, the real
OpenAI client, the scripted endpoint. With `vision = auto` an endpoint that refuses image
parts gets text placeholders from then on, after one notice; the run still answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.common.memory import Memory
from agent.config.settings import ServerConfig, Settings
from agent.loop.events import Event, Notice, RunFinished
from agent.loop.react import Agent
from agent.loop.vision import REJECTED_NOTICE, Vision
from agent.model.llm import OpenAIModel
from agent.tools.registry import ToolRegistry
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import everything_stdio_command

pytestmark = pytest.mark.anyio
TINY: tuple[str, dict[str, Any]] = ("main__get-tiny-image", {})


@pytest.fixture
def registry_settings(tmp_path: Path) -> Settings:
    command, args = everything_stdio_command()
    server = ServerConfig(name="main", type="stdio", command=command, args=tuple(args))
    return Settings(servers=(server,), state_dir=tmp_path / "state")


async def run(registry: ToolRegistry, llm: ScriptedLLM, vision: Vision) -> list[Event]:
    model = OpenAIModel(base_url=llm.base_url, api_key="sk-test", model="scripted")
    agent = Agent(model, registry, Memory(), vision=vision)
    try:
        with anyio.fail_after(30):
            return [event async for event in agent.run("show me the image")]
    finally:
        await model.aclose()


def image_parts(request: dict[str, Any]) -> list[str]:
    return [
        part["image_url"]["url"]
        for message in request["messages"]
        if isinstance(message["content"], list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


async def test_a_tool_image_reaches_the_next_request_as_an_image_part(
    registry: ToolRegistry,
) -> None:
    with ScriptedLLM(tool_calls(TINY), text("a tiny image")) as llm:
        events = await run(registry, llm, "auto")
    assert isinstance(events[-1], RunFinished) and events[-1].status == "answered"
    assert image_parts(llm.requests[0]) == []
    urls = image_parts(llm.requests[1])
    assert len(urls) == 1 and urls[0].startswith("data:image/png;base64,iVBOR")
    roles = [m["role"] for m in llm.requests[1]["messages"]]
    assert roles[-2:] == ["tool", "user"]  # the images follow the tool results
    assert "[image image/png" in llm.requests[1]["messages"][-2]["content"]
    llm.assert_complete()


async def test_an_endpoint_refusing_images_gets_placeholders_after_one_notice(
    registry: ToolRegistry,
) -> None:
    script = [tool_calls(TINY), tool_calls(TINY), text("described in words")]
    with ScriptedLLM(*script) as llm:
        llm.reject_images = True
        events = await run(registry, llm, "auto")
    assert isinstance(events[-1], RunFinished) and events[-1].status == "answered"
    notices = [e for e in events if isinstance(e, Notice) and e.message == REJECTED_NOTICE]
    assert len(notices) == 1
    assert len(llm.requests) == 4  # call, refused (with the image), re-sent, call again...
    assert image_parts(llm.requests[1]) and not image_parts(llm.requests[2])
    assert not image_parts(llm.requests[3])  # the second image was never sent
    assert "[image image/png" in llm.requests[3]["messages"][-1]["content"]
    llm.assert_complete()


async def test_vision_off_sends_only_the_placeholder(registry: ToolRegistry) -> None:
    with ScriptedLLM(tool_calls(TINY), text("ok")) as llm:
        await run(registry, llm, "off")
    assert image_parts(llm.requests[1]) == []
    assert "[image image/png" in llm.requests[1]["messages"][-1]["content"]
    llm.assert_complete()


def test_images_stay_with_their_tool_results_and_cost_what_their_size_costs() -> None:
    import base64
    import struct

    from agent.common.images import MAX_IMAGE_TOKENS
    from agent.common.memory import estimate_tokens
    from agent.loop.vision import image_message
    from agent.tools.results import Image

    memory = Memory()
    memory.add_user("look")
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    memory.add_assistant("", [call])
    memory.add_tool_result("c1", "[image image/png, 1.0 MB]")
    message = image_message([("srv", Image("image/png", "A" * 1_400_000))])
    assert message is not None
    memory.add_images(message)
    memory.add_user("and now?")
    assert [len(u) for u in memory.units()] == [1, 3, 1]  # assistant + tool + its images
    # A size that cannot be read counts as the most one image can cost, not 350k tokens.
    assert MAX_IMAGE_TOKENS <= estimate_tokens(message) < MAX_IMAGE_TOKENS + 100
    # A 512 x 512 PNG is one tile: 85 + 170 tokens, as OpenAI counts it.
    head = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + struct.pack(">II", 512, 512)
    png = base64.b64encode(head + b"\x08\x02\x00\x00\x00" + b"\x00" * 64).decode()
    small = image_message([("srv", Image("image/png", png))])
    assert small is not None and 255 <= estimate_tokens(small) < 255 + 100
