"""Sub-agents: the agent's own tool `task {agent?, prompt}` runs a child agent and answers
with the child's final answer (not its transcript).

A child is an `Agent` of its own (agent.loop.react): its own memory and system prompt (a
definition's body, agent/extensions/agent_files.py, or without `agent` the parent's), its
tools (a definition's `tools`, patterns as `--allowed-tools` takes them; the rest are
neither offered nor run) and its step budget, on the parent's connections (the same
registry: no server starts twice). Its calls pass the same gate as the parent's: the
user's hooks (which see `agent_type`, the child's name, and `agent_id`, the parent's call
that started it; a child's Stop is Claude Code's `SubagentStop`, and a child's prompt is
no `UserPromptSubmit`: the user did not type it) and the parent's approval policy (its
"always" answers, its rules; one question at a time however many children run). Its usage
adds to the parent's; its events are forwarded on the parent's stream as `SubagentEvent`s.

Several `task` calls of one reply run at once (the loop runs independent calls
concurrently); a Ctrl-C cancels them with the step, as any call. Depth is limited to one:
a child is offered no `task` (nor `update_plan`: the plan shown is the parent's).

Offered (issue 42 #5: a small model keeps its tools) when a definition exists, the context
window is large (SUBAGENT_WINDOW) or `[agent] subagents = true`; never with `false`.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

import anyio

from agent.common.memory import Memory
from agent.extensions.agent_files import AgentDefinition
from agent.extensions.hooks import HookOutcome, Hooks
from agent.loop.approval import ApprovalPolicy, ApprovalRequest, Decision, ToolRules, Verdict
from agent.loop.events import RunFinished, SubagentEvent, TextDelta, Usage
from agent.loop.plan import UPDATE_PLAN
from agent.loop.react import Agent
from agent.model.model_types import ChatModel
from agent.tools.agent_tool import AgentTool, CallContext
from agent.tools.results import Observation, envelope, error_observation
from agent.tools.search import ToolSearch
from agent.tools.toolspec import ToolSpec

TASK = "task"
SUBAGENT_WINDOW = 32_768  # "auto": offered from this [llm] context_window up
GENERAL = "general-purpose"  # the name a child without `agent` goes by (Claude Code's)
NOT_FOR_CHILDREN = frozenset({TASK, UPDATE_PLAN})  # depth 1: children start no children


def offers_task(
    setting: bool | Literal["auto"], context_window: int, definitions: Mapping[str, Any]
) -> bool:
    """Whether the session offers `task` (`[agent] subagents`)."""
    if setting == "auto":
        return bool(definitions) or context_window >= SUBAGENT_WINDOW
    return setting is True


def task_schema(definitions: Mapping[str, AgentDefinition]) -> dict[str, Any]:
    """`task`'s declaration: the defined agents, name and description, are how the model
    picks one."""
    listed = "".join(f"\n- {d.name}: {d.description}" for d in definitions.values())
    agents = f" Agents:{listed}" if listed else ""
    agent: dict[str, Any] = {
        "type": "string",
        "description": "Which agent (leave out for a general-purpose one with your tools).",
    }
    if definitions:
        agent["enum"] = list(definitions)
    return {
        "type": "function",
        "function": {
            "name": TASK,
            "description": "Hand a self-contained piece of work to a sub-agent: it works with "
            "its own tools and context and answers with its result only. Several task calls "
            f"in one reply run at once.{agents}",
            "parameters": {
                "type": "object",
                "properties": {
                    "prompt": {
                        "type": "string",
                        "description": "The whole task: the sub-agent sees nothing else of "
                        "this conversation.",
                    },
                    "agent": agent,
                },
                "required": ["prompt"],
            },
        },
    }


@dataclass(frozen=True)
class ChildSetup:
    """What start-up knows that a child is built with, besides the parent itself."""

    system_prompt: Callable[[str], str]  # a definition's body -> the child's system prompt
    price_for: Callable[[str], Callable[[Usage], Usage]]  # a model's name -> its pricing
    tool_search: Callable[[], ToolSearch | None]  # a fresh one per child
    max_steps: int
    reserve_tokens: int
    compact_at: float = 0.0


class Subagents:
    """The session's sub-agent definitions and the `task` tool that runs them."""

    def __init__(self, definitions: Mapping[str, AgentDefinition], setup: ChildSetup) -> None:
        self.definitions = dict(definitions)
        self.setup = setup
        self._parent: Agent | None = None
        self._asking = anyio.Lock()  # one question to the user at a time, whichever child
        self._tools = {TASK: AgentTool.reporting(task_schema(self.definitions), self.task)}

    def attach(self, parent: Agent) -> None:
        """The agent whose `task` this is: children run on its model, tools, approval and
        hooks, and their usage is its."""
        self._parent = parent

    def agent_tools(self) -> Mapping[str, AgentTool]:
        """`task`, for the loop's own tools (the same object every time)."""
        return self._tools if self._parent is not None else {}

    async def task(self, arguments: dict[str, Any], context: CallContext) -> Observation:
        """Run one child to its end; its events go on the parent's stream as they come."""
        parent = self._parent
        assert parent is not None, "attach() comes before the first request"
        prompt, name = arguments.get("prompt"), arguments.get("agent") or None
        if not isinstance(prompt, str) or not prompt.strip():
            return error_observation(None, f"{TASK}: `prompt` must say the whole task")
        if name is not None and (not isinstance(name, str) or name not in self.definitions):
            known = ", ".join(self.definitions) or "none are defined"
            return error_observation(
                None,
                f"{TASK}: no agent named {str(name)[:64]!r} (agents: {known}); "
                "leave `agent` out for a general-purpose one",
            )
        definition = self.definitions.get(name) if name else None
        child = self._child(parent, definition, context.call_id)
        who = definition.name if definition else GENERAL
        finished: RunFinished | None = None
        try:
            async with contextlib.aclosing(child.run(prompt)) as events:
                async for event in events:
                    if isinstance(event, RunFinished):
                        finished = event
                    if not isinstance(event, TextDelta):  # the message carries the text
                        await context.report(SubagentEvent(context.call_id, who, event))
        finally:  # also when cancelled: what the child spent is spent
            parent.add_usage(child.session_usage)
        return _answer(who, finished)

    def _child(self, parent: Agent, definition: AgentDefinition | None, call_id: str) -> Agent:
        setup = self.setup
        name = definition.name if definition else GENERAL
        only = ToolRules.of(definition.tools) if definition and definition.tools else None
        model_name = definition.model if definition and definition.model else None
        model: ChatModel = parent.model
        if model_name is not None and model_name != parent.model.model:
            model = NamedModel(parent.model, model_name)
        if definition is not None:
            prompt = setup.system_prompt(definition.prompt)
        else:
            prompt = parent.memory.system_prompt
        own = {
            n: tool
            for n, tool in parent.offer.own_tools().items()
            if n not in NOT_FOR_CHILDREN and (only is None or _named(n, only))
        }
        return Agent(
            model,
            parent.tools,  # the parent's registry: its connections, no second start
            Memory(system_prompt=prompt),
            max_steps=(definition.max_steps if definition else None) or setup.max_steps,
            context_window=parent.context_window,
            reserve_tokens=setup.reserve_tokens,
            approval=ChildApproval.of(parent.approval, only, name, self._asking),
            agent_tools=lambda: own,
            tool_search=setup.tool_search(),
            vision=parent.vision,
            tool_calls=parent.text_calls.mode,
            hooks=ChildHooks.of(parent.hooks, name, call_id) if parent.hooks else None,
            results=parent.offer.results,
            price=setup.price_for(model.model),
            compact_at=setup.compact_at,
            telemetry=parent.telemetry,
            image_store=parent.calls.image_store,
        )


