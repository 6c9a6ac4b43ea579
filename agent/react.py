"""The ReAct loop: think (ask the model), act (run its tool calls), observe, repeat.

`Agent.run` is the one loop: an async generator of typed events. A step says what happens
next (a final answer, run again, or stop), and the loop is a short match on that. The loop
never prints; front ends consume its events.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import anyio

from agent.approval import ApprovalPolicy, ApprovalRequest
from agent.compaction import compact_memory
from agent.errors import ContextOverflowError, ModelError, ToolsUnsupportedError
from agent.events import (
    AssistantMessage,
    Event,
    Notice,
    RunFinished,
    RunStarted,
    StepStarted,
    TaskUpdate,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    Usage,
)
from agent.hooks import NO_OUTCOME, HookOutcome, Hooks, ToolUse, with_context
from agent.images import ImageStore, SavedImage
from agent.llm import ChatModel, Reply, ToolCall
from agent.memory import Fitted, Memory, estimate_tokens
from agent.telemetry import NO_SPAN, OFF, Span, Telemetry
from agent.textcalls import Mode as ToolCallMode
from agent.textcalls import TextCallReader
from agent.tools.base import ToolSpec
from agent.tools.results import Observation, error_observation, save_images
from agent.tools.search import FIND_TOOLS, ToolSearch
from agent.tools.simplify import refused_tool, with_simplified
from agent.tools.stored import READ_RESULT, READ_RESULT_SCHEMA, ResultStore
from agent.vision import REJECTED_NOTICE, Vision, has_images, image_message, without_images

TERMINATE = "terminate"
REPEAT_LIMIT = 3
OVERFLOW_RESENDS = 3  # smaller re-sends after the server says a request did not fit
NUDGE_REQUEST_LIMIT = 2000  # characters of the request restated after an empty reply
MAX_ARGUMENT_DEPTH = 64  # nesting of a tool call's arguments; no real schema comes close
TERMINATE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TERMINATE,
        "description": "Finish the task. Call this when the request is fully handled; "
        "put the final answer for the user in `answer`.",
        "parameters": {
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["success", "failure"]},
                "answer": {"type": "string", "description": "The final answer for the user."},
            },
            "required": ["status"],
        },
    },
}
CUT_CALL = (
    'not run: your reply hit the output token limit (finish_reason "length") while you '
    "were writing tool calls, so this call may be incomplete. Send it again, with shorter "
    "arguments or fewer calls per reply."
)
# Names only the agent may use: servers' tools are renamed around them (read_resource is
# offered by agent.catalog when servers publish resources, load_skill by agent.skills).
AGENT_TOOL_NAMES = frozenset({TERMINATE, "read_resource", FIND_TOOLS, "load_skill", READ_RESULT})


@dataclass(frozen=True)
class AgentTool:
    """A tool the agent itself offers, next to the servers' tools."""

    schema: dict[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[Observation]]


class ToolBox(Protocol):
    """What the loop needs from the registry."""

    tools: dict[str, ToolSpec]

    def openai_tools(self) -> list[dict[str, Any]]: ...

    async def settle(self) -> None:
        """Finish re-listings that servers announced, before the tool list is read."""

    async def call(
        self,
        public_name: str,
        arguments: dict[str, Any],
        *,
        progress: Any = None,
        spec: ToolSpec | None = None,
        meta: dict[str, Any] | None = None,
        on_task: Any = None,
    ) -> Observation: ...


@dataclass(frozen=True)
class FinalAnswer:
    text: str


@dataclass(frozen=True)
class RunAgain:
    pass


NextStep = FinalAnswer | RunAgain


