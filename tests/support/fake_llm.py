"""A scripted OpenAI-compatible HTTP server for tests.

`ScriptedLLM` serves `/v1/chat/completions` on a free loopback port from a thread, one
scripted turn per request, streaming real SSE chunks (content deltas, tool-call deltas by
index, a usage chunk) or plain JSON, as the request asks. Turns can also fail: HTTP errors
with headers, delays past the client's timeout, malformed JSON, a connection dropped in
the middle of a stream, a stream that ends cleanly but early (no finish_reason, no
[DONE]) at any chunk, a stream that never ends (text or empty keep-alive chunks), and
llama-server's own failures (an error event inside the stream, its context-overflow body).
`GET /v1/models` lists `models`. Every request body is recorded; an unscripted request is
answered with HTTP 418 (which the client does not retry) and fails `assert_complete()`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Self

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agent.model.llm import OpenAIModel
from tests.support.asgi_thread import serve

_ids = itertools.count(1)


@dataclass
class Turn:
    """One scripted reply. Only the fields for its `kind` matter."""

    kind: str  # text | tool_calls | error | garbage | drop | stream_error | empty | forever
    content: str = ""
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    status: int = 200
    message: str = ""
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    pace: float = 0.0  # seconds between streamed content chunks (a model that types)
    chunk: int = 4
    finish_reason: str | None = None
    usage: tuple[int, int] | None = (12, 7)  # None: the server reports no usage
    cached: int = 0  # of the prompt tokens, from the provider's cache (OpenAI's details)
    body: dict[str, Any] | None = None  # an error's JSON body, verbatim
    cut: int | None = None  # end the stream cleanly after this many chunks (role chunk not counted)


Script = Turn | Callable[[dict[str, Any]], Turn]


def text(content: str, *, chunk: int = 4, finish_reason: str = "stop", pace: float = 0.0) -> Turn:
    return Turn("text", content=content, chunk=chunk, finish_reason=finish_reason, pace=pace)


def tool_calls(*calls: tuple[str, dict[str, Any] | str], content: str = "") -> Turn:
    wire = [(n, a if isinstance(a, str) else json.dumps(a)) for n, a in calls]
    return Turn("tool_calls", content=content, tool_calls=wire, finish_reason="tool_calls")


def error(
    status: int, message: str = "scripted failure", *, code: str | None = None, **headers: str
) -> Turn:
    hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
    return Turn("error", status=status, message=message, code=code, headers=hdrs)


def llama_overflow(prompt_tokens: int, n_ctx: int) -> Turn:
    """llama-server's answer to a prompt longer than its context (HTTP 400)."""
    message = (
        f"request ({prompt_tokens} tokens) exceeds the available context size "
        f"({n_ctx} tokens), try increasing it"
    )
    body = {
        "error": {
            "code": 400,
            "message": message,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt_tokens,
            "n_ctx": n_ctx,
        }
    }
    return Turn("error", status=400, body=body)


def stream_error(content: str = "Let me", code: int = 500, message: str = "") -> Turn:
    """llama-server failing mid-reply: some text, then an error event in the SSE stream."""
    message = (
        message or "The model produced output that does not match the expected peg-native format"
    )
    return Turn(
        "stream_error",
        content=content,
        body={"error": {"code": code, "message": message, "type": "server_error"}},
    )


def delayed(seconds: float, turn: Turn) -> Turn:
    turn.delay = seconds
    return turn


def garbage() -> Turn:
    return Turn("garbage")


def cut(turn: Turn, after: int) -> Turn:
    """Stream only the first `after` chunks of `turn` (content pieces, then each tool call's
    name and its arguments in 7-character pieces), then end the response as if complete,
    with no finish_reason and no [DONE]: what a proxy or a crashed server leaves."""
    turn.cut = after
    return turn


def forever(content: str = "", pace: float = 0.02) -> Turn:
    """A stream that never ends: `content` every `pace` seconds ("" = empty keep-alive
    chunks, which keep any idle timeout from firing)."""
    return Turn("forever", content=content, pace=pace)


def drop(content: str = "partial answer that will be lost") -> Turn:
    """Stream part of `content`, then cut the connection."""
    return Turn("drop", content=content)


class ScriptedLLM:
    """Run as a context manager; point the client at `.base_url`."""

    def __init__(self, *script: Script) -> None:
        self.script: list[Script] = list(script)
        self.requests: list[dict[str, Any]] = []
        self.request_bytes: list[int] = []  # each request's body as it arrived
        self.headers: list[dict[str, str]] = []
        self.unexpected: list[int] = []
        # A text-only model: a request carrying image parts gets a 400 (llama.cpp and
        # vLLM answer so), and no scripted turn is used up.
        self.reject_images = False
        self.models: list[str] = ["scripted-model"]
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def add(self, *turns: Script) -> None:
        with self._lock:
            self.script.extend(turns)

    def assert_complete(self) -> None:
        assert not self.unexpected, f"unscripted model requests: {self.unexpected}"
        assert not self.script, f"{len(self.script)} scripted turns were never requested"

    def messages(self, index: int = -1) -> list[dict[str, Any]]:
        return self.requests[index]["messages"]

    def __enter__(self) -> Self:
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._handle, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )
        # Keep-alive well past the longest retry backoff: a pooled connection the server
        # closes just as the client reuses it would fail the request (ReadError).
        self.port = self._stack.enter_context(serve(app, timeout_keep_alive=30))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    async def _models(self, request: Request) -> Response:
        """`GET /v1/models`, as local servers answer it (the ids in `self.models`)."""
        data = [{"id": m, "object": "model", "owned_by": "scripted"} for m in self.models]
        return JSONResponse({"object": "list", "data": data})

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            return JSONResponse({"error": {"message": "request body is not JSON"}}, 400)
        with self._lock:
            self.requests.append(body)
            self.request_bytes.append(len(raw))
            self.headers.append({k.lower(): v for k, v in request.headers.items()})
            number = len(self.requests)
            if self.reject_images and _has_image_parts(body):
                message = "image input is not supported: this model has no vision"
                return JSONResponse({"error": {"message": message, "type": "scripted"}}, 400)
            step = self.script.pop(0) if self.script else None
            if step is None:
                self.unexpected.append(number)
        if step is None:
            message = f"scripted LLM: no reply scripted for request #{number}"
            return JSONResponse({"error": {"message": message}}, 418)
        turn = step(body) if callable(step) else step
        if turn.delay:
            await asyncio.sleep(turn.delay)
        return _respond(turn, body)