def _named(name: str, only: ToolRules) -> bool:
    """Whether one of the agent's own tools is among a definition's `tools`."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in only.allowed)


def _answer(who: str, finished: RunFinished | None) -> Observation:
    """The parent's tool result: the child's answer, marked as data (it may repeat what the
    child's tools returned), or why there is none."""
    if finished is None:
        return error_observation(None, f"the sub-agent '{who}' ended without finishing")
    source = f"agent {who}"
    if finished.status in ("answered", "refused") and finished.answer is not None:
        return Observation(text=envelope(source, finished.answer))
    why = finished.error or finished.status
    return error_observation(None, f"the sub-agent '{who}' gave no answer: {why}")


class NamedModel:
    """The session's model client asked for another model (a definition's `model`): the
    same endpoint and key, the model's name in each request."""

    def __init__(self, base: ChatModel, model: str) -> None:
        self.base = base
        self.model = model

    def stream(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        stream: Callable[..., Any] = self.base.stream
        return stream(messages, tools, overrides={"model": self.model})


@dataclass
class ChildApproval(ApprovalPolicy):
    """The parent's approval policy (its mode, rules, trust and "always" answers, shared),
    within a definition's tools: the others are neither offered nor run."""

    only: ToolRules | None = None
    child: str = ""

    @classmethod
    def of(
        cls, parent: ApprovalPolicy, only: ToolRules | None, child: str, asking: anyio.Lock
    ) -> ChildApproval:
        ask = parent.ask
        locked: Callable[[ApprovalRequest], Awaitable[Decision]] | None = None
        if ask is not None:

            async def locked(request: ApprovalRequest) -> Decision:
                async with asking:
                    return await ask(request)

        return cls(parent.mode, locked, parent.always, parent.trusted, parent.rules, only, child)

    def hidden(self, spec: ToolSpec, public: str = "") -> bool:
        return super().hidden(spec, public) or not self._within(spec, public)

    async def check(self, request: ApprovalRequest, hook_asks: str | None = None) -> Verdict:
        if not self._within(request.spec, request.public_name):
            return Verdict(
                False,
                f"Not run: the sub-agent '{self.child}' may use only its own tools; "
                f"'{request.public_name}' is not one of them.",
            )
        return await super().check(request, hook_asks)

    def _within(self, spec: ToolSpec, public: str) -> bool:
        return self.only is None or self.only.allows(spec, public)


@dataclass
class ChildHooks(Hooks):
    """The user's hooks as a child's calls fire them: every event names the child
    (`agent_type`, and `agent_id`: the parent's `task` call), its Stop is `SubagentStop`
    (which may send it back to work, as Stop does), and it has no UserPromptSubmit."""

    agent_type: str = ""
    agent_id: str = ""

    @classmethod
    def of(cls, hooks: Hooks, agent_type: str, agent_id: str) -> ChildHooks:
        same = {f.name: getattr(hooks, f.name) for f in fields(Hooks)}
        return cls(**same, agent_type=agent_type, agent_id=agent_id)

    def has(self, event: str) -> bool:
        if event == "UserPromptSubmit":
            return False
        return super().has("SubagentStop" if event == "Stop" else event)

    async def stop(self, last_message: str, active: bool) -> HookOutcome:
        payload = {"stop_hook_active": active, "last_assistant_message": last_message}
        return await self.fire("SubagentStop", payload)

    async def fire(
        self, event: str, fields: dict[str, Any], names: tuple[str, ...] = ()
    ) -> HookOutcome:
        named = {"agent_id": self.agent_id, "agent_type": self.agent_type, **fields}
        return await super().fire(event, named, names)
