"""Typed events: the only seam between the loop and any front end.

The loop yields these; the rich REPL, the JSON output and the tests all read the same
stream. Frozen dataclasses with a `kind` tag so they serialise and match cleanly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agent.common.images import SavedImage as SavedImage

# Token counts: one type for the model seam and the events (re-exported for front ends).
from agent.model.model_types import Usage as Usage

RunStatus = Literal["answered", "refused", "max_steps", "error", "cancelled"]
PlanStatus = Literal["pending", "in_progress", "completed"]


@dataclass(frozen=True)
class RunStarted:
    request: str
    kind: Literal["run_started"] = "run_started"


@dataclass(frozen=True)
class StepStarted:
    step: int
    max_steps: int
    kind: Literal["step_started"] = "step_started"


@dataclass(frozen=True)
class TextDelta:
    """A fragment of the model's answer as it streams."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True)
class ModelRetry:
    """The model request failed in a retryable way; text streamed so far may be void."""

    attempt: int
    delay: float
    reason: str
    discarded_text: bool
    kind: Literal["model_retry"] = "model_retry"


@dataclass(frozen=True)
class AssistantMessage:
    """The model finished thinking for this step."""

    content: str
    tool_calls: tuple[str, ...]
    kind: Literal["assistant_message"] = "assistant_message"


@dataclass(frozen=True)
class ToolCallStarted:
    call_id: str
    name: str
    server: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    kind: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True)
class ToolProgress:
    call_id: str
    progress: float
    total: float | None
    message: str | None
    kind: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True)
class TaskUpdate:
    """A tool call runs as a task on its server: its status and message, as polled."""

    call_id: str
    server: str
    tool: str
    task_id: str
    status: str  # working | input_required | completed | failed | cancelled
    message: str | None
    elapsed: float  # seconds since the task began
    kind: Literal["task_update"] = "task_update"


@dataclass(frozen=True)
class ToolCallFinished:
    call_id: str
    name: str
    server: str
    tool: str
    arguments: dict[str, Any]
    output: str
    is_error: bool
    duration_ms: float
    denied: bool = False
    blocked: bool = False  # denied by a PreToolUse hook, not by the approval policy
    structured: Any = None  # the server's structuredContent, whole (the model may see only text)
    result: Any = None  # the CallToolResult as the server sent it (shown by an MCP App)
    images: tuple[SavedImage, ...] = ()  # the result's images, saved for the user
    kind: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True)
class PlanStep:
    """One step of the model's plan (Codex's `update_plan` item), as the model wrote it:
    model text, which every front end masks and shows as text, never as markup."""

    step: str
    status: PlanStatus


@dataclass(frozen=True)
class PlanUpdated:
    """The model set a plan that differs from the last one (agent.loop.plan): the whole
    plan, in order, and why it changed, if the model said."""

    call_id: str
    plan: tuple[PlanStep, ...]
    explanation: str | None = None
    kind: Literal["plan_updated"] = "plan_updated"


@dataclass(frozen=True)
class Notice:
    """Something the user should know that is not an error of the run."""

    message: str
    level: Literal["info", "warning"] = "info"
    kind: Literal["notice"] = "notice"


@dataclass(frozen=True)
class RunFinished:
    status: RunStatus
    answer: str | None
    steps: int
    usage: Usage
    error: str | None = None
    kind: Literal["run_finished"] = "run_finished"


@dataclass(frozen=True)
class SubagentEvent:
    """An event of a sub-agent (agent.loop.subagents), forwarded on its parent's stream:
    `parent_call_id` is the parent's `task` call that runs it, `agent` its name. Front ends
    show it under that call (the REPL indented, stream-json with `parent_tool_use_id`, ACP
    as the call's progress)."""

    parent_call_id: str
    agent: str
    event: Event
    kind: Literal["subagent_event"] = "subagent_event"


Event = (
    RunStarted
    | StepStarted
    | TextDelta
    | ModelRetry
    | AssistantMessage
    | ToolCallStarted
    | ToolProgress
    | TaskUpdate
    | ToolCallFinished
    | PlanUpdated
    | Notice
    | RunFinished
    | SubagentEvent
)
