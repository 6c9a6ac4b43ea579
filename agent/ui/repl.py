"""The interactive REPL: the loop over the input line, Ctrl-C, and the questions a turn
asks (approvals, servers' sampling and elicitation); its slash commands are a table of
their own (agent/ui/commands.py).

Built by injection (console, input line, agent, registry) so tests drive it with a
pipe input and a console on a StringIO. Ctrl-C during a turn cancels that turn only;
memory stays valid (cut-short tool calls are recorded as cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
from collections.abc import Callable, Iterator
from typing import Any

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.history import InMemoryHistory
from rich.console import Console
from rich.text import Text

from agent.apps.host import ASKING_VIEW, AppHost, roots_hint
from agent.common.transcript import Transcript
from agent.config.settings import Settings
from agent.extensions.skills import Skills
from agent.loop.approval import ApprovalRequest, Decision
from agent.loop.events import RunFinished, ToolCallFinished
from agent.loop.react import Agent
from agent.tools.catalog import Catalog
from agent.tools.registry import ToolRegistry
from agent.tools.server_requests import ElicitAnswer, SamplingRequest
from agent.ui import arguments
from agent.ui.apps import AppFrontEnd
from agent.ui.commands import Command, SlashCommands
from agent.ui.forms import ask_form
from agent.ui.inbox import AppTurn, Inbox, Work
from agent.ui.layout import print_path, wrap_words
from agent.ui.render import EventRenderer, LogLines, compact_json
from agent.ui.safe import clean

APPROVAL_CHOICES = "[y]es / [n]o / [a]lways for this tool"
APPROVAL_WORDS: dict[str, Decision] = {
    "y": "yes",
    "yes": "yes",
    "n": "no",
    "no": "no",
    "a": "always",
    "always": "always",
}
PAGE_CHOICE = " / this [p]age's own tools"  # offered for an app page's app-only calls
QUIT_HINT = "(Ctrl-D or /exit to quit)"


class Repl(AppFrontEnd):
    """`input_line`: a prompt-toolkit PromptSession at a terminal, or agent.ui.input's
    PipedLines. Input from a pipe: `status` (stderr) takes the status lines so stdout
    holds only what was asked for, `can_ask` is False (questions are never read from the
    pipe) and `on_answer` prints each answer. `on_cancel`: called when the user cancels a
    turn (stops servers' sampling requests it caused)."""

    def __init__(
        self,
        console: Console,
        input_line: PromptSession[str],
        agent: Agent,
        registry: ToolRegistry,
        settings: Settings,
        renderer: EventRenderer,
        transcript: Transcript | None = None,
        catalog: Catalog | None = None,
        skills: Skills | None = None,
        apps: AppHost | None = None,
        *,
        status: Console | None = None,
        can_ask: bool = True,
        on_answer: Callable[[str], None] | None = None,
        on_cancel: Callable[[], None] | None = None,
    ) -> None:
        self.transcript = transcript
        self.apps = apps  # MCP Apps' pages in the browser (None: not shown, e.g. tests)
        self.inbox = Inbox()  # what apps ask of the terminal while it waits at the prompt
        self._question_turn = anyio.Lock()  # one question on screen at a time
        self.catalog = catalog or Catalog(registry)
        self.console = console
        self.input_line = input_line
        self.agent = agent
        self.registry = registry
        self.renderer = renderer
        # What Ctrl-C cancels: the innermost of a command and the turn it may start.
        self._scopes: list[anyio.CancelScope] = []
        self._asking = False  # a question is open: log lines wait, they would tear it
        self.on_cancel = on_cancel
        self.status: Console = status or console
        self.can_ask = can_ask
        self.on_answer = on_answer  # None: the renderer shows it
        self._logs = LogLines(console)  # printed on `status` (see server_log)
        self._roots_told: set[str] = set()  # servers told how to offer them folders
        self.slash = SlashCommands(
            console,
            agent,
            registry,
            settings,
            renderer,
            self.catalog,
            skills or Skills([]),
            transcript,
            apps,
            question=self.question,
            run_turn=self.run_turn,
        )

    @property
    def commands(self) -> dict[str, Command]:
        """The slash-command table (completion offers its names)."""
        return self.slash.commands

    def server_log(self, server: str, line: str) -> None:
        """An MCP log message (-v): shown during a turn (a burst a few times a second); at
        the prompt or in a question it would tear the input line, so it waits."""
        self._logs.console = self.status
        self._logs.add(server, line, hold=not self._scopes or self._asking)

    def _flush_logs(self) -> None:
        self._logs.console = self.status
        self._logs.flush()

    def argument_words(self, command: str) -> list[str]:
        """Completions for a command's argument: servers and tools, modes, prompt names."""
        return self.slash.argument_words(command)

    async def server_completions(self, text: str) -> list[tuple[str, int]]:
        """What servers offer for the word being typed (completion/complete): a prompt
        argument's value in `/prompt NAME key=val` (the other pairs are its context), or a
        URI that fills a resource template in `@server:uri`."""
        if text.startswith("/prompt "):
            words = text[len("/prompt ") :].split(" ")
            if len(words) < 2 or "=" not in words[-1]:
                return []
            key, _, value = words[-1].partition("=")
            context = dict(w.split("=", 1) for w in words[1:-1] if "=" in w)
            values = await self.catalog.complete_prompt(words[0], key, value, context)
            return [(f"{key}={shlex.quote(v)}", -len(words[-1])) for v in values if v != value]
        word = text.rsplit(None, 1)[-1] if text.strip() else ""
        if word.startswith("@") and ":" in word:
            refs = await self.catalog.complete_ref(word[1:])
            return [("@" + ref, -len(word)) for ref in refs]
        return []

    def resource_refs(self) -> list[str]:
        """`server:uri` of every known resource, for `@` completion."""
        return self.catalog.refs()

    # -- main loop ---------------------------------------------------------------------

    async def loop(self) -> int:
        self.status.print(
            Text(
                f"{len(self.registry.tools)} tools from {len(self.registry.servers)} server(s). "
                "Type /help for commands, Ctrl-D to exit.",
                style="dim",
            )
        )
        while True:
            try:
                item = await self.inbox.next(self.input_line, "› ")
            except KeyboardInterrupt:  # as in a shell: the line is dropped; say how to leave
                self.status.print(Text(QUIT_HINT, style="dim"))
                continue
            except EOFError:
                return 0
            if isinstance(item, Work):
                await item()
                continue
            if isinstance(item, AppTurn):  # a ui/message: the user's turn, said so
                self.status.print(Text(f"{item.source} › {clean(item.text)}", style="bold cyan"))
                await self.run_turn(item.text)
                continue
            line = item.strip()
            if not line:
                continue
            if line.startswith("/"):
                leave = False
                with anyio.CancelScope() as scope, self._sigint_cancels(scope):
                    await self.registry.settle()  # what servers announced meanwhile
                    leave = await self.slash.dispatch(line)
                if scope.cancelled_caught:
                    self.console.print(Text("cancelled", style="yellow"))
                elif leave:
                    return 0
                continue
            await self.run_turn(line)

    async def run_turn(self, request: str) -> None:
        """One request; Ctrl-C cancels it and returns to the prompt."""
        with anyio.CancelScope() as scope, self._sigint_cancels(scope):
            self._flush_logs()
            request, problems = await self.catalog.expand_refs(request)
            for problem in problems:
                self.status.print(Text(problem, style="yellow"))
            async with contextlib.aclosing(self.agent.run(request)) as events:
                async for event in events:
                    self.renderer.handle(event)
                    if isinstance(event, ToolCallFinished):
                        self.show_app(event)
                        self._hint_roots(event)
                    if isinstance(event, RunFinished) and event.answer and self.on_answer:
                        self.on_answer(event.answer)
        if scope.cancelled_caught:
            self.renderer.cancelled()  # what the cut-short calls had produced
        self.renderer.close()
        if scope.cancelled_caught:
            if self.on_cancel is not None:
                self.on_cancel()
            memory = self.agent.memory
            if memory.messages and memory.messages[-1]["role"] == "user":
                memory.add_assistant("(cancelled by the user)")
            if self.transcript is not None:
                self.transcript.mark("cancelled")
            self.status.print(Text("cancelled", style="yellow"))

    def _hint_roots(self, event: ToolCallFinished) -> None:
        """Once per server: a failed call that reads as a folder refused, by a server
        offered none, says how to offer one."""
        if not event.is_error or event.denied or event.server in self._roots_told:
            return
        hint = roots_hint(self.registry.servers.get(event.server), event.output)
        if hint is not None:
            self._roots_told.add(event.server)
            print_path(self.status, *hint, style="yellow")

    @contextlib.contextmanager
    def _sigint_cancels(self, scope: anyio.CancelScope) -> Iterator[None]:
        """Ctrl-C cancels `scope` while inside; nested uses (a /prompt's turn) stack."""
        self._scopes.append(scope)
        installed = self._install_sigint()
        try:
            yield
        finally:
            self._flush_logs()  # the tail of a burst of server logs, before the prompt
            self._scopes.remove(scope)
            if installed and not self._scopes:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)

    def _install_sigint(self) -> bool:
        """Ctrl-C cancels what is in flight. prompt-toolkit replaces this handler while it
        reads a line (a question), so it is installed again after each question."""
        if not self._scopes:
            return False
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._cancel_innermost)
        except (NotImplementedError, RuntimeError, ValueError):  # not main thread / platform
            return False
        return True

    def _cancel_innermost(self) -> None:
        if self._scopes:
            self._scopes[-1].cancel()

    async def question(self, text: str, default: str = "") -> str | None:
        """One line from the user in the middle of a turn; None on Ctrl-D, and on Ctrl-C,
        which also cancels the turn (as Ctrl-C does anywhere in it).

        The activity display pauses meanwhile; answers stay out of the input history (an
        elicitation form is nobody's next prompt, and may be private).
        """
        if self._cannot_ask(text.strip()):
            return None
        async with self._question_turn:  # an app's question waits for the model's
            return await self._question(text, default)

    async def _question(self, text: str, default: str) -> str | None:
        buffer = self.input_line.default_buffer
        history, buffer.history = buffer.history, InMemoryHistory()
        self._asking = True
        with self.renderer.suspended():
            try:
                shown = wrap_words(clean(text), self.console.width)
                return (await self.input_line.prompt_async(shown, default=default)).strip()
            except KeyboardInterrupt:
                self._cancel_innermost()
                await anyio.lowlevel.checkpoint()  # in the turn's own task: cancelled here
                return None
            except EOFError:
                return None
            finally:
                buffer.history = history
                self._asking = False
                self._install_sigint()
                if self._scopes:
                    self._flush_logs()

    def _cannot_ask(self, what: str, answer: str = "no") -> bool:
        """Without a terminal to ask (piped input), a question must not read the next input
        line (a later turn would become the answer, or a password): the safe answer is
        taken, and said."""
        if not self.can_ask:
            self.status.print(Text(f"{what} — {answer}: input is not a terminal", style="yellow"))
        return not self.can_ask

    async def ask(self, request: ApprovalRequest) -> Decision:
        """Approval prompt; Ctrl-C or Ctrl-D counts as no, anything else unclear is asked
        again with the choices (a typo neither runs the tool nor refuses it).

        Long arguments are shown above the question, each with its beginning whole, long
        blank runs counted and long values cut in the middle with what was left out said
        (a command padded with spaces can hide neither its start nor its tail); secrets
        are masked as everywhere else.
        """
        view = ASKING_VIEW.get()  # a page's call: it may be allowed its own tools
        own = view is not None and not request.spec.for_model and request.spec.server == view.server
        if view is not None and own and view.own_tools_allowed and not request.reason:
            return "yes"  # said once, by "[p]age"; the gate still saw and records the call
        if self._cannot_ask(f"run {request.server} › {request.tool}?", "refused"):
            return "no"
        if request.reason:  # a hook asks
            self.console.print(Text(f"a hook asks: {self.registry.redact(request.reason)}"))
        args = arguments.inline(request.arguments, self.registry.redact)
        if args is None:
            self.console.print(arguments.block(request.arguments, self.registry.redact))
            args = "(arguments above)"
        choices = APPROVAL_CHOICES + (PAGE_CHOICE if own else "")
        text = f"Run {request.server} › {request.tool} {args}? {choices}: "
        if len(text) >= self.console.width:  # the choices on a line of their own
            text = f"Run {request.server} › {request.tool} {args}?\n{choices}: "
        while True:
            answer = await self.question(text)
            if answer is None:  # Ctrl-C or Ctrl-D: no, and the turn goes on or is cancelled
                return "no"
            if own and view is not None and answer.lower() in ("p", "page"):
                view.own_tools_allowed = True
                said = f"(app {view.title}: its calls to {view.server}'s app-only tools run "
                said += "without asking while this page is open; each is still checked and "
                said += "recorded)"
                self.console.print(Text(said, style="dim"))
                return "yes"
            decision = APPROVAL_WORDS.get(answer.lower())
            if decision is not None:
                break
            # A typo is not an answer: a "yes" mistyped must not refuse, nor run anything.
            letters = "y, n, a or p" if own else "y, n or a"
            said = f"'{clean(answer)}' is not an answer: type {letters}"
            self.console.print(Text(said, style="yellow"))
            text = f"{choices} (Ctrl-C cancels the turn): "
        if decision == "always" and self.registry.servers[request.server].config.config_file:
            hint = (
                "(allowed for this session; /approve save remembers it in approvals.json "
                "in the state folder, for this config file)"
            )
            self.console.print(Text(hint, style="dim"))
        return decision

    # -- requests from servers (sampling, elicitation) ---------------------------------

    async def approve_sampling(self, request: SamplingRequest) -> bool:
        if self.agent.approval.mode == "yes":
            return True
        if self._cannot_ask(f"server '{request.server}' asks the model to answer", "declined"):
            return False
        heat = "" if request.temperature is None else f", temperature {request.temperature:g}"
        tools = f", with its {request.tool_count} tools" if request.tool_count else ""
        size = f"~{request.prompt_tokens:,} tokens ({request.prompt_chars:,} characters{tools})"
        self.console.print(
            Text(f"Server '{request.server}' asks the model{heat}, {size}:", style="bold yellow")
        )
        redact = self.registry.redact
        if request.system_prompt:
            self.console.print(Text(f"  system: {redact(request.system_prompt[:300])}", "dim"))
        for message in request.messages:
            content = message["content"]
            shown = content if isinstance(content, str) else compact_json(content, 300)
            self.console.print(Text(f"  {message['role']}: {redact(shown[:500])}"))
        answer = await self.question(
            f"Send it ({size} in, at most {request.max_tokens:,} tokens out)? [y]es / [n]o: "
        )
        return (answer or "").lower() in ("y", "yes")

    async def elicit_url(self, server: str, message: str, url: str) -> ElicitAnswer:
        if self._cannot_ask(f"server '{server}' asks you to open a link", "declined"):
            return ElicitAnswer("decline")
        self.console.print(Text(f"Server '{server}' asks you to open a link:", style="bold yellow"))
        self.console.print(Text(self.registry.redact(f"  {message}\n  {url}")))
        answer = await self.question("Done? [y]es (opened it) / [n]o (decline): ")
        if answer is None:
            return ElicitAnswer("cancel")
        return ElicitAnswer("accept" if answer.lower() in ("y", "yes") else "decline")

    async def elicit_form(self, server: str, message: str, schema: dict[str, Any]) -> ElicitAnswer:
        """Ask field by field, with the schema's types, choices and defaults."""
        if self._cannot_ask(f"server '{server}' asks you to fill in a form", "declined"):
            return ElicitAnswer("decline")
        self.console.print(Text(f"Server '{server}' asks you:", style="bold yellow"))
        self.console.print(Text(f"  {message}"))
        return await ask_form(self.console, self.question, schema)
