"""The one door every tool call passes, whoever starts it.

A call the model makes and a call an app's page makes go through the same steps, in the same
order: the user's PreToolUse hooks (which may block it, change its input or ask for the
user), the approval policy, the run itself (traced, its PostToolUse hooks, its images
saved: agent.loop.call_runner) and a record in the transcript. Before this module the loop held
the first half and the apps host a second copy of the approval alone, so a hook that blocked a
tool for the model did not block a page's call of it (issue 29, defect 8). Nothing else in
agent/ may call a server's tool: tests/test_architecture.py forbids a second door.

The agent's own tools (read_result, read_resource, load_skill, find_tools) pass the hooks
too, as server "agent" (they need no approval: they only read what the session already
has). `terminate` is not a tool call anyone acts on and passes nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import anyio

from agent.extensions.hooks import NO_OUTCOME, HookOutcome, Hooks
from agent.extensions.telemetry import NO_SPAN, Span
from agent.loop.approval import ApprovalPolicy, ApprovalRequest
from agent.loop.call_runner import CallRunner
from agent.loop.events import Event, Notice, ToolCallFinished
from agent.loop.reply_calls import Call
from agent.tools.results import Observation
from agent.tools.toolspec import ToolSpec

Asking = Callable[[Callable[[], Awaitable["Decided"]]], Awaitable["Decided"]]


@dataclass(frozen=True)
class Decided:
    """A call with what the hooks and the approval decided: `refusal` None means it runs."""

    call: Call
    refusal: str | None
    pre: HookOutcome


class ToolGate:
    """Hooks, approval, run, record: one instance per session, shared by every caller."""

    def __init__(
        self,
        runner: CallRunner,
        approval: ApprovalPolicy,
        hooks: Hooks | None = None,
        record: Callable[..., None] | None = None,
    ) -> None:
        self.runner = runner
        self.approval = approval
        self.hooks = hooks
        self.record = record  # the transcript's non-message records (calls from pages)
        self._numbers = itertools.count(1)

    async def decide(self, calls: list[Call]) -> AsyncIterator[Notice | Decided]:
        """Hooks first (PreToolUse, concurrently), then approve in order (a human answers one
        question at a time). Yields the hooks' notices, and a `Decided` per call in order."""
        hooked = await self._pre_hooks(calls)
        for call in calls:
            pre = hooked.get(call.id, NO_OUTCOME)
            for warning in pre.warnings:
                yield Notice(warning, "warning")
            if pre.arguments is not None and call.problem is None and pre.block is None:
                call = replace(call, arguments=pre.arguments)
                yield Notice(f"a PreToolUse hook changed the arguments of {call.name}", "info")
            blocked = pre.block and f"Not run: a PreToolUse hook blocked it: {pre.block}"
            if call.done is not None:  # answered from an earlier result: nothing runs
                refusal = None
            else:
                refusal = call.problem or blocked or await self._refusal(call, pre.ask)
            yield Decided(call, refusal, pre)

    async def run(
        self,
        decided: Decided,
        send: Any,
        results: dict[str, Observation],
        parent: Span = NO_SPAN,
    ) -> None:
        """Run one decided call (a refusal becomes its observation), reporting on `send`."""
        await self.runner.run(decided.call, decided.refusal, decided.pre, send, results, parent)

    async def call_from(
        self,
        origin: str,
        spec: ToolSpec,
        public: str,
        arguments: dict[str, Any],
        *,
        notify: Callable[[str], None] = lambda text: None,
        asking: Asking | None = None,
        parent: Span = NO_SPAN,
    ) -> tuple[Observation, bool]:
        """A call someone other than the model makes (an app's page): the same hooks,
        approval, run and trace, and a transcript record naming who made it. `asking` runs
        the decision where a question may be put to the user (the REPL's terminal); the
        call itself runs outside it. Returns the observation and whether it ran (False:
        refused, the observation says why)."""
        call = Call(f"{origin}-{next(self._numbers)}", public, arguments, spec)

        async def decide() -> Decided:
            async for item in self.decide([call]):
                if isinstance(item, Decided):
                    return item
                notify(item.message)
            raise AssertionError("decide yields a Decided for every call")

        decided = await (asking(decide) if asking is not None else decide())
        send, receive = anyio.create_memory_object_stream[Event](100)
        results: dict[str, Observation] = {}
        finished: ToolCallFinished | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.run, decided, send, results, parent)
            async with receive:
                async for event in receive:
                    if isinstance(event, ToolCallFinished):
                        finished = event
                    elif isinstance(event, Notice):
                        notify(event.message)
        observation = results[call.id]
        if self.record is not None and finished is not None:
            self.record(
                "tool_call",
                origin=origin,
                server=spec.server,
                tool=spec.name,
                name=public,
                arguments=decided.call.arguments,
                is_error=observation.is_error,
                output=observation.text,
                denied=decided.refusal is not None,
            )
        return observation, decided.refusal is None

    async def _refusal(self, call: Call, hook_asks: str | None = None) -> str | None:
        if call.spec is None:
            return None
        request = ApprovalRequest(
            call.spec.server, call.spec.name, call.name, call.arguments, call.spec
        )
        verdict = await self.approval.check(request, hook_asks)
        return None if verdict.allowed else verdict.reason

    async def _pre_hooks(self, calls: list[Call]) -> dict[str, HookOutcome]:
        """PreToolUse hooks of every call that may run (servers' tools and the agent's own),
        all at once."""
        if self.hooks is None or not self.hooks.has("PreToolUse"):
            return {}
        return await self.hooks.before_calls([u for c in calls if (u := self.runner.hook_use(c))])
