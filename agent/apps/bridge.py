"""One app view: the MCP Apps protocol between a `ui://` page and the session.

Message names and shapes follow the stable spec (ext-apps `specification/2026-01-26`,
`spec.types.ts` of `@modelcontextprotocol/ext-apps` 2.0.4): the view sends `ui/initialize`
and then `ui/notifications/initialized`; only after that does the host push
`ui/notifications/tool-input` and `ui/notifications/tool-result`. The view may call
`tools/call` (tools of its own server whose visibility includes "app", through the same
approval as the model's calls), `resources/read` (its own server), `ui/message` (a user
turn), `ui/open-link` (asked, never silently opened), `notifications/message` (logging),
`ui/notifications/size-changed`, `ui/request-display-mode` and `ping`. At the end the host
sends `ui/resource-teardown` and waits briefly for the answer. A page loaded again (a reload)
says so by its new sandbox frame's `sandbox-proxy-ready`: the view starts over with it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp.types as types

from agent.apps import policy
from agent.tools.toolspec import ToolSpec

PROTOCOL_VERSION = "2026-01-26"
HOST_INFO = {"name": "run_mcp", "version": "1"}
METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32601, -32602, -32603
REFUSED = -32000  # the host (the user, or the tool's visibility) refused the request
TEARDOWN_WAIT = 2.0  # seconds a view gets to answer ui/resource-teardown
LINK_SCHEMES = ("https://", "http://")


class AppError(Exception):
    """A request the host refuses; becomes a JSON-RPC error for the view."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Services(Protocol):
    """What a view needs from the session; agent.apps.host implements it."""

    async def call_tool(self, view: AppView, spec: ToolSpec, arguments: dict[str, Any]) -> Any:
        """A `CallToolResult` wire dict; raises AppError when refused."""
        ...

    async def read_resource(self, view: AppView, uri: str) -> dict[str, Any]: ...

    async def message(self, view: AppView, text: str) -> None: ...

    async def open_link(self, view: AppView, url: str) -> bool: ...

    def log(self, view: AppView, level: str, text: str) -> None: ...

    def find_tool(self, server: str, name: str) -> ToolSpec | None: ...


