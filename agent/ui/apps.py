"""The REPL's side of MCP Apps: what the app host asks of the terminal (agent.apps.host
`AppUI`): questions, the user's next turn, log lines. (`/apps` and `/app TOOL` are slash
commands, in agent/ui/commands.py.)

A mixin of `Repl`, kept apart so the REPL's module stays about the REPL. Questions from an
app are asked in the flow of a running turn or command, and otherwise through the inbox,
which interrupts the prompt (agent.ui.inbox).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console
from rich.text import Text

from agent.loop.events import ToolCallFinished
from agent.ui.inbox import AppTurn, Inbox, Work

if TYPE_CHECKING:
    from agent.apps.host import AppHost

T = TypeVar("T")


class AppFrontEnd:
    """Needs from the REPL: the attributes declared here, and `question`."""

    apps: AppHost | None
    inbox: Inbox
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
