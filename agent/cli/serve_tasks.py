"""`serve`'s side of the tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28).

A caller that declared the extension gets `ask` answered at once with a task handle
(`resultType: "task"`) while the turn runs in the server's task group; it polls
`tasks/get` (status, a status message with the step and the tool running, the result
inline once completed, the approval question as `inputRequests` while input_required),
answers a question with `tasks/update` and stops the turn with `tasks/cancel`. A caller
that did not declare it gets the plain call; the task methods answer it -32021. Tasks are
a 2026-07-28 shape: a caller of an older protocol that declares the extension anyway gets
the plain call too (a task handle cannot be delivered on its wire; the turn would run
unseen), and the task methods refuse it.

Who may touch a task: the taskId (128 random bits) is its only key, since a caller that
can have tasks has no other name here: stdio has one caller, and a 2026-07-28 request over
HTTP has no session. `caller_of` is how serve_command tells callers apart where the
transport can (an HTTP session of the handshake era).

The wire format is the one agent/tools/tasks.py follows and tests/support/tasks_server.py
serves. The mcp SDK (2.3) implements tasks on neither side, so this is its own small store
over the SDK's generic extension hook (`mcp.server.extension`). What a task runs is not
known here: serve_command starts the turn and reports to the `Task` (no import back).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp_types import CallToolRequestParams, RequestParams
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
POLL_MS = 250  # the interval a caller is asked to poll at
TTL_MS = 3_600_000  # how long a finished task is kept for its caller (at most MAX_KEPT)
MAX_KEPT = 64  # finished tasks kept; the oldest are dropped beyond that
MCP_SESSION_HEADER = "mcp-session-id"

Answer = Callable[[Any], None]  # takes the caller's raw response to one input request
Stop = Callable[[], Awaitable[None]]


class TaskIdParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True, extra="allow")
    task_id: str = Field(alias="taskId")


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Task:
    """One `ask` run as a task: what `tasks/get` shows, changed only by the run (its
    progress, questions and end) and by the caller (answers, cancel)."""

    task_id: str = field(default_factory=lambda: secrets.token_hex(16))  # unguessable
    created: str = field(default_factory=_now)
    updated: str = field(default_factory=_now)
    status: str = "working"
    message: str | None = "starting"
    result: dict[str, Any] | None = None
    error: str | None = None
    questions: dict[str, tuple[dict[str, Any], Answer]] = field(default_factory=dict)
    stop: Stop | None = None  # set by whoever runs the task: ends the run

    @property
    def done(self) -> bool:
        return self.status in TERMINAL

    def _set(self, status: str, message: str | None) -> None:
        if not self.done:
            self.status, self.message, self.updated = status, message, _now()

    def working(self, message: str | None) -> None:
        self._set("input_required" if self.questions else "working", message)

    def ask(self, key: str, request: dict[str, Any], answer: Answer, message: str) -> None:
        """A question for the caller (an `elicitation/create` request, as a dict)."""
        if not self.done:
            self.questions[key] = (request, answer)
            self._set("input_required", message)

    def answer(self, responses: dict[str, Any]) -> None:
        """The caller's answers; a key that is not an open question is ignored."""
        for key, response in responses.items():
            if (asked := self.questions.pop(key, None)) is not None:
                asked[1](response)
        if not self.questions and self.status == "input_required":
            self._set("working", "answered; continuing")

    def complete(self, result: dict[str, Any]) -> None:
        if not self.done:
            self.result = result
            self._set("completed", None)

    def fail(self, why: str) -> None:
        if not self.done:
            self.error = why
            self._set("failed", why)

    async def cancel(self) -> None:
        if self.done:
            return
        self._set("cancelled", "cancelled by the client")
        self.questions.clear()
        if self.stop is not None:
            await self.stop()

    def view(self, result_type: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "resultType": result_type,
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_MS,
        }
        if self.message is not None:
            out["statusMessage"] = self.message
        if self.status == "completed" and self.result is not None:
            out["result"] = self.result
        if self.status == "failed":
            out["error"] = {"code": -32603, "message": self.error or "failed"}
        if self.status == "input_required":
            out["inputRequests"] = {key: asked[0] for key, asked in self.questions.items()}
        return out


# Starts `ask`'s turn for the task (in the background) and returns None, or returns the
# error result the plain call would have given (an unknown session_id) and starts nothing.
Start = Callable[[ServerRequestContext[Any, Any], dict[str, Any], Task], Awaitable[Any]]


class ServeTasks(Extension):
    """The extension on serve's MCPServer: `ask` as a task for callers that declared it."""

    identifier = TASKS

    def __init__(self, tool: str, start: Start) -> None:
        self.tool = tool
        self.start = start
        self.tasks: OrderedDict[str, Task] = OrderedDict()

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self._get),
            MethodBinding("tasks/update", UpdateParams, self._update),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.name != self.tool or not declared(ctx):
            return await call_next(ctx)
        arguments = params.arguments or {}
        prompt, session_id = arguments.get("prompt"), arguments.get("session_id")
        if not isinstance(prompt, str) or not prompt or not isinstance(session_id, str | None):
            return await call_next(ctx)  # the plain call answers with the validation error
        task = Task()
        refused = await self.start(ctx, {"prompt": prompt, "session_id": session_id}, task)
        if refused is not None:
            return refused
        self._keep(task)
        return task.view("task")

    def _keep(self, task: Task) -> None:
        self.tasks[task.task_id] = task
        finished = [key for key, kept in self.tasks.items() if kept.done]
        for key in finished[: max(0, len(finished) - MAX_KEPT)]:
            del self.tasks[key]

    def _find(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> Task:
        require_client_extension(ctx, TASKS)
        if ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            raise MCPError(
                code=INVALID_REQUEST,
                message=f"tasks are served on the 2026-07-28 protocol only; this connection "
                f"speaks {ctx.protocol_version}, where ask answers with its result",
            )
        task = self.tasks.get(task_id)
        if task is None:
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")
        return task

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> Any:
        return self._find(ctx, params.task_id).view("complete")

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> Any:
        self._find(ctx, params.task_id).answer(params.input_responses)
        return {"resultType": "complete"}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> Any:
        await self._find(ctx, params.task_id).cancel()
        return {"resultType": "complete"}


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The caller declared the extension on a protocol that can carry a task handle."""
    if ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return TASKS in ((capabilities.extensions or {}) if capabilities else {})


def caller_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """Who is asking, where the transport can tell: the HTTP session (`Mcp-Session-Id`)
    of a handshake-era caller, which the SDK's session manager matched to a live session
    of its own before routing the request here. None otherwise: stdio has one caller, and
    a 2026-07-28 request over HTTP stands alone (its header, never checked, is not used)."""
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None
    headers = getattr(ctx.request, "headers", None)
    return headers.get(MCP_SESSION_HEADER) if headers is not None else None