@dataclass
class AppView:
    """One rendering of a `ui://` page, with its outbox to the page (long-polled)."""

    id: str
    server: str
    uri: str
    html: str
    ui: dict[str, Any]  # the resource's `_meta.ui` (csp, permissions, …)
    tool: ToolSpec | None = None
    arguments: dict[str, Any] | None = None
    result: dict[str, Any] | None = None  # the tool's CallToolResult, wire form
    theme: str = "light"
    initialized: bool = False
    closed: bool = False
    size: dict[str, Any] = field(default_factory=dict)
    messages: int = 0  # ui/message the page sent (each one asked)
    message_asked: bool = False  # the user is being asked about one now
    own_tools_allowed: bool = False  # "[p]age": its server's app-only tools run unasked
    _outbox: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _changed: anyio.Event = field(default_factory=anyio.Event)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _waiting: dict[str, Callable[[dict[str, Any]], None]] = field(default_factory=dict)
    _last_poll: float = float("-inf")  # time.monotonic() the page last asked for messages
    _sandboxes: int = 0  # sandbox frames that said they were ready: a second is a reload
    _generation: int = 0  # which load of the page a reply belongs to

    @property
    def title(self) -> str:
        name = self.tool.title or self.tool.name if self.tool else self.uri
        return f"{self.server} › {name}"

    # -- to the page ---------------------------------------------------------------------

    def post(self, message: dict[str, Any]) -> None:
        self._outbox.append((next(self._seq), {"jsonrpc": "2.0", **message}))
        self._changed.set()

    async def take(self, after: int, wait: float) -> tuple[list[dict[str, Any]], int]:
        """Messages after `after` (the page has the rest), waiting up to `wait` for one."""
        self._last_poll = time.monotonic()
        self._outbox = [(n, m) for n, m in self._outbox if n > after]
        if not self._outbox and not self.closed:
            self._changed = anyio.Event()
            with anyio.move_on_after(wait):
                await self._changed.wait()
        messages = [m for _, m in self._outbox]
        return messages, (self._outbox[-1][0] if self._outbox else after)

    def shown_now(self, poll_wait: float) -> bool:
        """The page is open in a browser: initialized, and polling (a poll is held at most
        `poll_wait` seconds, so a page silent for longer is gone)."""
        alive = time.monotonic() - self._last_poll < poll_wait + 5
        return self.initialized and not self.closed and alive

    def _push_tool_data(self) -> None:
        if self.arguments is not None:
            params = {"arguments": self.arguments}
            self.post({"method": "ui/notifications/tool-input", "params": params})
        if self.result is not None:
            self.post({"method": "ui/notifications/tool-result", "params": self.result})

    async def teardown(self, then: dict[str, Any] | None = None) -> None:
        """`ui/resource-teardown`, answered or not within TEARDOWN_WAIT; then closed.
        `then`: a last message for the host page (e.g. where to go next)."""
        if self.initialized and not self.closed:
            answered = anyio.Event()
            request_id = f"host-{next(self._ids)}"
            self._waiting[request_id] = lambda reply: answered.set()
            self.post({"id": request_id, "method": "ui/resource-teardown", "params": {}})
            with anyio.move_on_after(TEARDOWN_WAIT):
                await answered.wait()
        if then is not None:
            self.post(then)
        self.closed = True
        self._changed.set()

    # -- from the page -------------------------------------------------------------------

    async def receive(self, message: Any, services: Services) -> None:
        """One JSON-RPC message from the page: answer requests, act on notifications."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return
        method = message.get("method")
        if not isinstance(method, str):  # a response to one of our requests
            callback = self._waiting.pop(str(message.get("id")), None)
            if callback is not None:
                callback(message)
            return
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if "id" not in message:
            self._notified(method, params, services)
            return
        generation = self._generation
        try:
            reply = {"id": message["id"], "result": await self._answer(method, params, services)}
        except AppError as exc:
            reply = {"id": message["id"], "error": {"code": exc.code, "message": str(exc)}}
        if generation == self._generation:  # a reloaded page numbers its requests afresh
            self.post(reply)

    def _reloaded(self) -> None:
        """The page was loaded again (reload, a second tab): it starts from nothing, so it
        is initialized again and then given the tool's input and result again; what was
        queued for the old load, and replies to its requests, are not its own."""
        self._generation += 1
        self._outbox.clear()
        self._waiting.clear()
        self.initialized = False

    def _notified(self, method: str, params: dict[str, Any], services: Services) -> None:
        match method:
            case "ui/notifications/sandbox-proxy-ready":
                self._sandboxes += 1
                if self._sandboxes > 1:
                    self._reloaded()
                self.post(
                    {
                        "method": "ui/notifications/sandbox-resource-ready",
                        "params": {
                            "html": self.html,
                            "csp": policy.granted(self.ui)["csp"],
                            "permissions": policy.granted(self.ui)["permissions"],
                            "allow": policy.allow_attribute(self.ui),
                        },
                    }
                )
            case "ui/notifications/initialized":
                if not self.initialized:
                    self.initialized = True
                    self._push_tool_data()
            case "ui/notifications/size-changed":
                self.size = {k: v for k, v in params.items() if k in ("width", "height")}
            case "notifications/message":
                data = params.get("data")
                text = data if isinstance(data, str) else repr(data)
                services.log(self, str(params.get("level", "info")), text)
            case "ui/notifications/request-teardown":
                self.closed = True
                self._changed.set()

    async def _answer(self, method: str, params: dict[str, Any], services: Services) -> Any:
        match method:
            case "ui/initialize":
                return self._initialize_result()
            case "ping":
                return {}
            case "tools/call":
                return await self._call_tool(params, services)
            case "resources/read":
                uri = params.get("uri")
                if not isinstance(uri, str):
                    raise AppError(INVALID_PARAMS, "resources/read needs a 'uri'")
                return await services.read_resource(self, uri)
            case "ui/message":
                text = _text_of(params.get("content"))
                if not text:
                    raise AppError(INVALID_PARAMS, "ui/message carried no text")
                await services.message(self, text)
                return {}
            case "ui/open-link":
                url = params.get("url")
                if not isinstance(url, str) or not url.lower().startswith(LINK_SCHEMES):
                    raise AppError(INVALID_PARAMS, "only http(s) links can be opened")
                return {} if await services.open_link(self, url) else {"isError": True}
            case "ui/request-display-mode":
                return {"mode": "inline"}  # the only mode a browser tab offers here
        raise AppError(METHOD_NOT_FOUND, f"method not supported by this host: {method}")

    async def _call_tool(self, params: dict[str, Any], services: Services) -> Any:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise AppError(INVALID_PARAMS, "tools/call needs a 'name' and object 'arguments'")
        spec = services.find_tool(self.server, name)
        if spec is None:
            raise AppError(INVALID_PARAMS, f"no tool '{name}' on server '{self.server}'")
        if "app" not in spec.visibility:  # the spec: reject tools not visible to apps
            raise AppError(REFUSED, f"tool '{name}' is not callable by apps (visibility)")
        return await services.call_tool(self, spec, arguments)

    def _initialize_result(self) -> dict[str, Any]:
        context: dict[str, Any] = {
            "theme": self.theme,
            "displayMode": "inline",
            "availableDisplayModes": ["inline"],
            "platform": "web",
            "userAgent": HOST_INFO["name"],
            "containerDimensions": {"maxHeight": 4000},
        }
        if self.tool is not None:
            context["toolInfo"] = {"tool": _tool_wire(self.tool)}
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "hostInfo": HOST_INFO,
            "hostCapabilities": {
                "openLinks": {},
                "serverTools": {},
                "serverResources": {},
                "logging": {},
                "message": {"text": {}},
                "sandbox": policy.granted(self.ui),
            },
            "hostContext": context,
        }


def _text_of(content: Any) -> str:
    """The text blocks of a `ui/message` (the host declares `message: {text: {}}`)."""
    blocks = content if isinstance(content, list) else []
    parts = [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]
    return "\n".join(parts).strip()


def _tool_wire(spec: ToolSpec) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": spec.name, "inputSchema": spec.input_schema}
    if spec.title:
        tool["title"] = spec.title
    if spec.description:
        tool["description"] = spec.description
    ui: dict[str, Any] = {"visibility": list(spec.visibility)}
    if spec.app_uri:
        ui["resourceUri"] = spec.app_uri
    tool["_meta"] = {"ui": ui}
    return tool


def result_wire(result: types.CallToolResult) -> dict[str, Any]:
    """A CallToolResult as it travels to the view (camelCase, no empty fields)."""
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def error_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}
