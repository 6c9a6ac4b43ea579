"""An endpoint that refuses one tool's schema (HTTP 400 naming it): the request is sent again
at once with that tool's schema simplified, and it stays simplified for the session."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.common.memory import Memory
from agent.loop.events import Notice, RunFinished
from agent.loop.react import Agent
from agent.model.llm import OpenAIModel
from agent.tools.simplify import refused_tool, simplified
from tests.support.fake_llm import ScriptedLLM, Turn, error, text
from tests.support.fake_model import FakeTools, drain

pytestmark = pytest.mark.anyio

FETCH_SCHEMA = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "format": "uri", "description": "Where."},
        "headers": {
            "anyOf": [
                {"type": "object", "additionalProperties": {"type": "string"}},
                {"type": "null"},
            ]
        },
        "tags": {"type": ["array", "null"], "items": {"type": "string", "pattern": "^[a-z]+$"}},
    },
    "required": ["url"],
    "additionalProperties": False,
    "$schema": "http://json-schema.org/draft-07/schema#",
}
REFUSAL = (
    "Invalid schema for function 'web__fetch': In context=('properties', 'url'), "
    "'format' is not permitted."
)


class SchemaTools(FakeTools):
    """Two tools; `web__fetch` has the schema strict providers refuse."""

    def openai_tools(self) -> list[dict[str, Any]]:
        return [
            {"type": "function", "function": {"name": "web__fetch", "parameters": FETCH_SCHEMA}},
            {"type": "function", "function": {"name": "web__ping", "parameters": FETCH_SCHEMA}},
        ]


def strict(reply: str) -> Any:
    """A provider that refuses `format` in web__fetch's schema (and only there)."""

    def turn(body: dict[str, Any]) -> Turn:
        fetch = next(t for t in body["tools"] if t["function"]["name"] == "web__fetch")
        return error(400, REFUSAL) if '"format"' in json.dumps(fetch) else text(reply)

    return turn


async def ok(args: dict[str, Any]) -> str:
    return "ok"


async def test_a_refused_schema_is_simplified_once_and_remembered_for_the_session() -> None:
    with ScriptedLLM(strict("first"), strict("first"), strict("second")) as llm:
        model = OpenAIModel(base_url=llm.base_url, api_key="k", model="m")
        tools = SchemaTools({"web__fetch": ok, "web__ping": ok})
        agent = Agent(model, tools, Memory())
        try:
            first = await drain(agent, "one")
            second = await drain(agent, "two")
        finally:
            await model.aclose()
    assert isinstance(first[-1], RunFinished) and first[-1].answer == "first"
    assert isinstance(second[-1], RunFinished) and second[-1].answer == "second"
    notices = [e.message for e in first if isinstance(e, Notice)]
    assert notices == [
        "the endpoint refused the input schema of tool 'web__fetch'; sending it simplified "
        "from now on"
    ]
    assert len(llm.requests) == 3  # one refusal, then the simplified tool every time
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in llm.requests[2]["tools"]}
    assert sent["web__ping"] == FETCH_SCHEMA  # only the refused tool is changed
    assert sent["web__fetch"] == {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "Where."},
            "headers": {"type": "object"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["url"],
    }
    llm.assert_complete()


async def test_a_400_that_names_no_tool_is_an_error_as_before() -> None:
    with ScriptedLLM(error(400, "messages: invalid role")) as llm:
        model = OpenAIModel(base_url=llm.base_url, api_key="k", model="m")
        agent = Agent(model, SchemaTools({"web__fetch": ok, "web__ping": ok}), Memory())
        try:
            events = await drain(agent, "one")
        finally:
            await model.aclose()
    assert isinstance(events[-1], RunFinished) and events[-1].status == "error"
    assert len(llm.requests) == 1


def test_the_refused_tool_is_found_by_name_or_by_position() -> None:
    names = ["a__get", "a__get_all", "b__x"]
    assert refused_tool("Invalid schema for function 'a__get_all': bad", names) == "a__get_all"
    assert refused_tool("tools[2].function.parameters: 'format' unsupported", names) == "b__x"
    assert refused_tool("rate limited", names) is None
    assert simplified({"type": ["string", "null"], "format": "date"}) == {"type": "string"}
