"""The REPL's side of MCP Apps: `/apps`, `/app TOOL`, and what the app host asks of the
terminal (agent.apps.host `AppUI`): questions, the user's next turn, log lines.

A mixin of `Repl`, kept apart so the REPL's module stays about the REPL. Questions from an
app are asked in the flow of a running turn or command, and otherwise through the inbox,
which interrupts the prompt (agent.ui.inbox).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console
from rich.text import Text

from agent.events import ToolCallFinished
from agent.tools.base import ToolSpec
from agent.ui.inbox import AppTurn, Inbox, Work
from agent.ui.layout import Column, show_table
from agent.ui.listings import find_tools

if TYPE_CHECKING:
    from agent.apps.host import AppHost
    from agent.tools.registry import ToolRegistry

T = TypeVar("T")


class AppFrontEnd:
    """Needs from the REPL: the attributes declared here, and `question`."""

    apps: AppHost | None
    inbox: Inbox
    registry: ToolRegistry
    console: Console
    status: Console
    can_ask: bool
    _scopes: list[Any]

    async def question(self, text: str, default: str = "") -> str | None:
        raise NotImplementedError

    def server_log(self, server: str, line: str) -> None:
        raise NotImplementedError

    def _flush_logs(self) -> None:
        raise NotImplementedError

    def show_app(self, event: ToolCallFinished) -> None:
        """A tool the model ran came with a page: show it, with the call's input and result."""
        if self.apps is not None and not event.denied and not event.is_error:
            self.apps.tool_finished(event.server, event.tool, event.arguments, event.result)

    # -- agent.apps.host.AppUI -----------------------------------------------------------

    async def in_terminal(self, work: Callable[[], Awaitable[T]]) -> T:
        if self._scopes or not self.can_ask:  # a turn or command runs: ask in its flow
            return await work()
        value: T = await self.inbox.run(work)
        return value

    async def confirm(self, question: str) -> bool:
        if not self.can_ask:
            self.status.print(Text(f"{question.rstrip(': ')} — no: input is not a terminal"))
            return False
        return (await self.question(question) or "").lower() in ("y", "yes")

    def app_turn(self, source: str, text: str) -> None:
        self.inbox.put(AppTurn(source, text))

    def app_log(self, source: str, level: str, text: str) -> None:
        """Shown like a server's log line; at the prompt, the prompt steps aside for it."""
        if self._scopes:
            self.server_log(source, f"[{level}] {text}")
            return

        async def show() -> None:
            self.server_log(source, f"[{level}] {text}")
            self._flush_logs()

        self.inbox.put(Work(show))

    def app_notice(self, text: str) -> None:
        self.status.print(Text(text, style="cyan"))

    # -- commands ------------------------------------------------------------------------

    async def _apps(self, arg: str) -> None:
        """Tools that come with a page (the model's and app-only ones), then open pages."""
        rows = [[p, s.app_uri or ""] for p, s in self.registry.tools.items() if s.app_uri]
        if not rows and not (self.apps and self.apps.views):
            self.console.print(Text("no tool comes with an app (MCP Apps)", style="dim"))
            return
        show_table(self.console, [Column("tool", key=True), Column("page")], rows)
        if self.apps is None:
            self.console.print(Text("pages are not shown in this session", style="dim"))
            return
        for view in self.apps.views.values():
            state = "closed" if view.closed else ("open" if view.initialized else "not loaded")
            self.console.print(Text(f"{view.title} ({state}): {self.apps.url(view)}"))

    async def _app(self, arg: str) -> None:
        """`/app TOOL`: the tool's page, without running the tool."""
        if self.apps is None:
            self.console.print(Text("pages are not shown in this session", style="yellow"))
            return
        found: list[tuple[str, ToolSpec]] = [
            (p, s) for p, s in find_tools(self.registry.tools, arg) if s.app_uri
        ]
        if len(found) != 1:
            named = ", ".join(p for p, s in self.registry.tools.items() if s.app_uri) or "none"
            self.console.print(Text(f"/app TOOL: one of {named}", style="yellow"))
            return
        try:
            await self.apps.open(found[0][1])
        except LookupError as exc:
            self.console.print(Text(str(exc), style="yellow"))
