"""The app host of a session: a loopback web server showing MCP Apps' pages in a browser.

Started with the REPL (never in `-p` runs) and ended with it. Each view gets a page at
`http://127.0.0.1:<port>/<token>/<view>/`; the token is 32 random bytes made per session,
so another user or web page on this machine cannot guess it, and a request without it gets
a 404. The token alone is not enough: a browser is started with the URL it opens on its
command line, which every local user reads in /proc. So the browser (and the terminal) is
given a one-time link, `/open/<ticket>/`, which the host exchanges for an HttpOnly,
SameSite=Strict cookie scoped to the token's path, redirecting to the page; the ticket is
gone after that first use, and a request to the page without the cookie gets a 403.

Each server's apps run in a frame of an origin of their own (`127.0.0.1:<a port per
server>`: browsers keep storage apart by origin, and the port is part of it) with the CSP
and permissions its metadata asks for, less what points at this machine or its network
(agent.apps.policy; each dropped entry is told once). Opening a browser follows `$BROWSER`
(Python's `webbrowser`); without one (`--no-browser`, no display) the link is printed.

The human is injected (`AppUI`): the app's tool calls are approved by the same policy as the
model's, the question asked in the terminal; a `ui/message` becomes the user's next turn
only when the user says yes to it, one question at a time, at most MAX_MESSAGES per view.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Protocol, TypeVar

import anyio
from anyio.abc import TaskGroup
from mcp import MCPError

from agent.apps import pages, policy
from agent.apps.bridge import REFUSED, AppError, AppView, error_result, result_wire
from agent.apps.http import LOOPBACK, LoopbackServer, Request, Response
from agent.common import json_limits
from agent.loop.gate import ToolGate
from agent.tools.base import ToolServer
from agent.tools.catalog import Catalog
from agent.tools.registry import ToolRegistry
from agent.tools.results import strip_marker
from agent.tools.toolspec import ToolSpec
from agent.tools.uimeta import APP_MIME
from agent.ui.safe import clean

T = TypeVar("T")
# The view whose call is being decided, for the approval question (agent/ui/repl.py): it
# offers "[p]age", its server's app-only tools without asking while the view lives.
ASKING_VIEW: ContextVar[AppView | None] = ContextVar("ASKING_VIEW", default=None)
AGAIN = "type /apps in the terminal for a new link"
POLL_WAIT = 20.0  # seconds a page's long poll is held open when there is nothing to send
READ_TIMEOUT = 30.0  # seconds a server gets to hand over an app's page
MAX_PAGE = 5 * 1024 * 1024  # characters of an app page we serve
MAX_TICKETS = 64  # one-time links not yet used (the oldest go first)
MAX_MESSAGES = 20  # ui/message a view may send in its life, each one asked
SHOWN_MESSAGE = 300  # characters of a page's message shown in the question
COOKIE = "run_mcp"


# What a server says when it wants a folder it was not offered (the PDF viewer: "Allowed
# directories: "; the filesystem server: "outside allowed directories"; "no roots").
_WANTS_A_FOLDER = re.compile(
    r"(?i)allowed (?:dir|directories|folders|paths|roots)|outside (?:the )?allowed|\broots?\b"
)


def roots_hint(server: ToolServer | None, error: str) -> tuple[str, str] | None:
    """For a failed call whose error reads like a folder refused by a server offered no
    folders at all: how to offer some (MCP roots), and the file to write it in. None when
    it does not apply."""
    if server is None or server.roots or not _WANTS_A_FOLDER.search(error):
        return None
    said = (
        f"hint: '{server.name}' is offered no folders (MCP roots) and its error reads as if "
        "it wants one (/servers shows what each server is offered): add "
        '"roots": ["/path/to/folder"] to its entry in'
    )
    return said, server.config.config_file or "the file that lists it"


class AppUI(Protocol):
    """What the front end (the REPL) does for the host."""

    async def in_terminal(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run `work` (which may ask a question) when the terminal is free for it."""
        ...

    async def confirm(self, question: str) -> bool: ...

    def app_turn(self, source: str, text: str) -> None:
        """Queue `text` as the user's next turn, shown as coming from `source`."""
        ...

    def app_log(self, source: str, level: str, text: str) -> None: ...

    def app_notice(self, text: str) -> None: ...


class AppHost:
    """The session's app views and the web server that shows them."""

    def __init__(
        self,
        registry: ToolRegistry,
        gate: ToolGate,
        *,
        browser: Callable[[str], Awaitable[None]] | None = None,
        theme: str = "light",
        catalog: Catalog | None = None,
    ) -> None:
        """`catalog`: the pages as listed, whose `_meta.ui` is the fallback for a read
        that carries none (the spec: the read contents first, the listing entry second)."""
        self.registry = registry
        self.gate = gate  # every call a page makes passes it, like the model's
        self.browser = browser  # None: print the URL only
        self.theme = theme
        self.catalog = catalog
        self.ui: AppUI | None = None
        self.views: dict[str, AppView] = {}
        self._token = secrets.token_urlsafe(32)  # the pages' path: /<token>/<view>/
        self._cookie = secrets.token_urlsafe(32)  # what a browser holds once a link opened
        self._tickets: dict[str, str] = {}  # one-time link → view id
        self._sandbox_token = secrets.token_urlsafe(32)
        self._sandboxes: dict[int, str] = {}  # port → the server whose apps it serves
        self._refusals_told: set[tuple[str, str]] = set()  # (server, CSP entry)
        self._roots_told: set[str] = set()  # servers told how to offer folders
        self._server = LoopbackServer(self._route, count=1)
        self._tg: TaskGroup | None = None
        self._count = 0

    # -- lifetime ------------------------------------------------------------------------

    async def __aenter__(self) -> AppHost:
        self._tg = await anyio.create_task_group().__aenter__()
        await self._server.start(self._tg)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Every view is asked to tear down (briefly), then the server stops."""
        assert self._tg is not None
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for view in self.views.values():
                    tg.start_soon(view.teardown)
            await self._server.aclose()
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    @property
    def host_origin(self) -> str:
        return f"http://{LOOPBACK}:{self._server.ports[0]}"

    def sandbox_origin(self, server: str) -> str:
        """The origin of `server`'s apps (bound on its first view): a port of its own."""
        port = next(p for p, name in self._sandboxes.items() if name == server)
        return f"http://{LOOPBACK}:{port}"

    def url(self, view: AppView) -> str:
        """A link that opens the view once (for a browser's command line or the terminal):
        whoever uses it first gets the session's cookie; `/apps` prints fresh ones."""
        ticket = secrets.token_urlsafe(32)
        self._tickets[ticket] = view.id
        while len(self._tickets) > MAX_TICKETS:
            del self._tickets[next(iter(self._tickets))]
        return f"{self.host_origin}/open/{ticket}/"

    def _page_path(self, view: AppView) -> str:
        """Where the view's page is, for a browser that holds the cookie."""
        return f"/{self._token}/{view.id}/"

    # -- opening views -------------------------------------------------------------------

    def tool_finished(self, server: str, tool: str, arguments: dict[str, Any], result: Any) -> None:
        """A tool ran for the model: when it comes with an app, show the app with its data —
        in the page of that app still open in the browser, if any (a model that calls the
        tool five times opens one tab, not five)."""
        spec = self.registry.server_tool(server, tool)
        if spec is None or spec.app_uri is None or self._tg is None:
            return
        wire = result_wire(result) if result is not None else None
        for view in self.views.values():  # a tab already showing this app shows the new run
            if view.server == server and view.uri == spec.app_uri and view.shown_now(POLL_WAIT):
                self._tg.start_soon(self._open_quietly, spec, arguments, wire, view)
                return
        self._tg.start_soon(self._open_quietly, spec, arguments, wire)

    async def _open_quietly(
        self,
        spec: ToolSpec,
        arguments: dict[str, Any],
        result: dict[str, Any] | None,
        replacing: AppView | None = None,
    ) -> None:
        """A new view (each run of a tool gets its own, as the spec has it); when the app
        is open in a tab already, the old view is torn down and the tab goes to the new."""
        try:
            view = await self.open(spec, arguments, result, browse=replacing is None)
            if replacing is not None:
                target = self.host_origin + self._page_path(view)
                navigate = {"method": "run_mcp/navigate", "params": {"url": target}}
                await replacing.teardown(then=navigate)
        except LookupError as exc:
            self.notify(f"app of {spec.server} › {spec.name} not shown: {exc}")

    async def open(
        self,
        spec: ToolSpec,
        arguments: dict[str, Any] | None = None,
        result: dict[str, Any] | None = None,
        *,
        browse: bool = True,
    ) -> AppView:
        """A new view of the tool's page (read from its server now), announced and opened."""
        assert spec.app_uri is not None
        html, ui = await self._page(spec.server, spec.app_uri)
        self._tell_refused(spec.server, spec.app_uri, ui)
        if spec.server not in self._sandboxes.values():
            self._sandboxes[await self._server.listen()] = spec.server
        self._count += 1
        view = AppView(
            str(self._count), spec.server, spec.app_uri, html, ui, tool=spec, theme=self.theme
        )
        view.arguments, view.result = arguments, result
        self.views[view.id] = view
        url = self.url(view)
        self.notify(f"app {view.title}: {url}")
        if self.browser is not None and browse:
            await self.browser(url)
        return view

    async def _page(self, server_name: str, uri: str) -> tuple[str, dict[str, Any]]:
        """The page's HTML and `_meta.ui` (from the read contents, as the spec says)."""
        server = self.registry.servers.get(server_name)
        if server is None or not server.publishes:
            raise LookupError(f"'{server_name}' is not an MCP server")
        try:
            with anyio.fail_after(READ_TIMEOUT):
                read = await server.read_resource(uri)
        except (MCPError, TimeoutError, OSError) as exc:
            raise LookupError(f"cannot read {uri}: {exc or type(exc).__name__}") from None
        for content in read.contents:
            mime = (content.mime_type or "").replace(" ", "").lower()
            if mime != APP_MIME:
                continue
            text = getattr(content, "text", None)
            if text is None:
                try:
                    text = base64.b64decode(getattr(content, "blob", "")).decode("utf-8")
                except (binascii.Error, ValueError):
                    continue
            if len(text) > MAX_PAGE:
                raise LookupError(f"{uri} is larger than {MAX_PAGE:,} characters")
            ui = policy.ui_meta(content.meta) or self._listed_ui(server_name, uri)
            return text, dict(ui)
        raise LookupError(f"{uri} holds no {APP_MIME} contents")

    def _tell_refused(self, server: str, uri: str, ui: Mapping[str, Any]) -> None:
        """One line per CSP entry the page is not granted (once per server and entry)."""
        for key, entry, reason in policy.refused(ui):
            if (server, entry) not in self._refusals_told:
                self._refusals_told.add((server, entry))
                shown = clean(entry[:100])
                self.notify(f"{server}: {uri} asks {key} {shown!r}, refused: {reason}")

    def _listed_ui(self, server_name: str, uri: str) -> Mapping[str, Any]:
        for name, listed in self.catalog.app_pages if self.catalog else ():
            if name == server_name and str(listed.uri) == uri:
                return policy.ui_meta(listed.meta)
        return {}

    # -- the web server ------------------------------------------------------------------

    async def _route(self, request: Request, port: int) -> Response:
        parts = request.path.strip("/").split("/")
        if port in self._sandboxes:
            return self._sandbox_route(request, parts, self._sandboxes[port])
        if len(parts) == 2 and parts[0] == "open" and request.method == "GET":
            return self._exchange(parts[1])
        if len(parts) < 2 or not hmac.compare_digest(parts[0], self._token):
            return Response.text(404, "not found")
        if not self._holds_cookie(request):
            return Response.text(403, "this browser has not opened the app's link: " + AGAIN)
        action = parts[2] if len(parts) > 2 else ""
        # Fetch metadata (sent by browsers): the relay's requests come from the page itself;
        # the page is opened by the person or by its own page (navigate), never by another.
        site = request.headers.get("sec-fetch-site", "same-origin")
        if site != "same-origin" and not (action == "" and site == "none"):
            return Response.text(403, "cross-site request refused")
        origin = request.headers.get("origin")
        if origin is not None and origin != self.host_origin:  # another site's script
            return Response.text(403, "cross-origin request refused")
        view = self.views.get(parts[1])
        if view is None:
            return Response.text(404, "not found")
        if view.closed and action != "recv":  # recv: the last messages, then 410
            return Response.text(410, "this app was closed")
        if action == "" and request.method == "GET":
            return self._host_page(view)
        if action == "send" and request.method == "POST":
            try:
                message = json_limits.loads(request.body)
            except ValueError:
                return Response.text(400, "not JSON")
            assert self._tg is not None
            self._tg.start_soon(view.receive, message, self)  # a tool call may take long
            return Response.json({})
        if action == "recv" and request.method == "GET":
            after = int(request.query["after"]) if request.query.get("after", "").isdigit() else 0
            messages, last = await view.take(after, POLL_WAIT)
            if view.closed and not messages:
                return Response.text(410, "this app was closed")
            return Response.json({"messages": messages, "next": last})
        return Response.text(405, "not allowed")

    def _exchange(self, ticket: str) -> Response:
        """A one-time link: the cookie, and on to the page (the link is spent)."""
        found = next((t for t in self._tickets if hmac.compare_digest(t, ticket)), None)
        view = self.views.get(self._tickets.pop(found)) if found is not None else None
        if view is None:
            return Response.text(403, "this link was used already (each opens once): " + AGAIN)
        if view.closed:
            return Response.text(410, "this app was closed")
        cookie = f"{COOKIE}={self._cookie}; Path=/{self._token}/; HttpOnly; SameSite=Strict"
        headers = {"Location": self._page_path(view), "Set-Cookie": cookie}
        return Response(303, b"", "text/plain; charset=utf-8", headers)

    def _holds_cookie(self, request: Request) -> bool:
        for pair in request.headers.get("cookie", "").split(";"):
            name, _, value = pair.strip().partition("=")
            if name == COOKIE and hmac.compare_digest(value, self._cookie):
                return True
        return False

    def _host_page(self, view: AppView) -> Response:
        nonce = secrets.token_urlsafe(16)
        sandbox_origin = self.sandbox_origin(view.server)
        page = pages.host_page(
            title=view.title,
            uri=view.uri,
            sandbox_url=f"{sandbox_origin}/{self._sandbox_token}/{view.id}/sandbox",
            sandbox_origin=sandbox_origin,
            allow=policy.allow_attribute(view.ui),
            nonce=nonce,
        )
        csp = pages.HOST_PAGE_CSP.format(nonce=nonce, sandbox_origin=sandbox_origin)
        headers = {"Content-Security-Policy": csp}
        return Response(200, page.encode(), "text/html; charset=utf-8", headers)

    def _sandbox_route(self, request: Request, parts: list[str], server: str) -> Response:
        """The proxy page, served with the app's own CSP and permissions (the app's frame
        inherits them), on its server's origin only."""
        if len(parts) != 3 or parts[2] != "sandbox" or request.method != "GET":
            return Response.text(404, "not found")
        view = self.views.get(parts[1])
        if not hmac.compare_digest(parts[0], self._sandbox_token) or view is None:
            return Response.text(404, "not found")
        if view.server != server:  # another server's origin: its storage is not this app's
            return Response.text(404, "not found")
        csp = f"{policy.content_security_policy(view.ui)}; frame-ancestors {self.host_origin}"
        headers = {
            "Content-Security-Policy": csp,
            "Permissions-Policy": policy.permissions_policy(view.ui),
        }
        page = pages.sandbox_page(self.host_origin).encode()
        return Response(200, page, "text/html; charset=utf-8", headers)

    # -- what views ask for (bridge.Services) --------------------------------------------

    def find_tool(self, server: str, name: str) -> ToolSpec | None:
        return self.registry.server_tool(server, name)

    async def call_tool(self, view: AppView, spec: ToolSpec, arguments: dict[str, Any]) -> Any:
        """Through the session's one gate (agent.loop.gate): the user's hooks, the approval
        policy, the trace and a transcript record, as for the model's own calls."""
        public = self.registry.public_name(spec.server, spec.name) or spec.name
        allowed = view.own_tools_allowed and not spec.for_model
        if self.gate.approval.needs_approval(spec) and not allowed:  # who asks, first
            self.notify(f"app {view.title} asks to run a tool:")

        async def asking(decide: Callable[[], Awaitable[T]]) -> T:
            async def for_this_view() -> T:  # runs in the front end's task: set it there
                token = ASKING_VIEW.set(view)
                try:
                    return await decide()
                finally:
                    ASKING_VIEW.reset(token)

            return await self._in_terminal(for_this_view)

        observation, ran = await self.gate.call_from(
            f"app {view.title}", spec, public, arguments, notify=self.notify, asking=asking
        )
        if not ran:
            self.notify(f"app {view.title}: {spec.server} › {spec.name} refused")
            reason = strip_marker(observation.text).removeprefix("Error: ")
            raise AppError(
                REFUSED, f"not approved: '{spec.name}' on server '{spec.server}': {reason}"
            )
        if observation.is_error and spec.server not in self._roots_told:
            hint = roots_hint(self.registry.servers.get(spec.server), observation.text)
            if hint is not None:
                self._roots_told.add(spec.server)
                self.notify(" ".join(hint))
        if observation.result is not None:
            return result_wire(observation.result)
        return error_result(strip_marker(observation.text))

    async def read_resource(self, view: AppView, uri: str) -> dict[str, Any]:
        server = self.registry.servers.get(view.server)
        if server is None or not server.publishes:
            raise AppError(REFUSED, "the app's server is gone")
        try:
            with anyio.fail_after(READ_TIMEOUT):
                read = await server.read_resource(uri)
        except (MCPError, TimeoutError, OSError) as exc:
            raise AppError(REFUSED, f"cannot read {uri}: {exc or type(exc).__name__}") from None
        return read.model_dump(by_alias=True, exclude_none=True, mode="json")

    async def message(self, view: AppView, text: str) -> None:
        """A message the page would send as the user: asked, every time (the page is the
        server's, not the user's); one question at a time per view, MAX_MESSAGES in all."""
        ui = self.ui
        if ui is None:
            raise AppError(REFUSED, "this session takes no messages from apps")
        if view.message_asked:
            raise AppError(REFUSED, "the user is being asked about this app's last message")
        if view.messages >= MAX_MESSAGES:
            raise AppError(REFUSED, f"this app sent {MAX_MESSAGES} messages, the most it may")
        view.message_asked = True
        view.messages += 1
        try:
            flat = " ".join(text.split())
            shown = clean(flat[:SHOWN_MESSAGE]) + ("…" if len(flat) > SHOWN_MESSAGE else "")
            question = (
                f'App {view.title} wants to send a message as you: "{shown}" — '
                "send it? [y]es / [n]o: "
            )
            if not await self._in_terminal(lambda: ui.confirm(question)):
                raise AppError(REFUSED, "the user did not send this message")
        finally:
            view.message_asked = False
        ui.app_turn(f"app {view.title}", text)

    async def open_link(self, view: AppView, url: str) -> bool:
        ui = self.ui
        if ui is None:
            return False
        question = f"App {view.title} asks to open {url} — open it? [y]es / [n]o: "
        if not await self._in_terminal(lambda: ui.confirm(question)):
            return False
        if self.browser is not None:
            await self.browser(url)
        else:
            self.notify(f"open: {url}")
        return True

    def log(self, view: AppView, level: str, text: str) -> None:
        if self.ui is not None:
            self.ui.app_log(f"app {view.title}", level, text)

    def notify(self, text: str) -> None:
        """A line for the person (the page's URL, a refusal), through the front end."""
        if self.ui is not None:
            self.ui.app_notice(text)

    async def _in_terminal(self, work: Callable[[], Awaitable[T]]) -> T:
        if self.ui is None:
            return await work()
        return await self.ui.in_terminal(work)
