"""The model seam: one small protocol and its OpenAI-compatible implementation.

`ChatModel.stream` yields text fragments as they arrive, a `RetryNotice` whenever a request
is retried, and one `Reply` last. The loop only knows this protocol; tests script it.

`OpenAIModel` speaks Chat Completions through the `openai` client (any compatible server:
OpenAI, Ollama, vLLM, LM Studio). It retries only what a retry can fix (429, 5xx, timeouts,
dropped connections) and turns everything else into a `ModelError` naming the setting to fix.
The `openai` import is deferred to the first request so start-up stays fast.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio

from agent.errors import ContextOverflowError, ModelError, ToolsUnsupportedError
from agent.text import valid_unicode

if TYPE_CHECKING:
    from openai import AsyncOpenAI

T = TypeVar("T")
BACKOFF = (0.5, 1.0, 2.0, 4.0)
MAX_RETRY_AFTER = 20.0
RETRYABLE_STATUS = frozenset({408, 429})  # and every 5xx
# An endpoint we cannot connect to is reported within this many seconds, retries included:
# a refused port or a black-holed host will not start answering between two retries.
CONNECT_BUDGET = 10.0
# A reply cap sent when none is configured: a local model that loops must not hold a step
# for minutes (measured: 481 s), and 4,096 tokens is more than any one step needs.
DEFAULT_MAX_TOKENS = 4096
# No model request, retries included, takes longer than this: a stream that never ends
# (text forever, keep-alive chunks) is cut. `request_timeout` only bounds a silence.
REQUEST_DEADLINE = 600.0
CONTEXT_OVERFLOW_HINTS = (
    "context_length_exceeded",
    "context length",
    "maximum context",
    "context window",
    "context size",  # llama.cpp: "request (5367 tokens) exceeds the available context size"
    "too many tokens",
    "prompt is too long",
)
CONTEXT_OVERFLOW_TYPES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
# The numbers an overflow message gives (llama.cpp, llama-cpp-python, OpenAI, vLLM wordings).
_WINDOW_PATTERNS = (
    r"context size \((\d+) tokens\)",
    r"maximum context length is (\d+)",
    r"context window of (\d+)",
    r"context length of (\d+)",
)
_REQUEST_PATTERNS = (
    r"(\d+) in the messages",  # OpenAI's count without the reply's reserve
    r"request \((\d+) tokens\)",
    r"requested (\d+) tokens",
    r"requested tokens \((\d+)\)",
    r"resulted in (\d+) tokens",
    r"(\d+) input tokens",
)
# The wordings of an endpoint that takes no `tools` for this model (Ollama, llama-server
# without --jinja, vLLM without --enable-auto-tool-choice, and generic ones).
NO_TOOLS_HINTS = (
    "does not support tools",
    "requires --jinja",
    "--enable-auto-tool-choice",
    "does not support function calling",
    "does not support tool",
    "tools are not supported",
    "tool use is not supported",
    "tool calling is not supported",
    "function calling is not supported",
)
# 5xx bodies that are about the request, not the server: sending it again cannot help.
VALIDATION_HINTS = ("validation error", "input should be", "field required", "invalid_request")


@dataclass(frozen=True)
class ToolCall:
    """One function call as the model wrote it; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    """Tokens the server reported; `unreported` counts the requests it gave no usage for
    (many local servers send none when streaming), so a front end says "unknown", not 0."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    unreported: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    # What the requests cost (agent.prices); `unpriced` counts those with no known price.
    cost_usd: float = 0.0
    unpriced: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.unreported + other.unreported,
            self.cached_tokens + other.cached_tokens,
            self.cost_usd + other.cost_usd,
            self.unpriced + other.unpriced,
        )

    @property
    def cost_known(self) -> bool:
        """A price for every request and tokens reported for some: never a made-up 0."""
        return self.unpriced == 0 and self.known

    def shown_cost(self) -> str:
        """The cost as a person reads it: "unknown", or dollars ("+": a lower bound)."""
        if not self.cost_known:
            return "unknown"
        return f"${self.cost_usd:.4f}" + ("+" if self.unreported else "")

    @property
    def known(self) -> bool:
        """Whether any count was reported (a run of unreported requests knows nothing)."""
        return self.unreported == 0 or bool(self.prompt_tokens or self.completion_tokens)

    def shown(self, tokens: int) -> str:
        """One count as a person reads it: "unknown", or a lower bound marked with "+"."""
        if not self.known:
            return "unknown"
        return f"{tokens}+" if self.unreported else str(tokens)


UNREPORTED = Usage(unreported=1)


@dataclass(frozen=True)
class Reply:
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None


@dataclass(frozen=True)
class RetryNotice:
    """A request failed in a retryable way and is about to be sent again.

    `discarded_text` says text of the failed attempt was already streamed and is now void.
    """

    attempt: int
    delay: float
    reason: str
    discarded_text: bool = False


class ChatModel(Protocol):
    model: str

    def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[str | RetryNotice | Reply]: ...


class _DeadlinePassed(Exception):
    """The whole request ran past `request_deadline`."""


class _Retryable(Exception):
    def __init__(self, reason: str, delay: float | None = None, *, connect: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay
        self.connect = connect  # no connection was made: bounded by CONNECT_BUDGET


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
            except _UseCompletionTokens as exc:
                if self._max_tokens_key != "max_tokens":
                    raise ModelError(self._gave_up(exc.args[0], attempt)) from None
                self._max_tokens_key = "max_completion_tokens"  # for this and every request
                break
            except _DeadlinePassed:
                raise ModelError(self._past_deadline()) from None
            except _EmptyStream:
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
            except _Retryable as exc:
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
        async for item in self.stream(messages, tools, overrides=overrides):
            yield item

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
            raise _EmptyStream()
        if finish_reason is None:
            raise _Retryable("the reply stream ended before the reply was finished")
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
            options=options,  # type: ignore[arg-type]
        )

    def _errors(self) -> _ErrorMapper:
        return _ErrorMapper(self)


class _ErrorMapper:
    """Maps every openai exception to a retry or an actionable ModelError (one place).

    The classes, most specific first: timeouts and connection failures (retried), HTTP
    statuses, malformed responses, an error event inside a stream (the base `APIError`:
    llama-server sends `data: {"error": {"code": 500, ...}}` mid-reply), and any other
    client error. An HTTP status and a streamed error code are judged by one rule.
    """

    def __init__(self, model: OpenAIModel) -> None:
        self.model = model

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, ModelError):
            return False
        import openai

        if isinstance(exc, openai.APITimeoutError):
            if _caused_by(exc, "ConnectTimeout"):
                reason = f"could not connect within {self.model.connect_timeout:g} s"
                raise _Retryable(reason, connect=True) from None
            raise _Retryable(f"timed out after {self.model.request_timeout:g} s") from None
        if isinstance(exc, openai.APIConnectionError):
            connect = _caused_by(exc, "ConnectError")  # refused, DNS: nothing was sent
            raise _Retryable(f"connection failed ({_root_cause(exc)})", connect=connect) from None
        if isinstance(exc, openai.APIStatusError):
            error = _error_body(exc.body)
            raise self._status_error(exc.status_code, error, exc, exc.response) from None
        if isinstance(exc, openai.APIResponseValidationError | ValueError):
            raise ModelError(
                f"the model endpoint returned malformed data ({_short(str(exc))}); "
                "is --base-url an OpenAI-compatible /v1 endpoint?"
            ) from None
        if isinstance(exc, openai.APIError):  # an error event inside the stream
            error = _error_body(exc.body)
            code = error.get("code")
            status = int(code) if isinstance(code, int | str) and str(code).isdigit() else 0
            raise self._status_error(status, error, exc, None, streamed=True) from None
        if isinstance(exc, openai.OpenAIError):
            raise ModelError(f"the model client failed: {_short(str(exc))}") from None
        return False

    def _status_error(
        self,
        status: int,
        error: dict[str, Any],
        exc: Any,
        response: Any,
        *,
        streamed: bool = False,
    ) -> Exception:
        """One rule for an HTTP status and for a streamed error event's code (0 if none)."""
        detail = _short(_error_message(error, exc))
        kinds = f"{error.get('type') or ''} {error.get('code') or ''}".lower()
        model = self.model
        where = f"HTTP {status}" if status else "error event in the stream"
        if streamed and status:
            where = f"error event {status} in the stream"
        if _is_overflow(status, kinds, detail):
            return ContextOverflowError(
                f"the request did not fit the model's context: {detail}",
                context_window=_overflow_number(error, "n_ctx", _WINDOW_PATTERNS, detail),
                request_tokens=_overflow_number(
                    error, "n_prompt_tokens", _REQUEST_PATTERNS, detail
                ),
            )
        if status not in (401, 403, 404, 429) and any(h in detail.lower() for h in NO_TOOLS_HINTS):
            return ToolsUnsupportedError(
                f"the model endpoint does not take tools ({where}): {detail}", status=status
            )
        if status in (401, 403):
            return ModelError(
                f"the model endpoint rejected the API key (HTTP {status}); set OPENAI_API_KEY "
                "or api_key in [llm] of config/config.toml"
            )
        if status == 404:
            return ModelError(
                f"model '{model.model}' or the endpoint was not found (HTTP 404) at "
                f"{model.base_url or 'the default OpenAI endpoint'}; check --model / "
                "OPENAI_MODEL and --base-url / OPENAI_BASE_URL (it usually ends in /v1)"
            )
        if status == 400 and "max_completion_tokens" in detail and model.max_tokens is not None:
            return _UseCompletionTokens(detail)
        if status == 429 and "insufficient_quota" in detail:
            return ModelError(f"the model endpoint says the quota is used up (429): {detail}")
        invalid = any(h in f"{kinds} {detail}".lower() for h in VALIDATION_HINTS)
        if (status in RETRYABLE_STATUS or status >= 500 or not status) and not invalid:
            return _Retryable(f"{where}: {detail}", _retry_after(response))
        if invalid and status >= 500:  # a server that reports a bad request as its own failure
            return ModelError(
                f"the model endpoint rejected the request as invalid ({where}, not retried): "
                f"{detail}"
            )
        return ModelError(
            f"the model endpoint rejected the request ({where}): {detail}", status=status or None
        )


