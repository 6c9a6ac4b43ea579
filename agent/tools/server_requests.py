"""Requests servers make of us: sampling (our model answers), elicitation (the user answers).
(Roots come from the config: agent.tools.mcp offers a server the folders set for it.)

The human is injected: a front end that can ask (the REPL) sets `ui`; without one, sampling
runs only under `--yes` and elicitation is declined politely, so scripts never block on a
question nobody can answer.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
import mcp.types as types

from agent.common.errors import ModelError
from agent.common.memory import CHARS_PER_TOKEN
from agent.model.llm import OpenAIModel
from agent.model.model_types import Reply, Usage
from agent.model.sampling_tools import CAPABILITY as SAMPLING_WITH_TOOLS
from agent.model.sampling_tools import (
    chat_messages,
    chat_tool_choice,
    chat_tools,
    result_with_tools,
)
from agent.tools.mcp import ClientCallbacks

DECLINED = -1  # JSON-RPC error code for "the user said no" (no standard code exists)
# A server spends our tokens through sampling: bounded per request and per minute, even
# under --yes, so a looping server cannot run up a bill.
SAMPLING_MAX_TOKENS = 4096  # unless [llm] max_tokens says otherwise
SAMPLING_PER_MINUTE = 10  # per server
# A server's prompt is our input tokens: bounded too ([llm] sampling_max_prompt_tokens).
SAMPLING_PROMPT_TOKENS = 16_000
ELICITATION_PER_MINUTE = 5  # per server: questions beyond are declined without asking
PER_MINUTE = {"sampling": SAMPLING_PER_MINUTE, "elicitation": ELICITATION_PER_MINUTE}


@dataclass(frozen=True)
class SamplingRequest:
    """What a server wants our model to answer, as the user is shown it."""

    server: str
    messages: list[dict[str, Any]]
    max_tokens: int
    system_prompt: str | None
    temperature: float | None
    prompt_chars: int = 0  # system prompt, messages and tools: all that would be sent
    tool_count: int = 0  # the server's own tools, declared in the request

    @property
    def prompt_tokens(self) -> int:
        """An estimate (about four characters a token), as the loop's own budget uses."""
        return self.prompt_chars // CHARS_PER_TOKEN


@dataclass(frozen=True)
class ElicitAnswer:
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


class Asker(Protocol):
    """The front end's side: show a request to the user and return the decision."""

    async def approve_sampling(self, request: SamplingRequest) -> bool: ...

    async def elicit_form(
        self, server: str, message: str, schema: dict[str, Any]
    ) -> ElicitAnswer: ...

    async def elicit_url(self, server: str, message: str, url: str) -> ElicitAnswer: ...


