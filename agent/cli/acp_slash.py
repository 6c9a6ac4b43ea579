"""Our slash commands in an ACP editor, for agent.cli.acp_command.

The commands are the REPL's own table (agent.ui.commands.SlashCommands), not a copy:
those that need the REPL's terminal (leaving it, a browser login, app pages: `Command
.terminal`) are left out, the others are announced with `available_commands_update` and
run by their own handlers when a prompt starts with `/name` (custom commands are rows of
the same table). What a handler prints goes to a console that writes to memory (cleaned
and masked as every console's output is), and from there to the editor as the answer. A
question a handler would ask (/undo over files changed since) gets no answer, which each
handler takes as "no"; `/prompt`, `/skill` and custom commands end in a turn, run as any
prompt's.
"""

from __future__ import annotations

import io
import re
from collections.abc import Awaitable, Callable

from acp.helpers import update_agent_message_text, update_available_commands
from acp.schema import AvailableCommand, AvailableCommandInput, UnstructuredCommandInput

from agent.session.startup import Session
from agent.ui.commands import SlashCommands
from agent.ui.render import EventRenderer
from agent.ui.safe import SafeConsole

# `/name args`, a custom command's `/frontend:test` too; not a path ("/etc/hosts …").
COMMAND = re.compile(r"/([A-Za-z][\w.-]*(?::[\w.-]+)*)(?:\s+(.*))?\Z", re.DOTALL)
WIDTH = 100  # columns of the tables the handlers print


class EditorCommands:
    """One session's slash commands, as the editor sees them."""

    def __init__(
        self, session: Session, send: Callable[[object], Awaitable[None]], turn: TurnRunner
    ) -> None:
        self.buffer = io.StringIO()
        self.console = SafeConsole(
            file=self.buffer,
            width=WIDTH,
            force_terminal=False,
            no_color=True,
            redact=session.registry.redact,
        )
        self.send = send
        self.turn = turn
        renderer = EventRenderer(self.console, stream_answer=False, redact=session.registry.redact)
        self.slash = SlashCommands(
            self.console,
            session.agent,
            session.registry,
            session.settings,
            renderer,
            session.catalog,
            session.skills,
            session.saved.transcript,
            None,
            question=self._no_answer,
            run_turn=self._run_turn,
        )

    def offered(self) -> list[AvailableCommand]:
        """Every command that works without a terminal, with its help as the hint."""
        return [
            AvailableCommand(
                name=command.name,
                description=command.help,
                input=AvailableCommandInput(root=UnstructuredCommandInput(hint=command.help)),
            )
            for command in self.slash.commands.values()
            if not command.terminal
        ]

    def announcement(self) -> object:
        return update_available_commands(self.offered())

    @staticmethod
    def parse(text: str) -> str | None:
        """The command's name when the prompt is `/name [args]`, else None."""
        found = COMMAND.match(text.strip())
        return found.group(1) if found else None

    async def run(self, text: str) -> None:
        """Run `/name args`; what it printed goes to the editor as the answer."""
        name = self.parse(text) or ""
        command = self.slash.commands.get(name)
        if command is not None and command.terminal:
            self.console.print(f"/{name} needs a terminal: run it in `run_mcp.py -i`", markup=False)
        else:
            await self.slash.dispatch(text.strip())  # unknown: says so, with a suggestion
        await self._flush()

    async def _flush(self) -> None:
        printed = self.buffer.getvalue().rstrip()
        self.buffer.seek(0)
        self.buffer.truncate()
        if not printed:
            return
        # Tables and listings keep their columns in a code block; one line reads as text.
        shown = f"```\n{printed}\n```\n" if "\n" in printed else printed
        await self.send(update_agent_message_text(shown))

    async def _no_answer(self, question: str) -> str | None:
        self.console.print(question, markup=False)
        self.console.print("(not asked in the editor: taken as no)", markup=False)
        return None

    async def _run_turn(self, request: str) -> None:
        await self._flush()  # what the command printed first, then its turn
        await self.turn(request)


TurnRunner = Callable[[str], Awaitable[None]]