class _EmptyStream(Exception):
    """A 200 stream with no chunk at all: the endpoint cannot stream this request."""


class _UseCompletionTokens(Exception):
    """The endpoint wants `max_completion_tokens` instead of `max_tokens` (OpenAI's reasoning
    models): the request is re-sent at once with the other name."""


def _error_body(body: Any) -> dict[str, Any]:
    """The error object of a response body: `{"error": {...}}`, `{...}` or a bare string."""
    inner = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(inner, dict):
        return inner
    return {"message": inner} if isinstance(inner, str) and inner else {}


def _is_overflow(status: int, kinds: str, detail: str) -> bool:
    """Context overflow, by the error's type or code first, then by its wording."""
    if status in (401, 403, 404, 429):
        return False
    if any(kind in CONTEXT_OVERFLOW_TYPES for kind in kinds.split()):
        return True
    return any(h in detail.lower() for h in CONTEXT_OVERFLOW_HINTS)


def _overflow_number(
    error: dict[str, Any], key: str, patterns: tuple[str, ...], detail: str
) -> int | None:
    """A token count the overflow error states: a field (llama.cpp), else the wording."""
    value = error.get(key)
    if isinstance(value, int) and value > 0:
        return value
    for pattern in patterns:
        if match := re.search(pattern, detail, re.IGNORECASE):
            return int(match.group(1))
    return None


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


def _error_message(error: dict[str, Any], exc: Any) -> str:
    parts = [str(error.get(k)) for k in ("message", "code") if error.get(k)]
    if parts:
        return " ".join(parts)
    return getattr(exc, "message", None) or str(exc)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _caused_by(exc: BaseException, name: str) -> bool:
    """Whether an exception of the class `name` is in exc's chain of causes (httpx2 types)."""
    cause: BaseException | None = exc
    while cause is not None:
        if type(cause).__name__ == name:
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc) or type(exc).__name__
    return _short(text, 120)


def _retry_after(response: Any) -> float | None:
    """Seconds the server asked us to wait (Retry-After or retry-after-ms), capped."""
    headers = getattr(response, "headers", None) or {}
    value: float | None = None
    if ms := headers.get("retry-after-ms"):
        try:
            value = float(ms) / 1000
        except ValueError:
            value = None
    if value is None and (raw := headers.get("retry-after")):
        try:
            value = float(raw)
        except ValueError:
            try:
                value = email.utils.parsedate_to_datetime(raw).timestamp() - time.time()
            except (TypeError, ValueError):
                value = None
    if value is None:
        return None
    return min(max(value, 0.0), MAX_RETRY_AFTER)
