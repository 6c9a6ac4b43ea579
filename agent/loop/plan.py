"""The agent's own `update_plan` tool: the model keeps a short, visible plan of a multi-step
task, in Codex's shape (`{plan: [{step, status}], explanation?}`).

Each call sends the whole plan. A valid plan that differs from the last one is reported as
a `PlanUpdated` event, the one seam to what people see: the REPL's compact block,
stream-json's `plan` line, ACP's `plan` update, `--output json`'s last plan. Bad
arguments are an error result the model can fix, in one line. The call passes the one
gate like any other (hooks see it as server "agent"); it needs no approval: it changes
nothing but what is shown. The transcript keeps the call and its result, and a resumed
session starts from the last plan it set.

Offered only where it costs a small model nothing it needs (issue 42 #5): `[agent] plan`
"auto" offers it from a 32,768-token context window (`true` always, `false` never), and
the system prompt's one sentence on when a plan helps comes with it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Literal

from agent.common.json_limits import loads
from agent.loop.events import PlanStatus, PlanStep, PlanUpdated
from agent.tools.agent_tool import AgentTool, CallContext
from agent.tools.results import Observation, error_observation

UPDATE_PLAN = "update_plan"
PLAN_WINDOW = 32_768  # "auto": offered from this [llm] context_window up
MAX_PLAN_STEPS = 30
MAX_STEP_CHARS = 300
MAX_EXPLANATION_CHARS = 1_000
STATUSES: tuple[PlanStatus, ...] = ("pending", "in_progress", "completed")
PLAN_GUIDANCE = (
    "- For work of several steps, keep a short plan with `update_plan` (the whole plan each "
    "time, one step in_progress) and update it as steps complete; skip it for simple requests."
)
PLAN_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": UPDATE_PLAN,
        "description": "Show the user your plan for a multi-step task and its progress. Send "
        "the whole plan each time: its steps in order, each pending, in_progress (at most "
        "one) or completed.",
        "parameters": {
            "type": "object",
            "properties": {
                "explanation": {"type": "string", "description": "Why the plan changed."},
                "plan": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {"type": "string"},
                            "status": {"type": "string", "enum": list(STATUSES)},
                        },
                        "required": ["step", "status"],
                    },
                },
            },
            "required": ["plan"],
        },
    },
}


class PlanError(ValueError):
    """Arguments that are not a plan: the one line the model is told."""


def offers_plan(setting: bool | Literal["auto"], context_window: int) -> bool:
    """Whether the session offers update_plan (`[agent] plan`)."""
    return setting is True or (setting == "auto" and context_window >= PLAN_WINDOW)


def parse_plan(arguments: Mapping[str, Any]) -> tuple[tuple[PlanStep, ...], str | None]:
    """The plan and explanation of a call's arguments, checked; PlanError says what to fix."""
    items = arguments.get("plan")
    if isinstance(items, str):  # small models send the list as JSON text
        with contextlib.suppress(ValueError):
            items = loads(items)
    if not isinstance(items, list) or not items:
        raise PlanError('`plan` must be a non-empty list of {"step": ..., "status": ...} items')
    if len(items) > MAX_PLAN_STEPS:
        raise PlanError(f"the plan has {len(items)} steps; keep it to {MAX_PLAN_STEPS} at most")
    plan = tuple(_step(index, item) for index, item in enumerate(items))
    busy = [f"plan[{i}]" for i, step in enumerate(plan) if step.status == "in_progress"]
    if len(busy) > 1:
        raise PlanError(f"{', '.join(busy)} are all in_progress; mark at most one in_progress")
    explanation = arguments.get("explanation")
    if explanation is not None and not isinstance(explanation, str):
        raise PlanError("`explanation` must be a string")
    if explanation is not None and len(explanation) > MAX_EXPLANATION_CHARS:
        raise PlanError(
            f"`explanation` is {len(explanation)} characters; at most {MAX_EXPLANATION_CHARS}"
        )
    return plan, (" ".join(explanation.split()) or None) if explanation else None


def _step(index: int, item: Any) -> PlanStep:
    where = f"plan[{index}]"
    if not isinstance(item, dict):
        raise PlanError(f'{where} must be an object {{"step": ..., "status": ...}}')
    text, status = item.get("step"), item.get("status")
    if not isinstance(text, str) or not text.strip():
        raise PlanError(f"{where}.step is missing or empty: say what the step does")
    if len(text) > MAX_STEP_CHARS:
        raise PlanError(f"{where}.step is {len(text)} characters; at most {MAX_STEP_CHARS}")
    said = str(status).strip().lower().replace("-", "_").replace(" ", "_")
    for known in STATUSES:
        if said == known:
            return PlanStep(" ".join(text.split()), known)
    raise PlanError(f"{where}.status {status!r} is not one of {', '.join(STATUSES)}")


def called_plan(
    call: Mapping[str, Any], result: Any
) -> tuple[tuple[PlanStep, ...], str | None] | None:
    """The plan a transcript's call set (an assistant message's `tool_calls` item, and its
    result's text): None for another tool, a call that failed or had no result."""
    function = call.get("function") or {}
    if function.get("name") != UPDATE_PLAN or not isinstance(result, str):
        return None
    if result.startswith("Error:"):
        return None
    try:
        return parse_plan(loads(str(function.get("arguments") or "{}")))
    except (ValueError, TypeError, AttributeError):  # PlanError and TooDeep are ValueErrors
        return None


class Plans:
    """The session's plan: the last one the model set, and the update_plan tool that sets it."""

    def __init__(self, plan: tuple[PlanStep, ...] = (), explanation: str | None = None) -> None:
        self.plan = plan
        self.explanation = explanation
        self._tools = {UPDATE_PLAN: AgentTool.reporting(PLAN_SCHEMA, self.update)}

    @classmethod
    def resumed(cls, messages: list[dict[str, Any]]) -> Plans:
        """The plan a resumed session last set: its last update_plan call that succeeded."""
        results = {
            m.get("tool_call_id"): m.get("content") for m in messages if m.get("role") == "tool"
        }
        for message in reversed(messages):
            for call in reversed(message.get("tool_calls") or []):
                if (found := called_plan(call, results.get(call.get("id")))) is not None:
                    return cls(*found)
        return cls()

    def agent_tools(self) -> Mapping[str, AgentTool]:
        """update_plan, for the loop's own tools (the same object every time)."""
        return self._tools

    async def update(self, arguments: dict[str, Any], context: CallContext) -> Observation:
        try:
            plan, explanation = parse_plan(arguments)
        except PlanError as exc:
            return error_observation(None, f"{UPDATE_PLAN}: {exc}")
        if (plan, explanation) == (self.plan, self.explanation):
            return Observation(text="Plan unchanged.")
        self.plan, self.explanation = plan, explanation
        await context.report(PlanUpdated(context.call_id, plan, explanation))
        return Observation(text="Plan updated.")