def _has_image_parts(body: dict[str, Any]) -> bool:
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in body.get("messages") or []
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


def _respond(turn: Turn, body: dict[str, Any]) -> Response:
    if turn.kind == "error":
        payload = turn.body or {
            "error": {"message": turn.message, "type": "scripted", "code": turn.code}
        }
        return JSONResponse(payload, turn.status, headers=turn.headers)
    if turn.kind == "empty":  # llama-cpp-python when it cannot stream: 200, no chunk at all
        if body.get("stream"):
            return Response("", 200, media_type="text/event-stream")
        return JSONResponse(_completion(text(turn.content or "unstreamed"), "chatcmpl-0", "m"))
    if turn.kind == "garbage":
        if body.get("stream"):
            return Response("data: {this is not json\n\n", 200, media_type="text/event-stream")
        return Response("{this is not json", 200, media_type="application/json")
    completion_id = f"chatcmpl-{next(_ids)}"
    model = body.get("model", "scripted")
    if body.get("stream"):
        usage = (body.get("stream_options") or {}).get("include_usage", False)
        events = _stream_events(turn, completion_id, model, usage)
        return StreamingResponse(events, media_type="text/event-stream")
    return JSONResponse(_completion(turn, completion_id, model))


def _completion(turn: Turn, completion_id: str, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": a}}
            for i, (n, a) in enumerate(turn.tool_calls, 1)
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": turn.finish_reason}],
        "usage": _usage(turn),
    }


def _usage(turn: Turn) -> dict[str, Any] | None:
    if turn.usage is None:
        return None
    prompt, completion = turn.usage
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if turn.cached:
        usage["prompt_tokens_details"] = {"cached_tokens": turn.cached}
    return usage


async def _stream_events(
    turn: Turn, completion_id: str, model: str, include_usage: bool
) -> AsyncIterator[str]:
    events = _all_events(turn, completion_id, model, include_usage)
    sent = -1  # the role chunk comes first
    async for event in events:
        if turn.cut is not None and sent >= turn.cut:
            await events.aclose()
            return
        sent += 1
        yield event


async def _all_events(
    turn: Turn, completion_id: str, model: str, include_usage: bool
) -> AsyncGenerator[str, None]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(data)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    while turn.kind == "forever":
        await asyncio.sleep(turn.pace)
        yield chunk({"content": turn.content})
    pieces = [turn.content[i : i + turn.chunk] for i in range(0, len(turn.content), turn.chunk)]
    if turn.kind == "stream_error":
        for piece in pieces:
            yield chunk({"content": piece})
        yield f"data: {json.dumps(turn.body)}\n\n"
        return
    if turn.kind == "drop":
        for piece in pieces[: max(1, len(pieces) // 2)]:
            yield chunk({"content": piece})
        await asyncio.sleep(0.05)
        raise ConnectionAbortedError("scripted connection drop")
    for piece in pieces:
        if turn.pace:
            await asyncio.sleep(turn.pace)
        yield chunk({"content": piece})
    for index, (name, arguments) in enumerate(turn.tool_calls):
        head = {"index": index, "id": f"call_{index + 1}", "type": "function"}
        yield chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        for i in range(0, len(arguments), 7):
            fragment = {"index": index, "function": {"arguments": arguments[i : i + 7]}}
            yield chunk({"tool_calls": [fragment]})
    yield chunk({}, turn.finish_reason)
    if include_usage and turn.usage is not None:
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [],
            "usage": _usage(turn),
        }
        yield f"data: {json.dumps(data)}\n\n"
    yield "data: [DONE]\n\n"


# ----------------------------------------------------------------- the real client against it

USER = [{"role": "user", "content": "hi"}]
TOOL = {"type": "function", "function": {"name": "t__x", "parameters": {"type": "object"}}}


def tool_messages(request: dict[str, Any]) -> list[str]:
    """The contents of the tool messages in one recorded request (`llm.requests[i]`)."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def model_for(llm: ScriptedLLM, **kw: Any) -> OpenAIModel:
    """The agent's own OpenAI client pointed at the scripted server (kw: its options)."""
    return OpenAIModel(base_url=llm.base_url, api_key="sk-test-123", model="scripted", **kw)


async def collect(model: OpenAIModel, tools: list[dict[str, Any]] | None = None) -> list[Any]:
    """Everything one streamed request for USER yields (fragments, notices, the Reply last);
    the client is closed after, whatever happened."""
    try:
        with anyio.fail_after(30):
            return [item async for item in model.stream(USER, tools or [])]
    finally:
        await model.aclose()