@dataclass(frozen=True)
class _Call:
    """One tool call of a reply, parsed and resolved (or with the reason it cannot run)."""

    id: str
    name: str
    arguments: dict[str, Any]
    spec: ToolSpec | None
    problem: str | None = None


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
    ) -> None:
        self._simplified: set[str] = set()  # tools whose schema the endpoint refused
        self.compact_at = compact_at  # share of the window that triggers compaction (0: off)
        self._compaction_tried = False  # this run: compacting again would not help
        self.telemetry = telemetry  # spans of runs, steps, requests, calls (agent.telemetry)
        self._step_span: Span = NO_SPAN
        self.results = results  # big results kept whole, paged with read_result (None: cut)
        self.model = model
        # One request's usage -> with its cost (agent.prices); none: every cost is unknown.
        self._price = price or (lambda usage: replace(usage, unpriced=1))
        self.hooks = hooks  # the user's hooks (agent.hooks); None: none configured
        self._stop_active = False  # a Stop hook sent the model back to work this run
        self.image_store = image_store  # where tools' images are saved for the user
        # auto: calls written as text to offered tools run; text: the endpoint takes no
        # `tools` (set, or learnt from its refusal), so they are described in the prompt.
        self.text_calls = TextCallReader(tool_calls)
        self.vision = vision  # auto turns off when the endpoint refuses an image
        # The agent's own tools besides terminate, asked for each step: they come and go
        # with what servers publish (read_resource once any server has resources).
        self._catalog_tools: Callable[[], Mapping[str, AgentTool]] = agent_tools or dict
        self._own_cache: tuple[tuple[object, ...], Mapping[str, AgentTool]] | None = None
        # Too many tools for every request: the model searches them (None: never).
        self.search = tool_search
        if tool_search is not None:  # tools a resumed session used stay offered
            tool_search.offer(
                call["function"]["name"]
                for message in memory.messages
                for call in message.get("tool_calls") or ()
            )
        self.tools = tools
        self.memory = memory
        self.max_steps = max_steps
        self.context_window = context_window
        self.reserve_tokens = reserve_tokens
        self.approval = approval or ApprovalPolicy(mode="yes")
        self.session_usage = Usage()
        self._run_usage = Usage()
        self._seen: Counter[tuple[str, str, str]] = Counter()
        self._tools_source: tuple[object, ...] | None = None
        self._tools_cache: list[dict[str, Any]] = []
        self._tools_tokens = 0
        self._token_scale = 1.0  # real tokens per estimated token, learnt from overflow errors
        self._dropped_shown = 0  # messages left out of the last request we told about

    @property
    def run_usage(self) -> Usage:
        """Tokens of the current (or last) request."""
        return self._run_usage

    def count_usage(self, usage: Usage) -> None:
        """Tokens of one request (the loop's, or a server's sampling request), priced."""
        usage = self._price(usage)
        self._run_usage += usage
        self.session_usage += usage

    async def run(self, request: str) -> AsyncIterator[Event]:
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
                    _trace_finish(run, event)
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
        self._run_usage, self._seen, self._stop_active = Usage(), Counter(), False
        self._request = request
        self._compaction_tried = False
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
        try:
            while step < self.max_steps:
                step += 1
                yield StepStarted(step, self.max_steps)
                outcome: NextStep = RunAgain()
                async for item in self._step():
                    if isinstance(item, FinalAnswer | RunAgain):
                        outcome = item
                    else:
                        yield item
                match outcome:
                    case FinalAnswer(text):
                        yield RunFinished("answered", text, step, self._run_usage)
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
        calls = self._parse_calls(reply.tool_calls, cut=reply.finish_reason == "length")
        self.memory.add_assistant(reply.content, [_wire(c) for c in calls])
        yield AssistantMessage(reply.content, tuple(c.name for c in reply.tool_calls))
        if not calls:
            if reply.content.strip():
                if reply.finish_reason == "length":
                    yield Notice(self._cut_short(reply), "warning")
                async for item in self._finish(reply.content):
                    yield item
                return
            yield Notice("the model returned an empty reply; asking it to continue", "warning")
            self.memory.add_user(self._empty_reply_nudge())
            yield RunAgain()
            return
        async for event in self._act(calls):
            yield event
        terminate = next((c for c in calls if c.name == TERMINATE and c.problem is None), None)
        if terminate is not None:
            answer = terminate.arguments.get("answer") or reply.content or "Done."
            text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            async for item in self._finish(text):
                yield item
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

    def _empty_reply_nudge(self) -> str:
        """The nudge after an empty reply restates the request: a small model answers the
        last user message alone, and a bare "answer the request" loses the task."""
        request = self._request
        if len(request) > NUDGE_REQUEST_LIMIT:
            request = request[:NUDGE_REQUEST_LIMIT] + " [...]"
        return (
            f"(Your last reply was empty. Answer this request, or call a tool for it:)\n{request}"
        )

    async def _think(self) -> AsyncIterator[Event | Reply]:
        await self.tools.settle()
        tools, tools_tokens = self._tool_list()
        if self._over_compaction_threshold(tools_tokens):
            self._compaction_tried = True
            yield await self.compact(trigger="auto")
            tools, tools_tokens = self._tool_list()
        cap: int | None = None  # after an overflow: a budget below what was just refused
        last: Fitted | None = None
        for _ in range(OVERFLOW_RESENDS + 1):
            budget = self._budget(tools_tokens)
            fitted = self.memory.fit(budget if cap is None else min(budget, cap))
            if last is not None and fitted.dropped <= last.dropped:
                raise ContextOverflowError(self._no_room(tools_tokens))
            if notice := self._dropped_notice(fitted, budget):
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
                cap = self._learn_overflow(exc, fitted, tools_tokens)
                yield Notice(
                    f"the request did not fit the model's context ({self.context_window} "
                    "tokens); trimming older messages and sending it again",
                    "warning",
                )
            except ModelError as exc:
                if (refused := self._refused_schema(exc, tools)) is not None:
                    self._simplified.add(refused)  # for the rest of the session
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
        raise ContextOverflowError(self._no_room(tools_tokens))

    async def _ask(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[Event | Reply]:
        """One model request in its telemetry span; calls written as text are read by
        agent.textcalls (and the tools sent as text in text mode)."""
        with self._step_span.child(
            f"chat {self.model.model}",
            gen_ai__operation__name="chat",
            gen_ai__request__model=self.model.model,
        ) as span:
            async for item in self.text_calls.ask(self.model, messages, tools):
                if isinstance(item, Reply):
                    _trace_reply(span, item)
                yield item

    def _over_compaction_threshold(self, tools_tokens: int) -> bool:
        if not self.compact_at or self._compaction_tried:
            return False
        size = estimate_tokens(self.memory.system_prompt) + tools_tokens
        size += sum(self.memory.cost(m) for m in self.memory.messages)
        return size * self._token_scale > self.compact_at * self.context_window

    async def compact(self, focus: str = "", trigger: str = "manual") -> Notice:
        """Summarise older turns into one message (`/compact [focus]`, and automatically
        past `compact_at`); on failure, trimming stays the fallback. See agent.compaction.
        The user's PreCompact hooks run first; exit 2 (or decision block) stops it."""
        hooked = NO_OUTCOME
        if self.hooks is not None and self.hooks.has("PreCompact"):
            hooked = await self.hooks.pre_compact(trigger, focus)
        if hooked.block is not None:
            return Notice(f"a PreCompact hook stopped the compaction: {hooked.block}", "warning")
        notice = await self._compact(focus)
        if not hooked.warnings:
            return notice
        return Notice(f"{notice.message} ({'; '.join(hooked.warnings)})", "warning")

    async def _compact(self, focus: str) -> Notice:
        reserve = min(self.reserve_tokens, self.context_window // 4)
        room = int((self.context_window - reserve) / self._token_scale)
        request = getattr(self, "_request", "")
        notice, usage = await compact_memory(self.model, self.memory, room, focus, request)
        self.count_usage(usage)
        self._dropped_shown = 0
        return notice

    def _refused_schema(self, exc: ModelError, tools: list[dict[str, Any]]) -> str | None:
        """The tool whose schema a 400 names, if it was sent and not simplified yet."""
        if exc.status != 400 or self.text_calls.mode == "text":
            return None
        names = [t["function"]["name"] for t in tools]
        name = refused_tool(exc.message, names)
        return name if name is not None and name not in self._simplified else None

    def _refused_images(self, exc: ModelError, sent: list[dict[str, Any]]) -> bool:
        """With vision auto, a request with images that the endpoint refused as invalid
        (4xx) is taken as "this model cannot see"."""
        refused = exc.status is not None and 400 <= exc.status < 500 and exc.status != 429
        return self.vision == "auto" and refused and any(has_images(m) for m in sent)

    def _budget(self, tools_tokens: int) -> int:
        """Tokens (in our estimate's units) the messages may use; never negative.

        The reply's reserve is at most a quarter of the window, so a small local context
        (2k-8k) with the default max_tokens still has room for the conversation.
        """
        window = self.context_window
        reserve = min(self.reserve_tokens, window // 4)
        return max(0, int((window - reserve) / self._token_scale) - tools_tokens)

    def _learn_overflow(self, exc: ContextOverflowError, sent: Fitted, tools_tokens: int) -> int:
        """Take the server's counts as the truth for every later request (a REPL keeps
        fitting), and return a budget below what was just sent, so the re-send is smaller."""
        sent_tokens = sum(self.memory.cost(m) for m in sent.messages)
        if exc.context_window:
            self.context_window = min(self.context_window, exc.context_window)
        if exc.request_tokens and sent_tokens + tools_tokens:
            scale = exc.request_tokens / (sent_tokens + tools_tokens)
            self._token_scale = max(self._token_scale, scale)
        if exc.context_window or exc.request_tokens:
            return sent_tokens - 1
        return sent_tokens // 2  # the server gave no numbers: halve

    def _dropped_notice(self, fitted: Fitted, budget: int) -> Notice | None:
        """Say when history starts being left out of requests, and when more is."""
        shown, self._dropped_shown = self._dropped_shown, fitted.dropped
        if fitted.dropped <= shown:
            return None
        room = "no room" if budget == 0 else f"~{budget} tokens"
        return Notice(
            f"context window {self.context_window} tokens ({room} for the conversation after "
            f"the system prompt, tools and reply): left {fitted.dropped} older messages "
            f"(~{fitted.dropped_tokens} tokens) out of this request",
            "warning",
        )

    def _no_room(self, tools_tokens: int) -> str:
        system = estimate_tokens(self.memory.system_prompt)
        return (
            f"the request does not fit the model's context ({self.context_window} tokens) even "
            f"with the older history left out (system prompt ~{system} tokens, tool list "
            f"~{tools_tokens}); start the server with a larger context, or offer fewer tools "
            "(include_tools / exclude_tools)"
        )

    def _cut_short(self, reply: Reply) -> str:
        """Why a reply ended with finish_reason "length": our max_tokens, or the server."""
        limit = getattr(self.model, "max_tokens", None)
        if limit is None:
            return "the answer was cut short by the server (its context or output limit)"
        if reply.usage.known and reply.usage.completion_tokens < limit:
            return "the answer was cut short by the server's context limit"
        return f"the answer was cut by the max_tokens limit ({limit}; max_tokens in [llm])"

    def own_tools(self) -> Mapping[str, AgentTool]:
        """The agent's own tools besides terminate: the catalog's, and find_tools while tool
        search is engaged. The same object until one of those changes (the loop caches)."""
        base = self._catalog_tools()
        searching = self.search is not None and self.search.engaged
        reading = self.results is not None and len(self.results) > 0  # once one was kept
        if not searching and not reading:
            return base
        key = (base, self.tools.tools, searching, reading)  # find_tools names the servers
        cached = self._own_cache
        if cached is None or any(a is not b for a, b in zip(cached[0], key, strict=True)):
            extra: dict[str, AgentTool] = {}
            if self.search is not None and searching:
                schema = self.search.tool_schema(self.tools.tools)
                extra[FIND_TOOLS] = AgentTool(schema, self._find_tools)
            if reading:
                extra[READ_RESULT] = AgentTool(READ_RESULT_SCHEMA, self._read_result)
            self._own_cache = (key, {**base, **extra})
        return self._own_cache[1]

    async def _read_result(self, arguments: dict[str, Any]) -> Observation:
        assert self.results is not None
        return self.results.read(arguments)

    async def _find_tools(self, arguments: dict[str, Any]) -> Observation:
        assert self.search is not None
        return self.search.find(self.tools.tools, arguments)

    def _tool_list(self) -> tuple[list[dict[str, Any]], int]:
        """The model's tool list, rebuilt only when the servers' or the agent's tools change,
        or tool search offers more of them."""
        servers = self.tools.openai_tools()
        engaged = self.search is not None and self.search.engage(servers)
        own = self.own_tools()
        version = self.search.version if self.search is not None else 0
        state = (version, engaged, len(self._simplified))
        cached = self._tools_source
        if cached is None or cached[0] is not servers or cached[1] is not own or cached[2] != state:
            self._tools_source = (servers, own, state)
            offered = self.search.select(servers) if self.search and engaged else servers
            mine = [tool.schema for tool in own.values()]
            self._tools_cache = [
                with_simplified(t) if t["function"]["name"] in self._simplified else t
                for t in [*offered, *mine, TERMINATE_TOOL]
            ]
            self._tools_tokens = len(json.dumps(self._tools_cache)) // 4
        return self._tools_cache, self._tools_tokens

    def _parse_calls(self, tool_calls: tuple[ToolCall, ...], *, cut: bool) -> list[_Call]:
        """Resolve each call. Ids are made unique: approvals and results are keyed by them,
        and a model that repeats an id must not get one call's verdict applied to another.
        No call of a reply `cut` by the output limit runs: its arguments may be a prefix
        that happens to parse (or empty, cut right after the name)."""
        calls: list[_Call] = []
        seen: set[str] = set()
        finished = False  # a terminate call ends the turn: what follows it does not run
        for number, tc in enumerate(tool_calls, 1):
            call_id, suffix = tc.id, number
            while not call_id or call_id in seen:  # a made-up id must be new too
                call_id, suffix = f"{tc.id or 'call'}_{suffix}", suffix + len(tool_calls)
            seen.add(call_id)
            spec = self.tools.tools.get(tc.name)
            arguments, problem = _parse_arguments(tc.arguments)
            if spec is None and tc.name != TERMINATE and tc.name not in self.own_tools():
                problem = f"unknown tool '{tc.name}'. Use one of the tools you were given."
                if self.search is not None and self.search.engaged:
                    problem += f" `{FIND_TOOLS}` finds the others."
            if finished:
                problem = f"not run: '{TERMINATE}' came before it in the same reply"
            if cut:
                problem = CUT_CALL
            calls.append(_Call(call_id, tc.name, arguments, spec, problem))
            finished = finished or (tc.name == TERMINATE and problem is None)
        return calls

    async def _act(self, calls: list[_Call]) -> AsyncIterator[Event]:
        """Hooks first (PreToolUse, concurrently), then approve in order (a human answers one
        question at a time), run concurrently."""
        hooked = await self._pre_hooks(calls)
        verdicts: dict[str, str | None] = {}
        for index, call in enumerate(calls):
            pre = hooked.get(call.id, NO_OUTCOME)
            for warning in pre.warnings:
                yield Notice(warning, "warning")
            if pre.arguments is not None and call.problem is None and pre.block is None:
                calls[index] = call = replace(call, arguments=pre.arguments)
                yield Notice(f"a PreToolUse hook changed the arguments of {call.name}", "info")
            blocked = pre.block and f"Not run: a PreToolUse hook blocked it: {pre.block}"
            verdicts[call.id] = call.problem or blocked or await self._refusal(call, pre.ask)
        if self.search is not None:  # a tool the model used stays offered for the session
            self.search.offer(c.name for c in calls if c.spec is not None and c.problem is None)
        send, receive = anyio.create_memory_object_stream[Event](100)
        results: dict[str, Observation] = {}

        async def run_all() -> None:
            async with send:
                for batch in _batches(calls, verdicts):
                    async with anyio.create_task_group() as tg:
                        for call in batch:
                            pre = hooked.get(call.id, NO_OUTCOME)
                            tg.start_soon(
                                self._run_call, call, verdicts[call.id], pre, send.clone(), results
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

    def _attach_images(self, calls: list[_Call], results: dict[str, Observation]) -> None:
        """Images of this step's results, for the model, after them (see agent.vision)."""
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

    async def _refusal(self, call: _Call, hook_asks: str | None = None) -> str | None:
        if call.spec is None:
            return None
        request = ApprovalRequest(
            call.spec.server, call.spec.name, call.name, call.arguments, call.spec
        )
        verdict = await self.approval.check(request, hook_asks)
        return None if verdict.allowed else verdict.reason

    async def _pre_hooks(self, calls: list[_Call]) -> dict[str, HookOutcome]:
        """PreToolUse hooks of every server's call that may run, all at once."""
        if self.hooks is None or not self.hooks.has("PreToolUse"):
            return {}
        return await self.hooks.before_calls(
            [
                ToolUse(c.id, c.name, c.spec.server, c.spec.name, c.arguments)
                for c in calls
                if c.spec is not None and c.problem is None
            ]
        )

    async def _post_hooks(
        self, call: _Call, pre: HookOutcome, observation: Observation, send: Any
    ) -> Observation:
        if self.hooks is None or call.spec is None:
            return observation
        use = ToolUse(call.id, call.name, call.spec.server, call.spec.name, call.arguments)
        observation, warnings = await self.hooks.after_call(use, pre, observation)
        for warning in warnings:
            await send.send(Notice(warning, "warning"))
        return observation

    async def _observe(
        self,
        call: _Call,
        refusal: str | None,
        progress: Any,
        span: Span = NO_SPAN,
        on_task: Any = None,
    ) -> Observation:
        if refusal is not None:
            return error_observation(None, refusal)
        if (agent_tool := self.own_tools().get(call.name)) is not None:
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

    async def _run_call(
        self,
        call: _Call,
        refusal: str | None,
        pre: HookOutcome,
        send: Any,
        results: dict[str, Observation],
    ) -> None:
        if call.spec is not None:
            server, tool = call.spec.server, call.spec.name
        else:  # the agent's own tool, or a name no server has ("" = no server)
            own = call.name == TERMINATE or call.name in self.own_tools()
            server, tool = ("agent" if own else ""), call.name
        async with send:
            await send.send(ToolCallStarted(call.id, call.name, server, tool, call.arguments))
            started = time.perf_counter()

            async def progress(done: float, total: float | None, message: str | None) -> None:
                # A server may report progress after the call ended (or was given up on).
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await send.send(ToolProgress(call.id, done, total, message))

            async def on_task(task: Any) -> None:
                update = TaskUpdate(
                    call.id, server, tool, task.task_id, task.status, task.message, task.elapsed()
                )
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await send.send(update)

            with self._step_span.child(
                f"execute_tool {call.name}",
                gen_ai__operation__name="execute_tool",
                gen_ai__tool__name=call.name,
                gen_ai__tool__call__id=call.id,
                mcp_agent__server=server,
                mcp_agent__tool=tool,
            ) as span:
                span.content("gen_ai.tool.call.arguments", call.arguments)
                observation = await self._observe(call, refusal, progress, span, on_task)
                _trace_observation(span, observation, refusal, started)
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
                    structured=observation.structured,
                    result=observation.result,
                    images=saved,
                )
            )

    def _note_repeats(self, call: _Call, observation: Observation) -> Observation:
        key = (call.name, json.dumps(call.arguments, sort_keys=True), observation.text)
        self._seen[key] += 1
        if self._seen[key] < REPEAT_LIMIT:
            return observation
        note = (
            f"\n[note from the agent: this exact call returned this exact result "
            f"{self._seen[key]} times; do not repeat it — use the result or change approach]"
        )
        return replace(observation, text=observation.text + note)

    def _close_pending(self, reason: str) -> None:
        """Keep memory valid if a step was cut short: every call gets a result."""
        for call_id in self.memory.pending_call_ids():
            self.memory.add_tool_result(call_id, f"Error: {reason}")


def _batches(calls: list[_Call], verdicts: Mapping[str, str | None]) -> list[list[_Call]]:
    """Calls in groups that may run at once: read-only calls together, and each call that
    may change state alone, in the order the model wrote them (`create_directory` then
    `move_file` into it must not race). A refused call runs nothing; the agent's own tools
    only read."""
    batches: list[list[_Call]] = []
    previous_reads = False
    for call in calls:
        reads = verdicts[call.id] is not None or call.spec is None or call.spec.read_only
        if reads and previous_reads:
            batches[-1].append(call)
        else:
            batches.append([call])
        previous_reads = reads
    return batches


def _parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """The model's arguments as a JSON object, or the problem to tell it.

    Everything downstream (servers, redaction, transcripts, JSON output) walks the value, so
    what no schema needs is refused here: NaN/Infinity and absurd nesting.
    """
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return {}, (
            f"the arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
            "send a JSON object that matches the tool's schema"
        )
    except (ValueError, RecursionError) as exc:
        return {}, f"the arguments are not usable JSON ({exc}); send a plain JSON object"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}"
    if _depth(value) > MAX_ARGUMENT_DEPTH:
        return {}, f"the arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    return value, None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _depth(value: Any) -> int:
    """Nesting depth, counted without recursion (the value may be thousands deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_ARGUMENT_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _trace_finish(run: Span, event: RunFinished) -> None:
    run.set(
        mcp_agent__status=event.status,
        mcp_agent__steps=event.steps,
        gen_ai__usage__input_tokens=event.usage.prompt_tokens if event.usage.known else None,
        gen_ai__usage__output_tokens=event.usage.completion_tokens if event.usage.known else None,
    )
    if event.status == "error":
        run.fail("run_error", event.error or "")


def _trace_reply(span: Span, reply: Reply) -> None:
    known = reply.usage.known
    span.set(
        gen_ai__usage__input_tokens=reply.usage.prompt_tokens if known else None,
        gen_ai__usage__output_tokens=reply.usage.completion_tokens if known else None,
        gen_ai__response__finish_reasons=(reply.finish_reason,) if reply.finish_reason else None,
    )


def _trace_observation(
    span: Span, observation: Observation, refusal: str | None, started: float
) -> None:
    span.set(
        mcp_agent__duration_ms=round((time.perf_counter() - started) * 1000, 1),
        mcp_agent__output_bytes=len(observation.text.encode()),
        mcp_agent__denied=refusal is not None,
    )
    span.content("gen_ai.tool.call.result", observation.text)
    if observation.is_error:
        span.fail("tool_error", observation.text[:200])


def _wire(call: _Call) -> dict[str, Any]:
    """The call as memory keeps it: arguments re-serialised, so strict endpoints accept it."""
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }
