"""Tasks: a tool call the server runs in the background, followed here to its end.

Two forms reach users:
- **2025-11-25** (core of that revision): a tool's `execution.taskSupport` says it may or
  must run as a task; the client asks for one (`tools/call` with `task`), polls
  `tasks/get`, and fetches the outcome with `tasks/result`. On `input_required` the
  server's questions (an elicitation) travel on the `tasks/result` request, so that is
  sent at once and answered through the usual callbacks.
- **The 2026-07-28 extension** `io.modelcontextprotocol/tasks`: once the client declares
  it, the server may answer any `tools/call` with a handle (`resultType: "task"`);
  `tasks/get` carries the result, the error or the `inputRequests` inline, and
  `tasks/update` answers the latter.

Either way the agent follows one loop (`follow`): poll at the server's interval, report
each status and message, cancel on the server when the caller is cancelled, give up when
the server shows no sign of life for `tool_timeout` or the task outlives its own limit,
and after a lost connection keep polling the same task id: the call is never sent again.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import mcp.types as types
from mcp import MCPError
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp_types.jsonrpc import REQUEST_TIMEOUT
from pydantic import ConfigDict

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
DEFAULT_POLL = 1.0  # seconds between polls when the server suggests none
POLL_BOUNDS = (0.05, 30.0)  # a server's suggestion is kept within these
CANCEL_TIMEOUT = 5.0  # seconds a tasks/cancel gets when the caller has gone
RECENT_TASKS = 50  # finished tasks /tasks remembers
TASK_TTL_MS = 3_600_000  # the retention asked for in the 2025-11-25 form
DEFAULT_TASK_LIMIT = 3600.0  # seconds; [agent] task_timeout

Form = Literal["2025-11-25", "extension"]
Send = Callable[[str, dict[str, Any], float], Awaitable[dict[str, Any]]]
Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass
class TaskState:
    """One task as /tasks and the live display show it."""

    server: str
    tool: str
    task_id: str
    form: Form
    status: str = "working"
    message: str | None = None
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    @property
    def running(self) -> bool:
        return self.ended is None


TaskFn = Callable[[TaskState], Awaitable[None]]


@dataclass(frozen=True)
class TaskWatch:
    """What a caller wants from a call that becomes a task: its updates, and the most
    time the whole task may take (`[agent] task_timeout`)."""

    limit: float
    on_update: TaskFn | None = None


class TaskBoard:
    """Running and recent tasks of every server, newest last (for /tasks)."""

    def __init__(self) -> None:
        self._tasks: dict[tuple[str, str], TaskState] = {}

    def note(self, state: TaskState) -> None:
        self._tasks.pop((state.server, state.task_id), None)
        self._tasks[(state.server, state.task_id)] = state
        finished = [key for key, task in self._tasks.items() if not task.running]
        for key in finished[: max(0, len(finished) - RECENT_TASKS)]:
            del self._tasks[key]

    def all(self) -> list[TaskState]:
        return list(self._tasks.values())

    def merge_listed(self, listed: list[TaskState]) -> None:
        """What a server's `tasks/list` says: newer status and message for the tasks we
        know (a finished one's last stage), and the ones we did not start in this run."""
        for task in listed:
            known = self._tasks.get((task.server, task.task_id))
            if known is None:
                self._tasks[(task.server, task.task_id)] = task
            elif not known.running:
                known.message = known.message or task.message


class TaskHandle(types.Result):
    """A `CreateTaskResult` of the extension (`resultType: "task"`): the task's seed state."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str = "working"
    status_message: str | None = None
    poll_interval_ms: int | None = None


class Unreachable(Exception):
    """The server cannot be reached right now (its connection died; reconnecting failed):
    the task is polled again, until tool_timeout passes without a sign of life."""


class TaskAccepted(Exception):
    """The server answered a call with a task handle: the connection follows it from here.

    Raised from the claim's resolver so that polling runs in the connection's own loop
    (with its reconnects and the caller's events), not inside the SDK's call."""

    def __init__(self, handle: dict[str, Any]) -> None:
        super().__init__(f"task {handle.get('taskId')}")
        self.handle = handle


async def _hand_over(handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
    raise TaskAccepted(handle.model_dump(by_alias=True, exclude_none=True))


class TasksExtension(ClientExtension):
    """`io.modelcontextprotocol/tasks`, declared; its handles are followed by `follow`."""

    identifier = TASKS_EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=_hand_over)]


@dataclass
class TaskRun:
    """Everything `follow` needs about one task and where it runs."""

    state: TaskState
    send: Send  # one request to the server (reconnecting first when the connection died)
    answer: Answer  # inputRequests -> inputResponses (extension form)
    watch: TaskWatch
    life_timeout: float  # tool_timeout: the longest wait for a sign of life


async def follow(run: TaskRun, snapshot: dict[str, Any]) -> types.CallToolResult:
    """Poll the task to its end and return what the call would have returned."""
    state = run.state
    last_life = time.monotonic()
    answered: set[str] = set()
    try:
        with anyio.fail_after(max(run.watch.limit - state.elapsed(), 0)):
            fresh = True
            while True:
                if fresh:  # a stale snapshot (a poll failed) is not news
                    await _report(run, snapshot.get("status"), snapshot.get("statusMessage"))
                if state.status in TERMINAL:
                    return await _outcome(run, snapshot)
                if state.status == "input_required" and fresh:
                    if state.form == "2025-11-25":  # its questions come with tasks/result
                        return await _legacy_result(run, run.watch.limit)
                    await _answer_inputs(run, snapshot, answered)
                await anyio.sleep(_interval(snapshot))
                polled = await _poll(run, said_lost=not fresh)
                fresh = polled is not None
                if polled is None:
                    if time.monotonic() - last_life > run.life_timeout:
                        return await _give_up(
                            run, f"no answer from the server for {run.life_timeout:g} s"
                        )
                    continue
                snapshot, last_life = polled, time.monotonic()
    except TimeoutError:
        return await _give_up(run, f"it ran longer than task_timeout ({run.watch.limit:g} s)")
    except BaseException:
        if state.running:  # cancelled (Ctrl-C) or broken: the server stops too
            with anyio.CancelScope(shield=True):
                await _cancel(run)
        raise


async def _poll(run: TaskRun, *, said_lost: bool = False) -> dict[str, Any] | None:
    """One `tasks/get`; None when the connection is gone (it is reconnected next time).
    The loss is reported once, not at every failed poll."""
    state = run.state
    try:
        return await run.send("tasks/get", {"taskId": state.task_id}, run.life_timeout)
    except Unreachable as exc:
        if not said_lost:
            await _report(run, state.status, f"connection lost ({exc}); polling task again")
        return None
    except MCPError as exc:
        if exc.code == REQUEST_TIMEOUT:
            return None
        raise


async def _report(run: TaskRun, status: Any, message: Any) -> None:
    state = run.state
    state.status = status if isinstance(status, str) and status else state.status
    state.message = message if isinstance(message, str) and message else None
    if state.status in TERMINAL and state.ended is None:
        state.ended = time.monotonic()
    if run.watch.on_update is not None:
        await run.watch.on_update(state)


def _interval(snapshot: dict[str, Any]) -> float:
    millis = snapshot.get("pollIntervalMs", snapshot.get("pollInterval"))
    seconds = millis / 1000 if isinstance(millis, int | float) else DEFAULT_POLL
    low, high = POLL_BOUNDS
    return min(max(seconds, low), high)


async def _outcome(run: TaskRun, snapshot: dict[str, Any]) -> types.CallToolResult:
    """The final result of a terminal task, as the plain call would have returned it."""
    state = run.state
    if state.form == "2025-11-25" and state.status != "cancelled":
        return await _legacy_result(run, run.life_timeout)
    if state.status == "completed" and isinstance(snapshot.get("result"), dict):
        return types.CallToolResult.model_validate(snapshot["result"], by_name=False)
    if state.status == "failed":
        error = snapshot.get("error")
        error = error if isinstance(error, dict) else {}
        why = error.get("message") or state.message or "no reason given"
        return _error(f"task {state.task_id} failed: {why}")
    return _error(f"task {state.task_id} was {state.status}: {state.message or 'no reason given'}")


async def _legacy_result(run: TaskRun, timeout: float) -> types.CallToolResult:
    """`tasks/result`: blocks until the task ends; the server's questions arrive meanwhile."""
    state = run.state
    try:
        raw = await run.send("tasks/result", {"taskId": state.task_id}, timeout)
    except MCPError as exc:
        await _report(run, "failed", exc.message)
        return _error(f"task {state.task_id} failed: {exc.message}")
    await _report(run, "completed", None)
    return types.CallToolResult.model_validate(raw, by_name=False)


async def _answer_inputs(run: TaskRun, snapshot: dict[str, Any], answered: set[str]) -> None:
    """Answer each new input request once (a poll repeats the outstanding ones)."""
    requests = snapshot.get("inputRequests")
    if not isinstance(requests, dict):
        return
    new = {key: value for key, value in requests.items() if key not in answered}
    if not new:
        return
    responses = await run.answer(new)
    answered.update(new)
    params = {"taskId": run.state.task_id, "inputResponses": responses}
    await run.send("tasks/update", params, run.life_timeout)


async def _give_up(run: TaskRun, why: str) -> types.CallToolResult:
    await _cancel(run)
    return _error(f"task {run.state.task_id} stopped: {why}; cancelled on the server")


async def _cancel(run: TaskRun) -> None:
    """`tasks/cancel`, best effort: the server may be gone, and the caller is leaving."""
    state = run.state
    status, message = "cancelled", "cancelled by the agent"
    try:
        with anyio.fail_after(CANCEL_TIMEOUT):
            reply = await run.send("tasks/cancel", {"taskId": state.task_id}, CANCEL_TIMEOUT)
        if reply.get("status") in TERMINAL:  # the 2025-11-25 form answers with the task
            status = reply["status"]
            message = reply.get("statusMessage") or message
    except (MCPError, Unreachable, TimeoutError) as exc:
        message = f"cancelling failed: {exc}"
    await _report(run, status, message)


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
