"""The ReAct loop with a scripted in-process model and coroutine tools."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from agent.common.errors import ContextOverflowError, ModelError
from agent.common.memory import Memory
from agent.loop.approval import ApprovalPolicy, ApprovalRequest, Decision
from agent.loop.events import (
    Event,
    Notice,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from agent.loop.react import Agent
from agent.model.model_types import Reply, ToolCall, Usage
from tests.support.fake_model import FakeModel, FakeTools, answer, calls, drain, sleep_then

pytestmark = pytest.mark.anyio


def finished(events: list[Event]) -> RunFinished:
    last = events[-1]
    assert isinstance(last, RunFinished)
    return last


def make(script: list[Any], tools: FakeTools | None = None, **kw: Any) -> tuple[Agent, FakeModel]:
    model = FakeModel(script)
    agent = Agent(model, tools or FakeTools({}), Memory(), **kw)
    return agent, model


async def echo(args: dict[str, Any]) -> str:
    return f"echo:{args.get('text')}"


async def test_plain_answer_streams_and_finishes() -> None:
    agent, model = make([answer("Hello there, friend")])
    events = await drain(agent, "hi")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello there, friend"
    done = finished(events)
    assert (done.status, done.answer, done.steps) == ("answered", "Hello there, friend", 1)
    assert done.usage.prompt_tokens == 10
    model.assert_complete()


async def test_tool_result_reaches_the_next_request() -> None:
    tools = FakeTools({"echo": echo})
    agent, model = make([calls(("echo", {"text": "x1"})), answer("done")], tools)
    done = finished(await drain(agent, "go"))
    assert done.answer == "done"
    tool_msgs = [m for m in model.requests[1] if m["role"] == "tool"]
    assert tool_msgs[0]["tool_call_id"] == "call_1" and "echo:x1" in tool_msgs[0]["content"]
    assert model.requests[1][0]["role"] == "system"


async def test_read_only_calls_run_concurrently_and_keep_call_order() -> None:
    b_started = anyio.Event()

    async def a(args: dict[str, Any]) -> str:
        await b_started.wait()  # deadlocks (and times out) if calls ran one after another
        return "A"

    async def b(args: dict[str, Any]) -> str:
        b_started.set()
        return "B"

    tools = FakeTools({"a": a, "b": b}, read_only=frozenset({"a", "b"}))
    agent, model = make([calls(("a", {}), ("b", {})), answer("ok")], tools)
    events = await drain(agent, "both")
    assert finished(events).status == "answered"
    order = [e.name for e in events if isinstance(e, ToolCallFinished)]
    assert order == ["b", "a"]  # b finished first ...
    tool_msgs = [m for m in model.requests[1] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [
        "call_1",
        "call_2",
    ]  # ... memory in call order
    assert tool_msgs[0]["content"] == "A"


async def test_invalid_json_and_unknown_tool_become_observations() -> None:
    agent, model = make(
        [calls(("echo", '{"text": "unterminated'), ("nope", {})), answer("recovered")],
        FakeTools({"echo": echo}),
    )
    events = await drain(agent, "go")
    assert finished(events).answer == "recovered"
    results = [e for e in events if isinstance(e, ToolCallFinished)]
    assert all(r.is_error for r in results)
    tool_msgs = [m["content"] for m in model.requests[1] if m["role"] == "tool"]
    assert "not valid JSON" in tool_msgs[0] and "unknown tool 'nope'" in tool_msgs[1]
    assistant = [m for m in model.requests[1] if m["role"] == "assistant"][0]
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_max_steps_stops_the_run() -> None:
    script = [calls(("echo", {"text": str(i)})) for i in range(3)]
    agent, _ = make(script[:2], FakeTools({"echo": echo}), max_steps=2)
    events = await drain(agent, "loop")
    done = finished(events)
    assert (done.status, done.steps) == ("max_steps", 2)
    assert not [e for e in events if isinstance(e, Notice)]  # said once, by the finish


async def test_terminate_ends_the_run_with_its_answer() -> None:
    agent, _ = make([calls(("terminate", {"status": "success", "answer": "all set"}))])
    done = finished(await drain(agent, "finish"))
    assert (done.status, done.answer) == ("answered", "all set")


async def test_repeated_identical_failing_calls_are_noticed() -> None:
    async def fails(args: dict[str, Any]) -> str:
        raise ValueError("no such file")

    script = [calls(("read", {"path": "x"})) for _ in range(3)] + [answer("stop")]
    agent, model = make(script, FakeTools({"read": fails}))
    await drain(agent, "go")
    last_tool = [m for m in model.requests[3] if m["role"] == "tool"][-1]
    assert "3 times" in last_tool["content"]


async def test_a_repeat_of_a_call_that_succeeded_is_answered_without_running_it() -> None:
    """Issue 33 #1: the same write, nothing changed since, is not progress: it is answered
    "already done" with the earlier result; after another change it runs again."""
    tools = FakeTools({"write": echo, "other": echo})
    script = [
        calls(("write", {"text": "a"})),
        calls(("write", {"text": "a"}), ("write", {"text": "a"}), ("other", {"text": "b"})),
        calls(("write", {"text": "a"})),
        answer("stop"),
    ]
    agent, model = make(script, tools)
    assert finished(await drain(agent, "go")).status == "answered"
    assert tools.calls == [
        ("write", {"text": "a"}),
        ("other", {"text": "b"}),
        ("write", {"text": "a"}),
    ]
    second = [m["content"] for m in model.requests[2] if m["role"] == "tool"][-3:]
    assert second[0].startswith("[already done:") and "echo:a" in second[0]
    assert second[1].startswith("[not run: the same call as an earlier one in this reply")


async def test_a_reply_that_only_repeats_a_succeeded_write_ends_the_turn() -> None:
    """Issue 42 #5: answering "already done" cost a whole request, after which a small model
    repeated the write again; the turn ends with what was done instead."""
    tools = FakeTools({"write": echo})
    script = [calls(("write", {"text": "a"})), calls(("write", {"text": "a"}))]
    agent, model = make(script, tools)
    done = finished(await drain(agent, "go"))
    assert done.status == "answered" and len(model.requests) == 2
    assert done.answer == 'Done in this request:\n- write {"text": "a"}: succeeded'
    assert tools.calls == [("write", {"text": "a"})]


async def test_model_error_ends_run_with_error_status() -> None:
    agent, _ = make([ModelError("API key rejected")])
    done = finished(await drain(agent, "x"))
    assert done.status == "error" and "API key" in (done.error or "")


async def test_context_overflow_resends_a_smaller_request() -> None:
    agent, model = make([answer("first"), ContextOverflowError("too long"), answer("fits now")])
    await drain(agent, "an earlier question")
    done = finished(await drain(agent, "x"))
    assert done.answer == "fits now" and len(model.requests) == 3
    assert len(model.requests[2]) < len(model.requests[1])  # never the same request again


async def test_empty_reply_asks_the_model_to_continue() -> None:
    agent, model = make([answer(""), answer("real answer")])
    done = finished(await drain(agent, "x"))
    assert done.answer == "real answer" and done.steps == 2


async def test_unapproved_write_tool_is_refused_as_observation() -> None:
    asked: list[ApprovalRequest] = []

    async def deny(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return "no"

    tools = FakeTools({"write": echo, "read": echo}, read_only=frozenset({"read"}))
    agent, model = make(
        [calls(("write", {"text": "w"}), ("read", {"text": "r"})), answer("ok")],
        tools,
        approval=ApprovalPolicy(mode="ask", ask=deny),
    )
    events = await drain(agent, "go")
    assert [r.tool for r in asked] == ["write"]
    assert tools.calls == [("read", {"text": "r"})]
    denied = [e for e in events if isinstance(e, ToolCallFinished) and e.denied]
    assert [e.name for e in denied] == ["write"]
    assert "declined" in [m for m in model.requests[1] if m["role"] == "tool"][0]["content"]


async def test_always_approval_lasts_for_that_tool_only() -> None:
    answers: Iterator[Decision] = iter(["always", "no"])

    async def ask(request: ApprovalRequest) -> Decision:
        return next(answers)

    policy = ApprovalPolicy(mode="ask", ask=ask)
    tools = FakeTools({"w1": echo, "w2": echo})
    agent, _ = make(
        [calls(("w1", {})), calls(("w1", {"text": "2"}), ("w2", {})), answer("ok")],
        tools,
        approval=policy,
    )
    await drain(agent, "go")
    assert [name for name, _ in tools.calls] == ["w1", "w1"]


async def test_no_approval_callback_refuses_writes() -> None:
    tools = FakeTools({"w": echo})
    agent, model = make(
        [calls(("w", {})), answer("ok")], tools, approval=ApprovalPolicy(mode="ask", ask=None)
    )
    await drain(agent, "go")
    assert tools.calls == []
    assert "--yes" in [m for m in model.requests[1] if m["role"] == "tool"][0]["content"]


async def test_cancelling_a_slow_tool_keeps_memory_valid() -> None:
    started = anyio.Event()

    async def slow(args: dict[str, Any]) -> str:
        started.set()
        return await sleep_then(30, "late")

    agent, model = make(
        [calls(("slow", {}), ("echo", {"text": "q"})), answer("after")],
        FakeTools({"slow": slow, "echo": echo}),
    )
    with anyio.CancelScope() as scope:
        async for event in agent.run("first"):
            if isinstance(event, ToolCallStarted):
                await started.wait()
                scope.cancel()
    assert agent.memory.pending_call_ids() == []
    tool_msgs = [m for m in agent.memory.messages if m["role"] == "tool"]
    assert len(tool_msgs) == 2 and "cancelled" in tool_msgs[0]["content"]
    done = finished(await drain(agent, "second"))
    assert done.answer == "after"
    roles = [m["role"] for m in model.requests[-1]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]


async def test_multi_turn_memory_carries_tool_results() -> None:
    agent, model = make(
        [calls(("echo", {"text": "t1"})), answer("one"), answer("two")], FakeTools({"echo": echo})
    )
    await drain(agent, "first")
    await drain(agent, "second")
    assert any("echo:t1" in (m.get("content") or "") for m in model.requests[-1])


async def test_a_repeated_call_id_cannot_carry_one_approval_to_another_call() -> None:
    """Approvals and results are keyed by call id: a model repeating one must not get a
    refused destructive call run on the verdict of a read-only call."""
    same_id = Reply(
        content="",
        tool_calls=(
            ToolCall("call_1", "write", '{"text": "w"}'),
            ToolCall("call_1", "read", '{"text": "r"}'),
        ),
        usage=Usage(10, 5),
        finish_reason="tool_calls",
    )
    tools = FakeTools({"write": echo, "read": echo}, read_only=frozenset({"read"}))
    agent, model = make(
        [same_id, answer("ok")], tools, approval=ApprovalPolicy(mode="ask", ask=None)
    )
    await drain(agent, "go")
    assert tools.calls == [("read", {"text": "r"})]
    results = [m for m in model.requests[1] if m["role"] == "tool"]
    assert len({m["tool_call_id"] for m in results}) == 2
    assert "--yes" in results[0]["content"] and results[1]["content"] == "echo:r"
    sent = [m for m in model.requests[1] if m.get("tool_calls")][0]["tool_calls"]
    assert [c["id"] for c in sent] == [m["tool_call_id"] for m in results]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("[" * 5000 + "]" * 5000, "not usable JSON"),
        ('{"a": ' * 100 + "1" + "}" * 100, "nested deeper than 64 levels"),
        ('{"x": NaN}', "NaN is not valid JSON"),
        ('{"x": 1e999}', None),  # a huge number is still a number
    ],
)
async def test_pathological_arguments_become_observations(
    arguments: str, problem: str | None
) -> None:
    tools = FakeTools({"echo": echo})
    reply = Reply("", (ToolCall("c1", "echo", arguments),), Usage(1, 1), "tool_calls")
    agent, model = make([reply, answer("ok")], tools)
    done = finished(await drain(agent, "go"))
    assert done.status == "answered"
    result = [m for m in model.requests[1] if m["role"] == "tool"][0]["content"]
    if problem is None:
        assert tools.calls and result.startswith("echo:")
    else:
        assert tools.calls == [] and problem in result


async def test_terminate_with_a_structured_answer_gives_json_text() -> None:
    reply = calls(("terminate", {"status": "success", "answer": {"total": 3}}))
    agent, _ = make([reply])
    assert finished(await drain(agent, "go")).answer == '{"total": 3}'


async def test_read_only_mode_refuses_writes_and_names_the_way_out() -> None:
    async def never(request: ApprovalRequest) -> Decision:
        raise AssertionError("read-only mode never asks")

    tools = FakeTools({"w": echo})
    policy = ApprovalPolicy(mode="read-only", ask=never)
    agent, model = make([calls(("w", {})), answer("ok")], tools, approval=policy)
    await drain(agent, "go")
    assert tools.calls == []
    result = [m for m in model.requests[1] if m["role"] == "tool"][0]["content"]
    assert "read-only" in result and "/approve" in result


async def test_calls_after_terminate_in_the_same_reply_do_not_run() -> None:
    tools = FakeTools({"w": echo})
    reply = calls(("terminate", {"status": "success", "answer": "done"}), ("w", {"text": "x"}))
    agent, _ = make([reply], tools)
    events = await drain(agent, "go")
    assert finished(events).answer == "done"
    assert tools.calls == []
    skipped = [e for e in events if isinstance(e, ToolCallFinished) and e.name == "w"]
    assert skipped[0].is_error and "terminate" in skipped[0].output


async def test_made_up_call_ids_never_collide_with_the_models_own() -> None:
    """Ids call_1_3, call_1, call_1: renaming the third to call_1_3 would share the first's."""
    reply = Reply(
        "",
        (
            ToolCall("call_1_3", "write", '{"text": "w"}'),
            ToolCall("call_1", "read", '{"text": "r1"}'),
            ToolCall("call_1", "read", '{"text": "r2"}'),
        ),
        Usage(1, 1),
        "tool_calls",
    )
    tools = FakeTools({"write": echo, "read": echo}, read_only=frozenset({"read"}))
    agent, model = make([reply, answer("ok")], tools, approval=ApprovalPolicy(mode="ask"))
    await drain(agent, "go")
    assert [name for name, _ in tools.calls] == ["read", "read"]  # the write stays refused
    ids = [m["tool_call_id"] for m in model.requests[1] if m["role"] == "tool"]
    assert len(set(ids)) == 3


