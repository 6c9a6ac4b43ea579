"""Tasks on an MCP connection: starting a 2025-11-25 task, following either form's task
through the connection's own requests (so a lost connection is reconnected and the same
task polled again), and answering a task's input requests with the usual callbacks.

`send_raw` sends past the SDK's request tables: the task methods are not in them (the
SDK validates `tools/call` answers as a `CallToolResult`, which a 2025-11-25
`CreateTaskResult` is not), so the request is stamped and sent as the session itself
would, through agent.common.sdk_private (tests/test_sdk_contract.py guards the names it uses).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import mcp.types as types
from mcp import Client
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from agent.common.errors import ToolServerError
from agent.common.sdk_private import send_stamped_request
from agent.tools.server_errors import ServerStopped
from agent.tools.tasks import (
    TASK_TTL_MS,
    TASKS_EXTENSION,
    TERMINAL,
    Form,
    TaskRun,
    TaskState,
    TaskWatch,
    Unreachable,
    follow,
)


class MCPServerConnection(Protocol):
    """What these functions use of agent.tools.mcp.MCPServerConnection (which imports them)."""

    name: str

    async def _request(
        self, method: str, send: Callable[[Client], Awaitable[Any]], *, changes_nothing: bool
    ) -> Any: ...

    async def _connected(self) -> tuple[Client, int]: ...


LIST_PAGES = 5  # of tasks/list, for /tasks
LIST_TIMEOUT = 5.0  # seconds per tasks/list page
_INPUT_REQUEST: TypeAdapter[types.InputRequest] = TypeAdapter(types.InputRequest)


async def send_raw(
    mcp_session: ClientSession, method: str, params: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """One request as the MCP session would send it (its era's `_meta` and headers), raw.

    Task requests name their task in `Mcp-Name` (the extension's routing header)."""
    task_id = params.get("taskId")
    headers: dict[str, str] = {}
    if method.startswith("tasks/") and isinstance(task_id, str):
        headers[MCP_NAME_HEADER] = encode_header_value(task_id)
    return await send_stamped_request(mcp_session, method, params, timeout=timeout, headers=headers)


def legacy_task_tool(client: Client | None, task_support: str | None) -> bool:
    """Whether a call runs as a 2025-11-25 task: the tool asks for it (required) or offers
    it (optional: a tool that offers tasks is one that may take long), and the server
    declared task-augmented tools/call."""
    if client is None or task_support not in ("required", "optional"):
        return False
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = client.server_capabilities.tasks
    return bool(caps and caps.requests and caps.requests.tools and caps.requests.tools.call)


def declares_tasks_extension(client: Client | None) -> bool:
    if client is None:
        return False
    return TASKS_EXTENSION in (client.server_capabilities.extensions or {})


async def call_as_legacy_task(
    conn: MCPServerConnection,
    name: str,
    arguments: dict[str, Any],
    *,
    timeout: float,
    watch: TaskWatch,
    meta: dict[str, Any] | None = None,
) -> types.CallToolResult:
    """`tools/call` with `task` (sent once: a lost answer is not sent again), then follow."""

    async def start(client: Client) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments, "task": {"ttl": TASK_TTL_MS}}
        if meta:
            params["_meta"] = dict(meta)
        return await send_raw(client.session, "tools/call", params, timeout)

    created = await conn._request("tools/call", start, changes_nothing=False)
    task = created.get("task")
    if not isinstance(task, dict) or not isinstance(task.get("taskId"), str):
        # A server may answer a task-capable call directly.
        return types.CallToolResult.model_validate(created, by_name=False)
    return await _follow(conn, name, "2025-11-25", task, timeout, watch)


async def follow_handle(
    conn: MCPServerConnection,
    name: str,
    handle: dict[str, Any],
    *,
    timeout: float,
    watch: TaskWatch,
) -> types.CallToolResult:
    """The extension form: the call was answered with a task handle."""
    return await _follow(conn, name, "extension", handle, timeout, watch)


async def _follow(
    conn: MCPServerConnection,
    name: str,
    form: Form,
    snapshot: dict[str, Any],
    timeout: float,
    watch: TaskWatch,
) -> types.CallToolResult:
    state = TaskState(conn.name, name, str(snapshot["taskId"]), form)

    async def send(method: str, params: dict[str, Any], limit: float) -> dict[str, Any]:
        async def one(client: Client) -> dict[str, Any]:
            return await send_raw(client.session, method, params, limit)

        # Every task method is safe to repeat: reads, or keyed and idempotent by the spec.
        try:
            return await conn._request(method, one, changes_nothing=True)
        except ServerStopped as exc:
            raise Unreachable(exc.reason) from None
        except ToolServerError as exc:
            raise Unreachable(exc.cause) from None

    async def answer(requests: dict[str, Any]) -> dict[str, Any]:
        client, _ = await conn._connected()
        return await answer_input_requests(client.session, requests)

    run = TaskRun(state, send, answer, watch, life_timeout=timeout)
    return await follow(run, snapshot)


async def answer_input_requests(
    mcp_session: ClientSession, requests: dict[str, Any]
) -> dict[str, Any]:
    """Each request through the client's callbacks (elicitation asks the user, as a
    standalone `elicitation/create` would); one that cannot be read is declined."""
    responses: dict[str, Any] = {}
    for key, raw in requests.items():
        try:
            request = _INPUT_REQUEST.validate_python(raw, by_name=False)
        except ValidationError:
            responses[key] = {"action": "decline"}
            continue
        context = ClientRequestContext(session=mcp_session, request_id=key)
        response = await mcp_session.dispatch_input_request(context, request)
        if isinstance(response, types.ErrorData):
            responses[key] = {"action": "decline"}
        else:
            responses[key] = response.model_dump(by_alias=True, mode="json", exclude_none=True)
    return responses


async def list_server_tasks(conn: MCPServerConnection, client: Client | None) -> list[TaskState]:
    """`tasks/list` (2025-11-25, when the server declares `tasks.list`): every task the
    server keeps for us, as TaskStates (the tool is not in the listing; elapsed from
    `createdAt`). At most LIST_PAGES pages."""
    caps = client.server_capabilities.tasks if client is not None else None
    if caps is None or caps.list is None:
        return []
    found: list[TaskState] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES):
        params = {"cursor": cursor} if cursor else {}

        async def one(c: Client, params: dict[str, Any] = params) -> dict[str, Any]:
            return await send_raw(c.session, "tasks/list", params, LIST_TIMEOUT)

        page = await conn._request("tasks/list", one, changes_nothing=True)
        for task in page.get("tasks") or []:
            if isinstance(task, dict) and isinstance(task.get("taskId"), str):
                found.append(_listed(conn.name, task))
        cursor = page.get("nextCursor") if isinstance(page.get("nextCursor"), str) else None
        if not cursor:
            break
    return found


def _listed(server: str, task: dict[str, Any]) -> TaskState:
    state = TaskState(server, "", task["taskId"], "2025-11-25")
    state.status = str(task.get("status") or "working")
    message = task.get("statusMessage")
    state.message = message if isinstance(message, str) else None
    try:
        created = datetime.fromisoformat(str(task.get("createdAt")).replace("Z", "+00:00"))
        state.started = time.monotonic() - max(0.0, (datetime.now(UTC) - created).total_seconds())
    except ValueError:
        pass
    if state.status in TERMINAL:
        state.ended = state.started
    return state
