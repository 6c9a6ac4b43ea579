"""The ReAct loop: think (ask the model), act (run its tool calls), observe, repeat.

`Agent.run` is the one loop: an async generator of typed events. A step says what happens
next (a final answer, run again, or stop), and the loop is a short match on that. The loop
never prints; front ends consume its events.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import anyio
from anyio.abc import ObjectSendStream

from agent.common.checkpoints import Checkpoints
from agent.common.errors import ContextOverflowError, ModelError, ToolsUnsupportedError
from agent.common.images import ImageStore
from agent.common.memory import Fitted, Memory
from agent.extensions.hooks import NO_OUTCOME, HookOutcome, Hooks, with_context
from agent.extensions.telemetry import NO_SPAN, OFF, Span, Telemetry
from agent.loop.approval import ApprovalPolicy
from agent.loop.call_runner import CallRunner
from agent.loop.compaction import compact_memory
from agent.loop.context_budget import ContextBudget
from agent.loop.events import (
    AssistantMessage,
    Event,
    Notice,
    RunFinished,
    RunStarted,
    StepStarted,
    ToolCallFinished,
    Usage,
)
from agent.loop.gate import Decided, ToolGate
from agent.loop.no_answer import ANSWER_NOW, cut_short, empty_reply_nudge, ending, no_answer
from agent.loop.reply_calls import Call, batches, parse_calls, wire
from agent.loop.textcalls import Mode as ToolCallMode
from agent.loop.textcalls import TextCallReader
from agent.loop.tool_offer import TERMINATE, AgentTool, ToolBox, ToolOffer
from agent.loop.vision import REJECTED_NOTICE, Vision, has_images, image_message, without_images
from agent.model.model_types import ChatModel, Reply
from agent.tools.results import Observation
from agent.tools.search import ToolSearch
from agent.tools.stored import ResultStore

OVERFLOW_RESENDS = 3  # smaller re-sends after the server says a request did not fit


@dataclass(frozen=True)
class FinalAnswer:
    text: str


@dataclass(frozen=True)
class RunAgain:
    pass


NextStep = FinalAnswer | RunAgain


@dataclass
class RefusedCalls:
    """A run's calls of servers' tools, and how many the approval policy refused (not
    approved, disallowed, declined): a run whose every call was refused did nothing it was
    asked to, and ends with status `refused` (exit 4) rather than `answered`. A call a
    PreToolUse hook blocked is the user's own guard at work, not a missing permission (the
    model is told why and may go on another way): it counts as a call, not a refusal."""

    calls: int = 0
    refused: int = 0

    def count(self, event: Event) -> None:
        if isinstance(event, ToolCallFinished) and event.server not in ("", "agent"):
            self.calls += 1
            self.refused += event.denied and not event.blocked

    def finished(self, text: str, step: int, usage: Usage) -> RunFinished:
        if self.calls and self.refused == self.calls:
            why = f"every tool call of this run was refused ({self.calls})"
            return RunFinished("refused", text, step, usage, why)
        return RunFinished("answered", text, step, usage)


class Agent:
    """One conversation: a model, the tools, the memory and the approval policy."""

    def __init__(
        self,
        model: ChatModel,
        tools: ToolBox,
        memory: Memory,
        *,
        max_steps: int = 20,
        context_window: int = 128_000,
        reserve_tokens: int = 4096,
        approval: ApprovalPolicy | None = None,
        agent_tools: Callable[[], Mapping[str, AgentTool]] | None = None,
        tool_search: ToolSearch | None = None,
        vision: Vision = "auto",
        tool_calls: ToolCallMode = "auto",
        hooks: Hooks | None = None,
        results: ResultStore | None = None,
        price: Callable[[Usage], Usage] | None = None,
        compact_at: float = 0.0,
        telemetry: Telemetry = OFF,
        image_store: ImageStore | None = None,
        checkpoints: Checkpoints | None = None,
    ) -> None:
        self.model = model
        self.tools = tools
        self.memory = memory
        self.max_steps = max_steps
        self.approval = approval or ApprovalPolicy(mode="yes")
        self.hooks = hooks  # the user's hooks (agent.extensions.hooks); None: none configured
        # Snapshots before calls that may change files, for /undo (agent.common.checkpoints).
        self.checkpoints = checkpoints
        self.telemetry = (
            telemetry  # spans of runs, steps, requests, calls (agent.extensions.telemetry)
        )
        # The window, what was learnt about it, and when to compact (agent.loop.context_budget).
        self.budget = ContextBudget(
            memory,
            context_window=context_window,
            reserve_tokens=reserve_tokens,
            compact_at=compact_at,
        )
        # What each request offers: servers' tools, ours, terminate (agent.loop.tool_offer).
        self.offer = ToolOffer(
            tools,
            agent_tools=agent_tools,
            search=tool_search,
            results=results,
            hidden=self.approval.hidden,  # --disallowed-tools: never offered
        )
        self.offer.offer(  # tools a resumed session used stay offered
            call["function"]["name"]
            for message in memory.messages
            for call in message.get("tool_calls") or ()
        )
        # Runs each decided call and reports it (agent.loop.call_runner).
        self.calls = CallRunner(
            tools, self.offer, hooks=hooks, results=results, image_store=image_store
        )
        # The one door of every tool call: hooks, approval, run, record (agent.loop.gate).
        self.gate = ToolGate(self.calls, self.approval, hooks, self._record)
        # auto: calls written as text to offered tools run; text: the endpoint takes no
        # `tools` (set, or learnt from its refusal), so they are described in the prompt.
        self.text_calls = TextCallReader(tool_calls)
        self.vision = vision  # auto turns off when the endpoint refuses an image
        # One request's usage -> with its cost (agent.model.prices); none: every cost is unknown.
        self._price = price or (lambda usage: replace(usage, unpriced=1))
        self.session_usage = Usage()
        self._run_usage = Usage()
        self._stop_active = False  # a Stop hook sent the model back to work this run
        self._empties = 0  # replies of this run that were no answer
        self._repeats = 0  # steps of this run whose every call was already done
        self._answer_only = False  # the next request offers no tools: time to answer
        self._step_span: Span = NO_SPAN
        self._request = ""

    @property
    def context_window(self) -> int:
        """The model's window in tokens: as configured, or smaller as the server said."""
        return self.budget.context_window

    @property
    def run_usage(self) -> Usage:
        """Tokens of the current (or last) request."""
        return self._run_usage

    def count_usage(self, usage: Usage) -> None:
        """Tokens of one request (the loop's, or a server's sampling request), priced."""
        usage = self._price(usage)
        self._run_usage += usage
        self.session_usage += usage

    def add_usage(self, usage: Usage) -> None:
        """Tokens already priced elsewhere: a sub-agent's run (agent.loop.subagents)."""
        self._run_usage += usage
        self.session_usage += usage

    async def run(self, request: str) -> AsyncGenerator[Event, None]:
        """Handle one user request; the last event is always RunFinished (unless cancelled).

        Traced (when telemetry is on) from the events: a span for the run, one per step."""
        run = self.telemetry.run(request)
        try:
            async for event in self._run(request):
                if isinstance(event, StepStarted | RunFinished):
                    self._step_span.end()
                    self._step_span = NO_SPAN
                if isinstance(event, StepStarted):
                    self._step_span = run.child(f"step {event.step}", mcp_agent__step=event.step)
                elif isinstance(event, RunFinished):
                    _trace_run_finished(run, event)
                yield event
        except BaseException as exc:
            self._step_span.fail(type(exc).__name__)
            run.fail(type(exc).__name__)
            raise
        finally:
            self._step_span.end()
            self._step_span = NO_SPAN
            run.end()

    async def _run(self, request: str) -> AsyncIterator[Event]:
        self._run_usage, self._stop_active, self._empties = Usage(), False, 0
        self._repeats, self._answer_only = 0, False
        self.calls.new_run()
        self._request = request
        if self.checkpoints is not None:
            self.checkpoints.begin_turn(request)
        self.budget.new_run()
        yield RunStarted(request)
        hooked = await self._fire("UserPromptSubmit", request)
        for warning in hooked.warnings:
            yield Notice(warning, "warning")
        if hooked.block is not None:
            reason = f"a UserPromptSubmit hook blocked the request: {hooked.block}"
            yield RunFinished("error", None, 0, self._run_usage, reason)
            return
        self.memory.add_user(with_context(request, hooked.context))
        step = 0
        refused = RefusedCalls()
        try:
            while step < self.max_steps:
                step += 1
                yield StepStarted(step, self.max_steps)
                outcome: NextStep = RunAgain()
                async for item in self._step():
                    if isinstance(item, FinalAnswer | RunAgain):
                        outcome = item
                    else:
                        refused.count(item)
                        yield item
                match outcome:
                    case FinalAnswer(text):
                        yield refused.finished(text, step, self._run_usage)
                        return
                    case RunAgain():
                        continue
            yield RunFinished(
                "max_steps",
                None,
                step,
                self._run_usage,
                f"max_steps ({self.max_steps}) reached before an answer",
            )
        except ModelError as exc:
            yield RunFinished("error", None, step, self._run_usage, exc.message)
        finally:
            self._close_pending("cancelled by the user before it finished")

    async def _step(self) -> AsyncIterator[Event | NextStep]:
        reply: Reply | None = None
        async for item in self._think():
            if isinstance(item, Reply):
                reply = item
            else:
                yield item
        assert reply is not None
        calls = parse_calls(reply.tool_calls, self.offer, cut=reply.finish_reason == "length")
        calls = self.calls.mark_repeats(calls)
        yield AssistantMessage(reply.content, tuple(c.name for c in reply.tool_calls))
        if not calls and (why := no_answer(reply.content)) is not None:
            # Kept out of memory: a small model imitates an empty or echoed turn it is shown.
            self._empties += 1
            if self._empties > 1:
                async for outcome in self._finish(ending(self.calls.done_lines())):
                    yield outcome
                return
            yield Notice(why, "warning")
            self.memory.add_user(empty_reply_nudge(why, self.calls.done_lines(), self._request))
            yield RunAgain()
            return
        self.memory.add_assistant(reply.content, [wire(c) for c in calls])
        if not calls:
            if reply.finish_reason == "length":
                yield Notice(cut_short(self.model, reply), "warning")
            async for outcome in self._finish(reply.content):
                yield outcome
            return
        async for event in self._act(calls):
            yield event
        if all(c.done is not None for c in calls):
            if any(c.spec is not None and not c.spec.read_only for c in calls):
                # A write repeated after it succeeded: the work is done, and one more
                # request only repeats it (a 1.5B model did, at a whole request's cost).
                listing = "\n".join(self.calls.done_lines())
                async for outcome in self._finish(f"Done in this request:\n{listing}"):
                    yield outcome
                return
            self._repeats += 1
            if self._repeats > 1:  # told once it was done, it repeated again: answer now
                self._answer_only = True
                self.memory.add_user(ANSWER_NOW)
                yield Notice("the model repeats finished calls; asking it for the answer", "info")
        terminate = next((c for c in calls if c.name == TERMINATE and c.problem is None), None)
        if terminate is not None:
            answer = terminate.arguments.get("answer") or reply.content or "Done."
            text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            async for outcome in self._finish(text):
                yield outcome
            return
        yield RunAgain()

    async def _fire(self, event: str, text: str) -> HookOutcome:
        """The user's hooks of a prompt or Stop event (nothing to run: no cost)."""
        if self.hooks is None or not self.hooks.has(event):
            return NO_OUTCOME
        if event == "Stop":
            return await self.hooks.stop(text, self._stop_active)
        return await self.hooks.prompt(text)

    async def _finish(self, text: str) -> AsyncIterator[Event | NextStep]:
        """The answer, unless a Stop hook sends the model back to work with its reason (the
        next run of the hook is told so, `stop_hook_active`, to avoid an endless loop)."""
        hooked = await self._fire("Stop", text)
        for warning in hooked.warnings:
            yield Notice(warning, "warning")
        if hooked.block is None:
            yield FinalAnswer(text)
            return
        self._stop_active = True
        yield Notice(f"a Stop hook asked the model to go on: {hooked.block}", "info")
        self.memory.add_user(
            f"[A Stop hook of the user's did not let you stop yet]\n{hooked.block}"
        )
        yield RunAgain()

    def _tool_list(self) -> tuple[list[dict[str, Any]], int]:
        """The tools this request offers: none once the model must answer (a small model
        offered tools calls one again, however often it is told the work is done)."""
        if self._answer_only:
            return [], 0
        return self.offer.tool_list()

    async def _think(self) -> AsyncIterator[Event | Reply]:
        await self.tools.settle()
        tools, tools_tokens = self._tool_list()
        if self.budget.over_compaction_threshold(tools_tokens):
            self.budget.compaction_tried = True
            yield await self.compact(trigger="auto")
            tools, tools_tokens = self._tool_list()
        cap: int | None = None  # after an overflow: a budget below what was just refused
        last: Fitted | None = None
        for _ in range(OVERFLOW_RESENDS + 1):
            budget = self.budget.budget(tools_tokens)
            fitted = self.memory.fit(budget if cap is None else min(budget, cap))
            if last is not None and fitted.dropped <= last.dropped:
                raise ContextOverflowError(self.budget.no_room(tools_tokens))
            if notice := self.budget.dropped_notice(fitted, budget):
                yield notice
            last = fitted
            try:
                async for item in self._ask(fitted.messages, tools):
                    if isinstance(item, Reply):
                        self.count_usage(item.usage)
                        yield item
                        return
                    yield item
            except ToolsUnsupportedError:
                if self.text_calls.mode != "auto" or not tools:
                    raise
                self.text_calls.mode, last = "text", None
                yield Notice(
                    f"the endpoint takes no tools for model '{self.model.model}': the tools are "
                    "described in the system prompt and calls are read from the replies "
                    '(tool_calls = "text" for this session)',
                    "info",
                )
            except ContextOverflowError as exc:
                cap = self.budget.learn_overflow(exc, fitted, tools_tokens)
                yield self.budget.overflow_notice()
            except ModelError as exc:
                if (refused := self._refused_schema(exc, tools)) is not None:
                    tools, tools_tokens = self._tool_list()
                    last = None
                    yield Notice(
                        f"the endpoint refused the input schema of tool '{refused}'; sending it "
                        "simplified from now on",
                        "warning",
                    )
                    continue
                if not self._refused_images(exc, fitted.messages):
                    raise
                self.vision, last = "off", None  # text placeholders from now on
                self.memory.rewrite(lambda m: without_images(m) if has_images(m) else m)
                yield Notice(REJECTED_NOTICE, "warning")
        raise ContextOverflowError(self.budget.no_room(tools_tokens))

    async def _ask(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[Event | Reply]:
        """One model request in its telemetry span; calls written as text are read by
        agent.loop.textcalls (and the tools sent as text in text mode)."""
        with self._step_span.child(
            f"chat {self.model.model}",
            gen_ai__operation__name="chat",
            gen_ai__request__model=self.model.model,
        ) as span:
            async for item in self.text_calls.ask(self.model, messages, tools):
                if isinstance(item, Reply):
                    _trace_reply(span, item)
                yield item

    async def compact(self, focus: str = "", trigger: str = "manual") -> Notice:
        """Summarise older turns into one message (`/compact [focus]`, and automatically
        past `compact_at`); on failure, trimming stays the fallback. See agent.loop.compaction.
        The user's PreCompact hooks run first; exit 2 (or decision block) stops it."""
        hooked = NO_OUTCOME
        if self.hooks is not None and self.hooks.has("PreCompact"):
            hooked = await self.hooks.pre_compact(trigger, focus)
        if hooked.block is not None:
            return Notice(f"a PreCompact hook stopped the compaction: {hooked.block}", "warning")
        notice = await self._compact(focus, manual=trigger == "manual")
        if not hooked.warnings:
            return notice
        return Notice(f"{notice.message} ({'; '.join(hooked.warnings)})", "warning")

    async def _compact(self, focus: str, manual: bool = False) -> Notice:
        room = self.budget.room()
        notice, usage = await compact_memory(
            self.model, self.memory, room, focus, self._request, manual
        )
        self.count_usage(usage)
        self.budget.compacted()
        return notice

    def _refused_schema(self, exc: ModelError, tools: list[dict[str, Any]]) -> str | None:
        """The tool whose schema a 400 names, now sent simplified (not in text mode: no
        schema was sent as such)."""
        if self.text_calls.mode == "text":
            return None
        return self.offer.simplify_refused(exc, tools)

    def _refused_images(self, exc: ModelError, sent: list[dict[str, Any]]) -> bool:
        """With vision auto, a request with images that the endpoint refused as invalid
        (4xx) is taken as "this model cannot see"."""
        refused = exc.status is not None and 400 <= exc.status < 500 and exc.status != 429
        return self.vision == "auto" and refused and any(has_images(m) for m in sent)

    async def _act(self, calls: list[Call]) -> AsyncIterator[Event]:
        """Through the gate (agent.loop.gate): hooks, then approvals in order; the runs concurrent
        in batches, their events as they come, results into memory in call order."""
        decided: dict[str, Decided] = {}
        async for item in self.gate.decide(calls):
            if isinstance(item, Decided):
                decided[item.call.id] = item
            else:
                yield item
        calls = [decided[call.id].call for call in calls]  # a hook may have changed the input
        verdicts = {call_id: d.refusal for call_id, d in decided.items()}
        self.offer.offer(c.name for c in calls if c.spec is not None and c.problem is None)
        send, receive = anyio.create_memory_object_stream[Event](100)
        results: dict[str, Observation] = {}

        async def run_all() -> None:
            async with send:
                for batch in batches(calls, verdicts):
                    checkpoint = self._checkpoint(batch, verdicts, send)
                    async with checkpoint, anyio.create_task_group() as tg:
                        for call in batch:
                            span = self._step_span
                            tg.start_soon(
                                self.gate.run, decided[call.id], send.clone(), results, span
                            )

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(run_all)
                async with receive:
                    async for event in receive:
                        yield event
        finally:  # results in call order, keyed by id; a cut-short call is marked cancelled
            for call in calls:
                done = results.get(call.id)
                self.memory.add_tool_result(
                    call.id,
                    done.text if done else "Error: cancelled by the user before it finished",
                    structured=done.structured if done else None,
                )
            self._attach_images(calls, results)

    @asynccontextmanager
    async def _checkpoint(
        self, batch: list[Call], verdicts: Mapping[str, str | None], send: ObjectSendStream[Event]
    ) -> AsyncIterator[None]:
        """A snapshot before a batch that may change things runs, and after it (also when
        it was cut short: bounded by the snapshot's own deadline)."""
        changing = [
            (c.spec.server, c.spec.name)
            for c in batch
            if verdicts[c.id] is None and c.spec is not None and not c.spec.read_only
        ]
        if self.checkpoints is None or not changing:
            yield
            return
        if (notice := await self.checkpoints.before(changing)) is not None:
            await send.send(Notice(notice, "warning"))
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self.checkpoints.after()

    def _attach_images(self, calls: list[Call], results: dict[str, Observation]) -> None:
        """Images of this step's results, for the model, after them (see agent.loop.vision)."""
        if self.vision == "off":
            return
        images = [
            (call.spec.server if call.spec else "agent", image)
            for call in calls
            if (done := results.get(call.id)) is not None
            for image in done.images
        ]
        if (message := image_message(images)) is not None:
            self.memory.add_images(message)

    def _record(self, kind: str, **data: Any) -> None:
        """A transcript record beside the messages (a page's tool call), if there is one."""
        if self.memory.marker is not None:
            self.memory.marker(kind, **data)

    def _close_pending(self, reason: str) -> None:
        """Keep memory valid if a step was cut short: every call gets a result."""
        for call_id in self.memory.pending_call_ids():
            self.memory.add_tool_result(call_id, f"Error: {reason}")


def _trace_run_finished(run: Span, event: RunFinished) -> None:
    """The run's root span: how it ended, in how many steps, the tokens it used."""
    run.set(
        mcp_agent__status=event.status,
        mcp_agent__steps=event.steps,
        gen_ai__usage__input_tokens=event.usage.prompt_tokens if event.usage.known else None,
        gen_ai__usage__output_tokens=event.usage.completion_tokens if event.usage.known else None,
    )
    if event.status == "error":
        run.fail("run_error", event.error or "")


def _trace_reply(span: Span, reply: Reply) -> None:
    """A `chat` span: the tokens and finish reason of the reply."""
    known = reply.usage.known
    span.set(
        gen_ai__usage__input_tokens=reply.usage.prompt_tokens if known else None,
        gen_ai__usage__output_tokens=reply.usage.completion_tokens if known else None,
        gen_ai__response__finish_reasons=(reply.finish_reason,) if reply.finish_reason else None,
    )
