"""One decided tool call of a step, run and reported as events.

The loop (agent.loop.react) decides which calls run, in which groups and with which verdict;
this runs one of them: the server's tool, one of the agent's own, or nothing (a refusal
becomes the observation), in its `execute_tool` span, with the PostToolUse hooks, a note
when the model repeats a call that keeps returning the same, and the result's images
saved for the user. Its events (started, progress, task status, finished) go to the
step's stream; the observation goes into `results` for the loop to put in memory in order.

A call that repeats one that already succeeded in this request, with nothing changed since
(no call that may change state has run in between; for a read, in the reply just before), is
not run again: its answer is "already done" and the earlier result. A small model at
temperature 0 otherwise writes the same file until max_steps (issue 33: 9 identical writes,
45% of a benchmark's tokens).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, NamedTuple

import anyio
from anyio.abc import ObjectSendStream

from agent.common.images import ImageStore, SavedImage
from agent.extensions.hooks import HookOutcome, Hooks, ToolUse
from agent.extensions.telemetry import Span
from agent.loop.events import (
    Event,
    Notice,
    TaskUpdate,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
)
from agent.loop.reply_calls import Call
from agent.loop.tool_offer import TERMINATE, ToolBox, ToolOffer
from agent.tools.agent_tool import CallContext
from agent.tools.results import (
    Observation,
    envelope,
    error_observation,
    save_images,
    strip_marker,
)
from agent.tools.stored import ResultStore

REPEAT_LIMIT = 3
DONE_ARGUMENTS = 120  # characters of a call's arguments in a list of what was done
DONE_LINES = 20
DONE_QUOTE = 300  # characters of an earlier result short enough to repeat as "already done"
ALREADY_DONE = (
    "[already done: this same call succeeded earlier in this request and nothing has changed "
    "since, so it was not run again. If that finishes the request, answer the user now.]"
    "{result}"
)
SAME_REPLY = "[not run: the same call as an earlier one in this reply; see its result]"
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
OnTask = Callable[[Any], Awaitable[None]]


class Success(NamedTuple):
    """A call that succeeded this run: what it answered, and when (the count of changing
    calls run by then, and the reply it last answered)."""

    server: str
    body: str  # the result without its envelope
    changes: int
    reply: int


class CallRunner:
    """Runs the calls of one conversation; counts repeats within a run."""

    def __init__(
        self,
        tools: ToolBox,
        offer: ToolOffer,
        *,
        hooks: Hooks | None = None,
        results: ResultStore | None = None,
        image_store: ImageStore | None = None,
    ) -> None:
        self.tools = tools
        self.offer = offer
        self.hooks = hooks
        self.results = results  # big results kept whole, paged with read_result (None: cut)
        self.image_store = image_store  # where tools' images are saved for the user
        self._seen: Counter[tuple[str, str, str]] = Counter()
        self._succeeded: dict[tuple[str, str], Success] = {}
        self._changes = 0  # calls run that may have changed state, this run
        self._replies = 0  # replies of this run whose calls were marked

    def new_run(self) -> None:
        self._seen = Counter()
        self._succeeded = {}
        self._changes = 0
        self._replies = 0

    def mark_repeats(self, calls: list[Call]) -> list[Call]:
        """Calls of a reply that need not run: a repeat of a call that succeeded with nothing
        changed since gets its earlier result; a second copy in the same reply gets a note."""
        self._replies += 1
        marked: list[Call] = []
        in_reply: set[tuple[str, str]] = set()
        for call in calls:
            key = _key(call)
            if call.problem is not None or call.name == TERMINATE:
                marked.append(call)
                continue
            if key in in_reply:
                marked.append(replace(call, done=SAME_REPLY))
                continue
            in_reply.add(key)
            earlier = self._succeeded.get(key)
            if earlier is not None and self._unchanged(call, earlier):
                # A short result is repeated (the server's words stay marked as its own); a
                # long one is above already, and repeating it costs its tokens again.
                quote = (
                    f" Its result was:\n{envelope(earlier.server, earlier.body)}"
                    if len(earlier.body) <= DONE_QUOTE
                    else " Its result is above."
                )
                marked.append(replace(call, done=ALREADY_DONE.format(result=quote)))
                self._succeeded[key] = earlier._replace(reply=self._replies)  # answered now
                continue
            marked.append(call)
        return marked

    def _unchanged(self, call: Call, earlier: Success) -> bool:
        """Whether a call's earlier success still answers it: nothing that may change state
        ran since, and for a read, it was the reply just before (a read of the outside world,
        a clock, a screen or a job's status, may give another answer later)."""
        if earlier.changes != self._changes:
            return False
        read_only = call.spec is not None and call.spec.read_only
        return not read_only or earlier.reply == self._replies - 1

    def done_lines(self) -> list[str]:
        """What succeeded this run, a line a call (the call as the model wrote it; no result
        text: that is the server's, and these lines are ours, outside any data marker)."""
        lines = []
        for name, arguments in self._succeeded:  # in the order they first succeeded
            if len(arguments) > DONE_ARGUMENTS:
                arguments = arguments[:DONE_ARGUMENTS] + "…}"
            lines.append(f"- {name} {arguments}: succeeded")
        return lines[-DONE_LINES:]

    def _remember(self, call: Call, observation: Observation) -> None:
        """What a call that ran did this run: its success, and whether anything may have
        changed (the agent's own tools only read)."""
        if call.spec is None:
            return
        if not call.spec.read_only:
            self._changes += 1
        if not observation.is_error:
            body = strip_marker(observation.text)
            self._succeeded[_key(call)] = Success(
                call.spec.server, body, self._changes, self._replies
            )

    def where(self, call: Call) -> tuple[str, str]:
        """(server, tool) of a call: the agent's own tools are "agent", a name no server has
        is "" (no server)."""
        if call.spec is not None:
            return call.spec.server, call.spec.name
        own = call.name == TERMINATE or call.name in self.offer.own_tools()
        return ("agent" if own else ""), call.name

    def hook_use(self, call: Call) -> ToolUse | None:
        """The call as the user's hooks see it: a server's tool, or one of the agent's own
        as server "agent"; None for what no hook sees (a problem, terminate, no such tool)."""
        if call.problem is not None or call.done is not None or call.name == TERMINATE:
            return None
        server, tool = self.where(call)
        return ToolUse(call.id, call.name, server, tool, call.arguments) if server else None

    async def run(
        self,
        call: Call,
        refusal: str | None,
        pre: HookOutcome,
        send: ObjectSendStream[Event],
        results: dict[str, Observation],
        parent: Span,
    ) -> None:
        server, tool = self.where(call)
        async with send:
            await send.send(ToolCallStarted(call.id, call.name, server, tool, call.arguments))
            started = time.perf_counter()
            progress, on_task = _reporters(send, call.id, server, tool)
            with parent.child(
                f"execute_tool {call.name}",
                gen_ai__operation__name="execute_tool",
                gen_ai__tool__name=call.name,
                gen_ai__tool__call__id=call.id,
                mcp_agent__server=server,
                mcp_agent__tool=tool,
            ) as span:
                span.content("gen_ai.tool.call.arguments", call.arguments)
                observation = await self._observe(call, refusal, progress, span, on_task, send)
                _trace_tool_result(span, observation, refusal, started)
            if refusal is None and call.done is None:
                observation = await self._post_hooks(call, pre, observation, send)
                self._remember(call, observation)
            observation = self._note_repeats(call, observation)
            saved: tuple[SavedImage, ...] = ()
            if observation.images:  # no thread hop (and no reordering) for the common case
                observation, saved = await anyio.to_thread.run_sync(
                    save_images, self.image_store, observation
                )
            results[call.id] = observation
            await send.send(
                ToolCallFinished(
                    call.id,
                    call.name,
                    server,
                    tool,
                    call.arguments,
                    observation.text,
                    observation.is_error,
                    (time.perf_counter() - started) * 1000,
                    denied=refusal is not None and call.problem is None,
                    blocked=refusal is not None and pre.block is not None,
                    structured=observation.structured,
                    result=observation.result,
                    images=saved,
                )
            )

    async def _observe(
        self,
        call: Call,
        refusal: str | None,
        progress: Progress,
        span: Span,
        on_task: OnTask,
        send: ObjectSendStream[Event],
    ) -> Observation:
        if refusal is not None:
            return error_observation(None, refusal)
        if call.done is not None:
            return Observation(text=call.done)
        if (agent_tool := self.offer.own_tools().get(call.name)) is not None:
            if agent_tool.run_in is None:
                return await agent_tool.run(call.arguments)
            return await agent_tool.run_in(call.arguments, CallContext(call.id, send.send))
        if call.spec is None:
            return Observation(text="Finishing.")
        observation = await self.tools.call(  # exactly the approved (server, tool)
            call.name,
            call.arguments,
            progress=progress,
            spec=call.spec,
            meta=span.trace_meta() or None,  # W3C trace context for the server (SEP-414)
            on_task=on_task,
        )
        if self.results is not None:  # a cut result: kept whole, the model gets a handle
            observation = self.results.shortened(call.spec.server, observation)
        return observation

    async def _post_hooks(
        self, call: Call, pre: HookOutcome, observation: Observation, send: Any
    ) -> Observation:
        if self.hooks is None or (use := self.hook_use(call)) is None:
            return observation
        observation, warnings = await self.hooks.after_call(use, pre, observation)
        for warning in warnings:
            await send.send(Notice(warning, "warning"))
        return observation

    def _note_repeats(self, call: Call, observation: Observation) -> Observation:
        key = (call.name, json.dumps(call.arguments, sort_keys=True), observation.text)
        self._seen[key] += 1
        if self._seen[key] < REPEAT_LIMIT:
            return observation
        note = (
            f"\n[note from the agent: this exact call returned this exact result "
            f"{self._seen[key]} times; do not repeat it — use the result or change approach]"
        )
        return replace(observation, text=observation.text + note)


def _key(call: Call) -> tuple[str, str]:
    return call.name, json.dumps(call.arguments, sort_keys=True, ensure_ascii=False)


def _reporters(
    send: ObjectSendStream[Event], call_id: str, server: str, tool: str
) -> tuple[
    Callable[[float, float | None, str | None], Awaitable[None]], Callable[[Any], Awaitable[None]]
]:
    """The callbacks a server's progress and a task's status changes are reported through.
    A server may report after the call ended (or was given up on): that is dropped."""

    async def progress(done: float, total: float | None, message: str | None) -> None:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await send.send(ToolProgress(call_id, done, total, message))

    async def on_task(task: Any) -> None:
        update = TaskUpdate(
            call_id, server, tool, task.task_id, task.status, task.message, task.elapsed()
        )
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await send.send(update)

    return progress, on_task


def _trace_tool_result(
    span: Span, observation: Observation, refusal: str | None, started: float
) -> None:
    """An `execute_tool` span: duration, size, refusal, the result (as content), error."""
    span.set(
        mcp_agent__duration_ms=round((time.perf_counter() - started) * 1000, 1),
        mcp_agent__output_bytes=len(observation.text.encode()),
        mcp_agent__denied=refusal is not None,
    )
    span.content("gen_ai.tool.call.result", observation.text)
    if observation.is_error:  # the output is content: kept out, or redacted then cut
        span.fail("tool_error", observation.text)