@dataclass
class ServerRequests:
    model: OpenAIModel
    auto_approve: bool = False  # --yes, when there is no ui to ask (the ui follows /approve)
    max_prompt_tokens: int = SAMPLING_PROMPT_TOKENS  # a larger prompt is refused unasked
    ui: Asker | None = None
    sampled: list[SamplingRequest] = field(default_factory=list)
    # (server, tokens) each time our model answered a server: counted with the run, shown.
    on_sampled: Callable[[str, Usage], None] | None = None
    # (server, its question) each time a question was declined unasked (no one to ask).
    on_declined: Callable[[str, str], None] | None = None
    _recent: dict[str, list[float]] = field(default_factory=dict)
    _in_flight: set[anyio.CancelScope] = field(default_factory=set)

    def cancel_in_flight(self) -> None:
        """The user cancelled the turn: sampling requests it caused stop spending tokens."""
        for scope in list(self._in_flight):
            scope.cancel()

    def callbacks(self, server: str) -> ClientCallbacks:
        """The callbacks for one server's connection (they know whom they answer)."""
        return ClientCallbacks(
            sampling=functools.partial(self.sample, server),
            elicitation=functools.partial(self.elicit, server),
            sampling_capabilities=SAMPLING_WITH_TOOLS,
        )

    async def sample(
        self, server: str, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        tools, names = chat_tools(params.tools)  # the server's own tools, for our model
        messages = [chat for m in params.messages for chat in chat_messages(m, names)]
        request = SamplingRequest(
            server=server,
            messages=messages,
            max_tokens=min(params.max_tokens, self.model.max_tokens or SAMPLING_MAX_TOKENS),
            system_prompt=params.system_prompt,
            temperature=params.temperature,
            # Everything sent counts: 100 server tools of 20 KB each are a 2 MB request.
            prompt_chars=len(params.system_prompt or "")
            + sum(map(_size, messages))
            + (len(json.dumps(tools, ensure_ascii=False)) if tools else 0),
            tool_count=len(tools),
        )
        if request.prompt_tokens > self.max_prompt_tokens:
            return types.ErrorData(
                code=DECLINED,
                message=f"sampling prompt too large: about {request.prompt_tokens:,} tokens "
                f"({request.prompt_chars:,} characters{_with_tools(request)}); this client "
                "accepts at most "
                f"{self.max_prompt_tokens:,} tokens per request",
            )
        if not self._within_rate(server):
            return types.ErrorData(
                code=DECLINED,
                message=f"too many sampling requests: at most {SAMPLING_PER_MINUTE} a minute",
            )
        if not await self._sampling_allowed(request):
            return types.ErrorData(
                code=DECLINED,
                message="the user declined the sampling request"
                if self.ui
                else "sampling needs approval: rerun with --yes to allow it",
            )
        self.sampled.append(request)
        system = [{"role": "system", "content": request.system_prompt}]
        overrides: dict[str, Any] = {"max_tokens": request.max_tokens}
        if request.temperature is not None:
            overrides["temperature"] = request.temperature
        if params.stop_sequences:
            overrides["stop"] = list(params.stop_sequences)
        if (choice := chat_tool_choice(params.tool_choice)) is not None and tools:
            overrides["tool_choice"] = choice
        messages = (system if request.system_prompt else []) + request.messages
        with anyio.CancelScope() as scope:
            self._in_flight.add(scope)
            try:
                reply = await _complete(self.model, messages, overrides, tools)
            except ModelError as exc:
                return types.ErrorData(code=types.INTERNAL_ERROR, message=f"model error: {exc}")
            finally:
                self._in_flight.discard(scope)
        if scope.cancelled_caught:
            return types.ErrorData(code=DECLINED, message="cancelled by the user")
        if self.on_sampled is not None:
            self.on_sampled(server, reply.usage)
        if params.tools or params.tool_choice:
            return result_with_tools(reply, names, self.model.model)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(text=reply.content),
            model=self.model.model,
            stop_reason="maxTokens" if reply.finish_reason == "length" else "endTurn",
        )

    def _within_rate(self, server: str, kind: str = "sampling") -> bool:
        """At most PER_MINUTE[kind] requests of a kind per server in any 60 s."""
        now = time.monotonic()
        key = f"{kind}:{server}"
        recent = [t for t in self._recent.get(key, []) if now - t < 60]
        self._recent[key] = recent
        if len(recent) >= PER_MINUTE[kind]:
            return False
        recent.append(now)
        return True

    async def _sampling_allowed(self, request: SamplingRequest) -> bool:
        """A front end decides (it follows the live approval mode); without one, --yes does."""
        if self.ui is not None:
            return await self.ui.approve_sampling(request)
        return self.auto_approve

    async def elicit(
        self,
        server: str,
        context: Any,
        params: types.ElicitRequestFormParams | types.ElicitRequestURLParams,
    ) -> types.ElicitResult:
        if self.ui is None:  # a script cannot answer; say no rather than hang
            if self.on_declined is not None:
                self.on_declined(server, params.message)
            return types.ElicitResult(action="decline")
        if not self._within_rate(server, "elicitation"):  # a server that keeps asking
            return types.ElicitResult(action="decline")
        if isinstance(params, types.ElicitRequestURLParams):
            answer = await self.ui.elicit_url(server, params.message, params.url)
        else:
            schema = params.requested_schema or {}
            answer = await self.ui.elicit_form(server, params.message, schema)
        return types.ElicitResult(action=answer.action, content=answer.content)


async def _complete(
    model: OpenAIModel,
    messages: list[dict[str, Any]],
    overrides: dict[str, Any],
    tools: list[dict[str, Any]],
) -> Reply:
    async for item in model.stream(messages, tools, overrides=overrides):
        if isinstance(item, Reply):
            return item
    raise ModelError("the model stream ended without a reply")


def _size(message: dict[str, Any]) -> int:
    """Characters of a message's content (parts, images included, by their JSON length)
    and of its tool calls (their arguments are sent too)."""
    content = message["content"]
    size = len(content) if isinstance(content, str) else len(json.dumps(content))
    calls = message.get("tool_calls")
    return size + (len(json.dumps(calls, ensure_ascii=False)) if calls else 0)


def _with_tools(request: SamplingRequest) -> str:
    count = request.tool_count
    return f", {count} tool declaration{'s' if count != 1 else ''} included" if count else ""
