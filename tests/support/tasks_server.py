"""A 2026-07-28 server of the tasks extension (`io.modelcontextprotocol/tasks`), written
from its spec (ext-tasks, specification/draft/tasks.md), for the agent's tests.

Tools:
- `count_slowly(n)` always answers with a task handle (`resultType: "task"`); the work
  takes `n` stages of TASKS_STAGE_SECONDS each and completes with "counted to n".
  Every start of the work adds a line to `<state>/runs`: the counter the at-most-once
  test reads.
- `confirm(action)` answers with a task that goes `input_required` at once, carrying an
  elicitation in `inputRequests`; `tasks/update` with the answer completes it.
- `count_plainly(n)`: the same work as a plain call (the bench compares the two).
- `quick(text)`: the server decides no task is needed and answers directly.

Tasks live in `<state>/tasks.json` (TASKS_SERVER_STATE), so a restarted server still
knows them: that is what "durably created" means in the spec. Their state is computed
from the clock at each `tasks/get`, so no work is lost while the process is down.
TASKS_EXIT_AFTER_POLLS=k makes the first process (no `<state>/crashed` yet) exit on its
k-th `tasks/get`, as a server that dies mid-task. A client that did not declare the
extension gets -32021 for the task tools, as the spec says. Modern-only: the legacy
`initialize` is refused (no extensions exist in that era).

Run as a script it serves stdio; `python tests/support/tasks_server.py http PORT` serves
streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp_types import CallToolRequestParams, RequestParams
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import ConfigDict, Field

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.support.modern_server import RefuseHandshake

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")


class TaskIdParams(RequestParams):
    model_config = ConfigDict(populate_by_name=True, extra="allow")
    task_id: str = Field(alias="taskId")


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class Store:
    """The tasks, on disk: every change is written before it is answered."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.path = folder / "tasks.json"
        self.stage = float(os.environ.get("TASKS_STAGE_SECONDS", "0.3"))
        self.poll_ms = int(os.environ.get("TASKS_POLL_MS", "100"))
        self.exit_after = int(os.environ.get("TASKS_EXIT_AFTER_POLLS", "0"))
        self.polls = 0

    def load(self) -> dict[str, dict[str, Any]]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def save(self, tasks: dict[str, dict[str, Any]]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(tasks))
        tmp.replace(self.path)

    def create(self, kind: str, **fields: Any) -> dict[str, Any]:
        tasks = self.load()
        task_id = secrets.token_hex(16)  # unguessable, as the spec asks
        tasks[task_id] = {"kind": kind, "started": time.time(), "created": _now(), **fields}
        self.save(tasks)
        if kind == "count":
            with (self.folder / "runs").open("a") as runs:
                runs.write(f"{task_id}\n")
        return self.view(task_id, tasks[task_id], result_type="task")

    def view(self, task_id: str, task: dict[str, Any], *, result_type: str) -> dict[str, Any]:
        """The DetailedTask as `tasks/get` (or the create result) shows it right now."""
        out: dict[str, Any] = {
            "resultType": result_type,
            "taskId": task_id,
            "createdAt": task["created"],
            "lastUpdatedAt": _now(),
            "ttlMs": 600_000,
            "pollIntervalMs": self.poll_ms,
        }
        if task.get("cancelled"):
            return out | {"status": "cancelled", "statusMessage": "cancelled by the client"}
        if task["kind"] == "count":
            n = int(task["n"])
            stage = int((time.time() - task["started"]) / self.stage)
            if stage >= n:
                text = f"counted to {n}"
                result = {"content": [{"type": "text", "text": text}], "isError": False}
                return out | {"status": "completed", "result": result}
            return out | {"status": "working", "statusMessage": f"stage {stage + 1} of {n}"}
        answer = task.get("answer")
        if answer is None:
            return out | {
                "status": "input_required",
                "statusMessage": "waiting for a confirmation",
                "inputRequests": {f"confirm-{task_id[:6]}": _confirm_request(task["action"])},
            }
        text = f"confirmed: {task['action']}" if answer else f"not confirmed: {task['action']}"
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        return out | {"status": "completed", "result": result}

    def find(self, task_id: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        tasks = self.load()
        if task_id not in tasks:
            raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")
        return tasks, tasks[task_id]

    def crash_if_due(self) -> None:
        """The first process dies on its k-th poll (TASKS_EXIT_AFTER_POLLS)."""
        self.polls += 1
        marker = self.folder / "crashed"
        if self.exit_after and self.polls >= self.exit_after and not marker.exists():
            marker.write_text("1")
            os._exit(3)


def _confirm_request(action: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": f"Really {action}?",
            "requestedSchema": {
                "type": "object",
                "properties": {"approve": {"type": "boolean", "title": "Approve"}},
                "required": ["approve"],
            },
        },
    }


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class TasksExtension(Extension):
    identifier = TASKS

    def __init__(self, store: Store) -> None:
        self.store = store

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self._get),
            MethodBinding("tasks/update", UpdateParams, self._update),
            MethodBinding("tasks/cancel", TaskIdParams, self._cancel),
        ]

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: Any, call_next: Any
    ) -> Any:
        arguments = params.arguments or {}
        if params.name == "count_slowly":
            require_client_extension(ctx, TASKS)
            return self.store.create("count", n=int(arguments.get("n", 3)))
        if params.name == "confirm":
            require_client_extension(ctx, TASKS)
            return self.store.create("confirm", action=str(arguments.get("action", "")))
        return await call_next(ctx)

    async def _get(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        require_client_extension(ctx, TASKS)
        self.store.crash_if_due()
        _, task = self.store.find(params.task_id)
        return self.store.view(params.task_id, task, result_type="complete")

    async def _update(self, ctx: Any, params: UpdateParams) -> dict[str, Any]:
        require_client_extension(ctx, TASKS)
        tasks, task = self.store.find(params.task_id)
        for key, response in params.input_responses.items():
            if key.startswith("confirm-") and task.get("answer") is None:
                content = response.get("content") or {}
                task["answer"] = response.get("action") == "accept" and bool(content.get("approve"))
        self.store.save(tasks)
        return {"resultType": "complete"}

    async def _cancel(self, ctx: Any, params: TaskIdParams) -> dict[str, Any]:
        require_client_extension(ctx, TASKS)
        tasks, task = self.store.find(params.task_id)
        if self.store.view(params.task_id, task, result_type="complete")["status"] not in TERMINAL:
            task["cancelled"] = True
            self.store.save(tasks)
            with (self.store.folder / "cancelled").open("a") as log:
                log.write(f"{params.task_id}\n")
        return {"resultType": "complete"}


def build(state: Path) -> MCPServer:
    server = MCPServer(
        "tasks-ext", middleware=[RefuseHandshake()], extensions=[TasksExtension(Store(state))]
    )

    @server.tool()
    def count_slowly(n: int) -> str:
        """Count to n, one stage at a time (runs as a task)."""
        raise AssertionError("answered by the tasks extension")

    @server.tool()
    def confirm(action: str) -> str:
        """Ask the user to confirm an action (runs as a task that needs input)."""
        raise AssertionError("answered by the tasks extension")

    @server.tool()
    async def count_plainly(n: int) -> str:
        """The same work as count_slowly, as a plain call (the bench's baseline)."""
        await anyio.sleep(n * float(os.environ.get("TASKS_STAGE_SECONDS", "0.3")))
        return f"counted to {n}"

    @server.tool()
    def quick(text: str) -> str:
        """Echo at once (no task)."""
        return f"quick {text}"

    return server


if __name__ == "__main__":
    state_dir = Path(os.environ.get("TASKS_SERVER_STATE", "tasks-state"))
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        build(state_dir).run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        build(state_dir).run("stdio")
