"""The model seam's OpenAI-compatible implementation of `ChatModel` (agent.model.model_types).

`OpenAIModel` speaks Chat Completions through the `openai` client (any compatible server:
OpenAI, Ollama, vLLM, LM Studio). It retries only what a retry can fix (429, 5xx, timeouts,
dropped connections) and turns everything else into a `ModelError` naming the setting to fix
(the rules: agent.model.openai_errors). The `openai` import is deferred to the first request so
start-up stays fast.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from agent.common.errors import ModelError
from agent.common.text import valid_unicode
from agent.model.model_types import UNREPORTED, Reply, RetryNotice, ToolCall, Usage
from agent.model.openai_errors import EmptyStream, ErrorMapper, Retryable, UseCompletionTokens

if TYPE_CHECKING:
    from openai import AsyncOpenAI

T = TypeVar("T")
BACKOFF = (0.5, 1.0, 2.0, 4.0)
# An endpoint we cannot connect to is reported within this many seconds, retries included:
# a refused port or a black-holed host will not start answering between two retries.
CONNECT_BUDGET = 10.0
# A reply cap sent when none is configured: a local model that loops must not hold a step
# for minutes (measured: 481 s), and 4,096 tokens is more than any one step needs.
DEFAULT_MAX_TOKENS = 4096
# No model request, retries included, takes longer than this: a stream that never ends
# (text forever, keep-alive chunks) is cut. `request_timeout` only bounds a silence.
REQUEST_DEADLINE = 600.0


class _DeadlinePassed(Exception):
    """The whole request ran past `request_deadline`."""


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAccumulator:
    """Joins streamed tool-call deltas by index into whole calls.

    Some servers send each call whole, all at index 0; a new id at an index that already
    holds a call starts a new call rather than corrupting the first.
    """

    def __init__(self) -> None:
        self._calls: list[_PartialCall] = []
        self._slots: dict[int, int] = {}

    def add(self, index: int | None, call_id: str | None, name: str | None, args: str | None):
        slot = self._slots.get(index if index is not None else len(self._calls))
        if slot is None or (call_id and self._calls[slot].id and call_id != self._calls[slot].id):
            self._calls.append(_PartialCall())
            slot = len(self._calls) - 1
            self._slots[index if index is not None else slot] = slot
        call = self._calls[slot]
        if call_id:
            call.id = call_id
        if name:
            call.name += name if call.name != name else ""
        if args:
            call.arguments.append(args)

    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(
                id=c.id or f"call_{i}",
                name=valid_unicode(c.name),
                arguments=valid_unicode("".join(c.arguments)),
            )
            for i, c in enumerate(self._calls, 1)
        )


def warm_model_imports() -> None:
    """Import the HTTP client stack ahead of the first request (safe to run in a thread)."""
    import httpx2  # noqa: F401
    import openai  # noqa: F401


class OpenAIModel:
    """A Chat Completions endpoint, streamed or not, with honest retries."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        temperature: float | None = None,
        max_tokens: int | None = None,
        request_timeout: float = 120.0,
        request_deadline: float = REQUEST_DEADLINE,
        connect_timeout: float = 10.0,
        stream: bool = True,
        max_retries: int = 3,
        extra_headers: dict[str, str] | None = None,
        connect_budget: float = CONNECT_BUDGET,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.request_timeout = request_timeout
        self.request_deadline = request_deadline
        self.connect_timeout = connect_timeout
        self.streaming = stream
        self.max_retries = max_retries
        self.connect_budget = connect_budget
        self._api_key = api_key
        self._extra_headers = extra_headers or {}
        self._client: AsyncOpenAI | None = None
        self._max_tokens_key = "max_tokens"  # or max_completion_tokens, if the endpoint says so

    def _get_client(self) -> AsyncOpenAI:
        if self._client is None:
            import httpx2
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                api_key=self._api_key or "not-needed",
                base_url=self.base_url,
                max_retries=0,
                timeout=httpx2.Timeout(self.request_timeout, connect=self.connect_timeout),
                default_headers=self._extra_headers,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()

    def _params(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            # "auto" is the default, but llama-cpp-python ignores `tools` unless it is sent.
            params["tools"], params["tool_choice"] = tools, "auto"
        if self.temperature is not None:
            params["temperature"] = self.temperature
        if self.max_tokens is not None:
            params[self._max_tokens_key] = self.max_tokens
        return params

    async def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        overrides: dict[str, Any] | None = None,
    ) -> AsyncIterator[str | RetryNotice | Reply]:
        """Stream one reply. `overrides` (max_tokens, temperature, stop) apply to this request
        only: a server's sampling request sets its own."""
        params = {**self._params(messages, tools), **(overrides or {})}
        if self._max_tokens_key != "max_tokens" and "max_tokens" in params:
            params[self._max_tokens_key] = params.pop("max_tokens")
        started = time.monotonic()
        deadline = started + self.request_deadline
        for attempt in range(1, self.max_retries + 2):
            streamed = False
            attempt_started = time.monotonic()
            try:
                once = (
                    self._stream_once(params, deadline)
                    if self.streaming
                    else self._complete_once(params, deadline)
                )
                async for item in once:
                    if isinstance(item, str):
                        streamed = True
                    yield item
                return
            except UseCompletionTokens as exc:
                if self._max_tokens_key != "max_tokens":
                    raise ModelError(self._gave_up(exc.args[0], attempt)) from None
                self._max_tokens_key = "max_completion_tokens"  # for this and every request
                break
            except _DeadlinePassed:
                raise ModelError(self._past_deadline()) from None
            except EmptyStream:
                # llama-cpp-python's chatml-function-calling answers a streamed request with
                # tools by 200 and no chunks ("Automatic streaming tool choice is not
                # supported"): ask again without streaming, for this and every request.
                self.streaming = False
                yield RetryNotice(
                    attempt,
                    0.0,
                    "the endpoint sent an empty stream; asking "
                    "again without streaming (stream = false from now on)",
                )
                break
            except Retryable as exc:
                delay = exc.delay if exc.delay is not None else BACKOFF[attempt - 1]
                now = time.monotonic()  # another attempt would take about as long as this one
                next_ends = now - started + delay + (now - attempt_started)
                if attempt > self.max_retries or (exc.connect and next_ends > self.connect_budget):
                    raise ModelError(self._gave_up(exc.reason, attempt)) from None
                if now + delay >= deadline:
                    raise ModelError(self._past_deadline(f"; last failure: {exc.reason}")) from None
                yield RetryNotice(attempt, delay, exc.reason, streamed)
                await anyio.sleep(delay)
        # Only a renamed parameter or streaming turned off gets here: the request again, at once.
        async for again in self.stream(messages, tools, overrides=overrides):
            yield again

    def _past_deadline(self, detail: str = "") -> str:
        return (
            f"the model request did not finish within {self.request_deadline:g} s{detail} "
            "(request_deadline in [llm] of config/config.toml)"
        )

    def _gave_up(self, reason: str, attempts: int) -> str:
        where = self.base_url or "the default OpenAI endpoint"
        hint = ""
        if "connect" in reason or "refused" in reason:
            hint = "; check --base-url / OPENAI_BASE_URL and that the server is running"
        tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
        return f"model request to {where} failed after {tries}: {reason}{hint}"

    async def _stream_once(
        self, params: dict[str, Any], deadline: float
    ) -> AsyncIterator[str | Reply]:
        """One streamed attempt. A stream is whole only with a finish_reason: one that ends
        without it was cut (a proxy, a crashed server) and is retried, never taken as the
        reply, so half an answer is never the answer and half a tool call never runs."""
        content: list[str] = []
        calls = ToolCallAccumulator()
        usage = UNREPORTED
        finish_reason: str | None = None
        chunks = 0
        async with self._errors():
            stream = await _before(
                deadline,
                self._create({**params, "stream": True, "stream_options": {"include_usage": True}}),
            )
            try:
                while (chunk := await _before(deadline, anext(stream, None))) is not None:
                    chunks += 1
                    if not isinstance(chunk, dict):
                        raise ModelError(
                            f"the model endpoint sent a malformed chunk: {chunk!r:.200}"
                        )
                    if chunk.get("usage"):
                        usage = _usage(chunk["usage"])
                    for choice in chunk.get("choices") or ():
                        if choice.get("finish_reason"):
                            finish_reason = choice["finish_reason"]
                        delta = choice.get("delta") or {}
                        if delta.get("content"):
                            text = valid_unicode(delta["content"])
                            content.append(text)
                            yield text
                        for tc in delta.get("tool_calls") or ():
                            fn = tc.get("function") or {}
                            calls.add(
                                tc.get("index"), tc.get("id"), fn.get("name"), fn.get("arguments")
                            )
            finally:
                with anyio.move_on_after(2, shield=True):
                    await stream.close()
        if not chunks:
            raise EmptyStream()
        if finish_reason is None:
            raise Retryable("the reply stream ended before the reply was finished")
        yield Reply("".join(content), calls.calls(), usage, finish_reason)

    async def _complete_once(
        self, params: dict[str, Any], deadline: float
    ) -> AsyncIterator[str | Reply]:
        # The server sends nothing until the whole reply is computed, which on a CPU can take
        # minutes: only the request's deadline bounds it, never request_timeout (a silence
        # limit), and a request cut there is not sent again behind its own original.
        async with self._errors():
            wait = max(deadline - time.monotonic(), 0.001)
            completion = await _before(deadline, self._create(params, read_timeout=wait))
        choices = completion.get("choices") if isinstance(completion, dict) else None
        if not choices:
            raise ModelError("the model endpoint returned no choices; check --model")
        choice = choices[0]
        message = choice.get("message") or {}
        tool_calls = tuple(
            ToolCall(
                id=tc.get("id") or f"call_{i}",
                name=valid_unicode(tc["function"].get("name") or ""),
                arguments=valid_unicode(tc["function"].get("arguments") or ""),
            )
            for i, tc in enumerate(message.get("tool_calls") or (), 1)
            if isinstance(tc.get("function"), dict)
        )
        text = valid_unicode(message.get("content") or "")
        if text:
            yield text
        usage = _usage(completion["usage"]) if completion.get("usage") else UNREPORTED
        yield Reply(text, tool_calls, usage, choice.get("finish_reason"))

    async def _create(self, body: dict[str, Any], read_timeout: float | None = None) -> Any:
        """POST /chat/completions with the body as is.

        `chat.completions.create` re-validates every message and tool schema on each call
        (~0.25 ms per message: quadratic over a long run); our messages are already in wire
        format, so they go through the client's raw `post` instead, keeping its auth,
        timeouts, status errors and SSE parsing.
        """
        from openai import AsyncStream

        options: dict[str, Any] = {"security": {"bearer_auth": True}}
        if read_timeout is not None:
            import httpx2

            options["timeout"] = httpx2.Timeout(read_timeout, connect=self.connect_timeout)
        # cast_to=object: the SDK hands back the decoded JSON as is, no pydantic model per
        # chunk (another ~1 ms per step); we read the few fields we need from dicts.
        return await self._get_client().post(
            "/chat/completions",
            body=body,
            cast_to=object,
            stream=bool(body.get("stream")),
            stream_cls=AsyncStream[object],
            options=options,  # type: ignore[call-overload]
        )

    def _errors(self) -> ErrorMapper:
        return ErrorMapper(self)


async def _before(deadline: float, step: Awaitable[T]) -> T:
    """Await one step of a request (the response, the next chunk) within the request's
    deadline. The scope is around each await, never across a yield of the stream."""
    with anyio.move_on_after(deadline - time.monotonic()) as scope:
        return await step
    if scope.cancelled_caught:
        raise _DeadlinePassed
    raise AssertionError("unreachable")


def _usage(raw: dict[str, Any]) -> Usage:
    """OpenAI says cached prompt tokens in prompt_tokens_details; DeepSeek as cache hits."""
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    cached = cached or raw.get("prompt_cache_hit_tokens") or 0
    prompt, completion = int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0)
    return Usage(prompt, completion, cached_tokens=min(int(cached), prompt))