async def test_calls_that_may_change_state_run_in_the_order_written() -> None:
    # One reply: create_directory, then move_file into it, then two reads. The writes run
    # one after another; the reads after them, together.
    log: list[str] = []

    async def create_directory(args: dict[str, Any]) -> str:
        log.append("mkdir start")
        for _ in range(5):
            await anyio.lowlevel.checkpoint()  # a concurrent call would start here
        log.append("mkdir end")
        return "created"

    async def move_file(args: dict[str, Any]) -> str:
        log.append("move")
        return "moved"

    async def read(args: dict[str, Any]) -> str:
        log.append(f"read {args['n']}")
        await anyio.lowlevel.checkpoint()
        log.append(f"read {args['n']} end")
        return "r"

    functions = {"create_directory": create_directory, "move_file": move_file, "read": read}
    tools = FakeTools(functions, read_only=frozenset({"read"}))
    script = [
        calls(("create_directory", {}), ("move_file", {}), ("read", {"n": 1}), ("read", {"n": 2})),
        answer("ok"),
    ]
    agent, model = make(script, tools)
    assert finished(await drain(agent, "go")).status == "answered"
    assert log[:3] == ["mkdir start", "mkdir end", "move"]
    assert log[3:5] == ["read 1", "read 2"]  # the reads overlap


async def test_the_nudge_after_an_empty_reply_restates_the_request() -> None:
    empty = Reply(content="", tool_calls=(), usage=Usage(1, 0), finish_reason="stop")
    agent, model = make([empty, answer("Tokyo is at UTC+9.")])
    done = finished(await drain(agent, "What is Tokyo's UTC offset?"))
    assert done.answer == "Tokyo is at UTC+9."
    nudge = model.requests[1][-1]
    assert nudge["role"] == "user" and "What is Tokyo's UTC offset?" in nudge["content"]
