"""One decided tool call of a step, run and reported as events.

The loop (agent.loop.react) decides which calls run, in which groups and with which verdict;
this runs one of them: the server's tool, one of the agent's own, or nothing (a refusal
becomes the observation), in its `execute_tool` span, with the PostToolUse hooks, a note
when the model repeats a call that keeps returning the same, and the result's images
saved for the user. Its events (started, progress, task status, finished) go to the
step's stream; the observation goes into `results` for the loop to put in memory in order.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

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
from agent.tools.results import Observation, error_observation, save_images
from agent.tools.stored import ResultStore

REPEAT_LIMIT = 3
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
OnTask = Callable[[Any], Awaitable[None]]


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

    def new_run(self) -> None:
        self._seen = Counter()

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
        if call.problem is not None or call.name == TERMINATE:
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
                observation = await self._observe(call, refusal, progress, span, on_task)
                _trace_tool_result(span, observation, refusal, started)
            if refusal is None:
                observation = await self._post_hooks(call, pre, observation, send)
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
    ) -> Observation:
        if refusal is not None:
            return error_observation(None, refusal)
        if (agent_tool := self.offer.own_tools().get(call.name)) is not None:
            return await agent_tool.run(call.arguments)
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
