"""The OpenAI adapter over real HTTP: the real `openai` client against the scripted server."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator

import anyio
import pytest

from agent.common.errors import ContextOverflowError, ModelError
from agent.model.llm import OpenAIModel, ToolCallAccumulator
from agent.model.model_types import Reply, RetryNotice, ToolCall, Usage
from tests.support.fake_llm import (
    TOOL,
    USER,
    ScriptedLLM,
    collect,
    delayed,
    drop,
    error,
    garbage,
    model_for,
    text,
    tool_calls,
)
from tests.support.servers import free_port

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("stream", [True, False])
async def test_text_streams_in_fragments_and_reports_usage(stream: bool) -> None:
    with ScriptedLLM(text("The answer is 42.")) as llm:
        items = await collect(model_for(llm, stream=stream))
    reply = items[-1]
    assert isinstance(reply, Reply)
    assert reply.content == "The answer is 42." == "".join(items[:-1])
    assert reply.usage == Usage(12, 7) and reply.finish_reason == "stop"
    assert len(items) - 1 == (5 if stream else 1)
    assert llm.requests[0].get("stream", False) is stream
    llm.assert_complete()


@pytest.mark.parametrize("stream", [True, False])
async def test_tool_call_deltas_are_joined_by_index(stream: bool) -> None:
    args = {"path": "a/b.txt", "content": "x" * 40}
    with ScriptedLLM(tool_calls(("t__x", args), ("t__y", "{}"), content="Let me look.")) as llm:
        items = await collect(model_for(llm, stream=stream), [TOOL])
    reply = items[-1]
    assert reply.tool_calls == (
        ToolCall("call_1", "t__x", json.dumps(args)),
        ToolCall("call_2", "t__y", "{}"),
    )
    assert reply.content == "Let me look." and reply.finish_reason == "tool_calls"
    assert llm.requests[0]["tools"] == [TOOL]


async def test_no_tools_means_no_tools_field() -> None:
    with ScriptedLLM(text("ok")) as llm:
        await collect(model_for(llm, temperature=0.2, max_tokens=99))
    request = llm.requests[0]
    assert "tools" not in request
    assert request["temperature"] == 0.2 and request["max_tokens"] == 99
    assert request["stream_options"] == {"include_usage": True}


def test_accumulator_separates_whole_calls_sent_at_the_same_index() -> None:
    acc = ToolCallAccumulator()
    acc.add(0, "a", "one", '{"x":')
    acc.add(0, None, None, "1}")
    acc.add(0, "b", "two", "{}")  # a server that sends each call whole at index 0
    acc.add(None, None, "three", None)
    assert acc.calls() == (
        ToolCall("a", "one", '{"x":1}'),
        ToolCall("b", "two", "{}"),
        ToolCall("call_3", "three", ""),
    )


async def test_429_twice_then_success_honours_retry_after() -> None:
    with ScriptedLLM(
        error(429, "slow down", retry_after="0.2"), error(429, "slow down"), text("done")
    ) as llm:
        items = await collect(model_for(llm))
    notices = [i for i in items if isinstance(i, RetryNotice)]
    assert [(n.attempt, n.delay) for n in notices] == [(1, 0.2), (2, 1.0)]
    assert "HTTP 429" in notices[0].reason and "slow down" in notices[0].reason
    assert items[-1].content == "done"
    llm.assert_complete()


async def test_retry_after_is_capped() -> None:
    with ScriptedLLM(error(503, retry_after="3600"), text("ok")) as llm:
        model = model_for(llm)
        notices = []
        with anyio.move_on_after(5):
            async for item in model.stream(USER, []):
                if isinstance(item, RetryNotice):
                    notices.append(item)
                    break
        await model.aclose()
    assert notices[0].delay == 20.0


async def test_server_errors_retry_then_give_up_with_the_endpoint_named() -> None:
    with (
        ScriptedLLM(*[error(500, "boom")] * 3) as llm,
        pytest.raises(ModelError, match=r"failed after 3 attempts: HTTP 500: boom"),
    ):
        await collect(model_for(llm, max_retries=2))
    assert len(llm.requests) == 3
    llm.assert_complete()


async def test_dropped_stream_is_retried_and_partial_text_marked_void() -> None:
    with ScriptedLLM(drop("this text will be lost"), text("whole answer")) as llm:
        items = await collect(model_for(llm))
    notice = next(i for i in items if isinstance(i, RetryNotice))
    assert notice.discarded_text and "connection" in notice.reason
    assert items[-1].content == "whole answer"


async def test_timeout_is_retried() -> None:
    with ScriptedLLM(delayed(3, text("too late")), text("in time")) as llm:
        items = await collect(model_for(llm, request_timeout=0.5))
    notice = next(i for i in items if isinstance(i, RetryNotice))
    assert "timed out after 0.5 s" in notice.reason
    assert items[-1].content == "in time"


@pytest.mark.parametrize("status", [401, 403])
async def test_bad_key_fails_at_once_naming_the_setting_not_the_key(status: int) -> None:
    with (
        ScriptedLLM(error(status, "Incorrect API key provided: sk-test-123")) as llm,
        pytest.raises(ModelError) as info,
    ):
        await collect(model_for(llm))
    assert len(llm.requests) == 1
    assert "OPENAI_API_KEY" in info.value.message and "sk-test-123" not in info.value.message
    assert llm.headers[0]["authorization"] == "Bearer sk-test-123"


async def test_404_names_model_and_base_url() -> None:
    with (
        ScriptedLLM(error(404, "model not found")) as llm,
        pytest.raises(ModelError, match=r"model 'scripted'.*--base-url"),
    ):
        await collect(model_for(llm))
    assert len(llm.requests) == 1


async def test_context_overflow_is_its_own_error() -> None:
    message = "This model's maximum context length is 8192 tokens."
    with (
        ScriptedLLM(error(400, message, code="context_length_exceeded")) as llm,
        pytest.raises(ContextOverflowError),
    ):
        await collect(model_for(llm))


async def test_other_400_is_reported_verbatim_without_retry() -> None:
    with (
        ScriptedLLM(error(400, "temperature must be <= 2")) as llm,
        pytest.raises(ModelError, match=r"HTTP 400\): temperature must be <= 2"),
    ):
        await collect(model_for(llm))
    assert len(llm.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
async def test_malformed_json_is_a_clear_error(stream: bool) -> None:
    with ScriptedLLM(garbage()) as llm, pytest.raises(ModelError, match="malformed data"):
        await collect(model_for(llm, stream=stream))


async def test_refused_connection_gives_up_quickly_with_a_hint() -> None:
    model = OpenAIModel(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="k", model="m")
    started = anyio.current_time()
    with pytest.raises(ModelError, match=r"connection failed.*--base-url"):
        await collect(model)
    assert anyio.current_time() - started < 10


@contextlib.contextmanager
def black_hole() -> Iterator[str]:
    """A port whose accept queue is full: new connections hang, as to a dropped host."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):  # Linux keeps backlog + 1 connections waiting; then SYNs are dropped
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for sock in (*fillers, listener):
            sock.close()


async def test_an_endpoint_that_never_answers_connects_is_reported_within_the_budget() -> None:
    """Connect timeouts share one budget (10 s by default), not one per retry."""
    with black_hole() as url:
        model = OpenAIModel(
            base_url=url, api_key="k", model="m", connect_timeout=0.5, connect_budget=2.0
        )
        started = anyio.current_time()
        with pytest.raises(ModelError, match=r"could not connect within 0.5 s.*--base-url"):
            await collect(model)
        assert anyio.current_time() - started < 2.0 + 1.0  # the budget, plus a busy machine


async def test_409_is_not_retried() -> None:
    with ScriptedLLM(error(409, "conflict"), text("never")) as llm:
        with pytest.raises(ModelError, match="409"):
            await collect(model_for(llm))
        assert len(llm.requests) == 1


async def test_cancellation_is_not_swallowed() -> None:
    with ScriptedLLM(delayed(1, text("never"))) as llm:
        model = model_for(llm)
        with anyio.move_on_after(0.3) as scope:
            async for _ in model.stream(USER, []):
                pass
        await model.aclose()
    assert scope.cancelled_caught
