"""A scripted in-process ChatModel and a small ToolBox for loop tests.

The model pops one scripted reply per request, records every request, and fails loudly on
a request nobody scripted. The OpenAI adapter itself is tested over HTTP elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from agent.loop.events import Event
from agent.loop.react import Agent
from agent.model.model_types import Reply, RetryNotice, ToolCall, Usage
from agent.tools.results import Observation, error_observation
from agent.tools.toolspec import ToolSpec

Step = Reply | Exception | Callable[[list[dict[str, Any]]], Reply]


def answer(text: str) -> Reply:
    return Reply(content=text, tool_calls=(), usage=Usage(10, 5), finish_reason="stop")


def calls(*items: tuple[str, dict[str, Any] | str], content: str = "") -> Reply:
    tool_calls = tuple(
        ToolCall(
            id=f"call_{i}", name=name, arguments=args if isinstance(args, str) else json.dumps(args)
        )
        for i, (name, args) in enumerate(items, 1)
    )
    return Reply(
        content=content, tool_calls=tool_calls, usage=Usage(10, 5), finish_reason="tool_calls"
    )


@dataclass
class FakeModel:
    script: list[Step]
    model: str = "fake"
    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    tools_seen: list[list[dict[str, Any]]] = field(default_factory=list)
    chunk: int = 4

    async def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[str | RetryNotice | Reply]:
        self.requests.append(json.loads(json.dumps(messages)))
        self.tools_seen.append(tools)
        if not self.script:
            raise AssertionError(f"unexpected model request #{len(self.requests)}")
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        reply = step(messages) if callable(step) else step
        for i in range(0, len(reply.content), self.chunk):
            yield reply.content[i : i + self.chunk]
        yield reply

    def assert_complete(self) -> None:
        assert not self.script, f"{len(self.script)} scripted replies were never requested"


ToolFn = Callable[[dict[str, Any]], Awaitable[str]]


@dataclass
class FakeTools:
    """Tools implemented by coroutines, named like the registry names them."""

    functions: Mapping[str, ToolFn]
    read_only: frozenset[str] = frozenset()
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tools = {
            name: ToolSpec(
                server="fake",
                name=name,
                description=f"{name} tool",
                input_schema={"type": "object", "properties": {}},
                read_only=name in self.read_only,
            )
            for name in self.functions
        }
        self._openai = [
            {"type": "function", "function": {"name": n, "parameters": {}}} for n in self.functions
        ]

    async def settle(self) -> None:
        return None

    def openai_tools(self) -> list[dict[str, Any]]:
        return self._openai

    async def call(
        self,
        public_name: str,
        arguments: dict[str, Any],
        *,
        progress: Any = None,
        spec: Any = None,
        meta: Any = None,
        on_task: Any = None,
    ) -> Observation:
        self.calls.append((public_name, arguments))
        try:
            return Observation(text=await self.functions[public_name](arguments))
        except ValueError as exc:
            return error_observation("fake", str(exc))


async def sleep_then(seconds: float, text: str) -> str:
    await anyio.sleep(seconds)
    return text


async def drain(agent: Agent, request: str) -> list[Event]:
    """Every event of one run of REQUEST, in order (a run that hangs fails after 30 s)."""
    with anyio.fail_after(30):
        return [event async for event in agent.run(request)]
