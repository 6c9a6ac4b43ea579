"""The interactive REPL: prompt-toolkit input, slash commands, rich output.

Built by injection (console, input line, agent, registry) so tests drive it with a
pipe input and a console on a StringIO. Ctrl-C during a turn cancels that turn only;
memory stays valid (cut-short tool calls are recorded as cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import shlex
import signal
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.history import InMemoryHistory
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent import saved_approvals
from agent.approval import ApprovalRequest, Decision
from agent.apps.host import AppHost
from agent.auth.provider import forget
from agent.catalog import Catalog
from agent.config import Settings
from agent.errors import ConfigError, ToolServerError
from agent.events import RunFinished, ToolCallFinished
from agent.hook_files import HookSet
from agent.react import Agent
from agent.server_requests import ElicitAnswer, SamplingRequest
from agent.skills import Skills
from agent.tools.base import ToolServer
from agent.tools.registry import ToolRegistry
from agent.transcript import Transcript, save_export, to_markdown
from agent.ui import arguments, listings, skill_commands
from agent.ui.apps import AppFrontEnd
from agent.ui.forms import ask_form
from agent.ui.inbox import AppTurn, Inbox, Work
from agent.ui.listings import find_tools
from agent.ui.render import EventRenderer, LogLines, compact_json
from agent.ui.safe import clean

Handler = Callable[[str], Awaitable[bool | None]]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    handler: Handler


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
        self.skills = skills or Skills([])
        self.apps = apps  # MCP Apps' pages in the browser (None: not shown, e.g. tests)
        self.inbox = Inbox()  # what apps ask of the terminal while it waits at the prompt
        self._question_turn = anyio.Lock()  # one question on screen at a time
        self.catalog = catalog or Catalog(registry)
        self.console = console
        self.input_line = input_line
        self.agent = agent
        self.registry = registry
        self.settings = settings
        self.renderer = renderer
        self.commands: dict[str, Command] = {}
        # What Ctrl-C cancels: the innermost of a command and the turn it may start.
        self._scopes: list[anyio.CancelScope] = []
        self._asking = False  # a question is open: log lines wait, they would tear it
        self.on_cancel = on_cancel
        self.status: Console = status or console
        self.can_ask = can_ask
        self.on_answer = on_answer  # None: the renderer shows it
        self._logs = LogLines(console)  # printed on `status` (see server_log)
        for name, help_text, handler in (
            ("help", "show the commands", self._help),
            ("tools", "list tools: /tools [server], or one tool in full: /tools NAME", self._tools),
            ("servers", "server status table; enable|disable NAME for this session", self._servers),
            ("tasks", "running and recent tasks (tool calls run as tasks)", self._tasks),
            ("resources", "list resources and templates: /resources [server]", self._resources),
            ("prompts", "list prompts: /prompts [server]", self._prompts),
            ("prompt", "run a prompt: /prompt NAME key=value ... (or /NAME)", self._prompt),
            ("skills", "list skills and where they come from", self._skills),
            ("skill", "use a skill in a turn: /skill NAME [request]", self._skill),
            ("model", "show or set the model: /model [name]", self._model),
            ("clear", "forget the conversation", self._clear),
            ("compact", "summarise older turns into one message: /compact [focus]", self._compact),
            ("history", "show the conversation so far", self._history),
            ("usage", "tokens and cost of the last turn and the session", self._usage),
            ("hooks", "the active hooks and where they came from", self._hooks),
            (
                "approve",
                "show or set approval: /approve [ask|yes|read-only], or /approve save",
                self._approve,
            ),
            ("save", "export the conversation as Markdown: /save [file.md]", self._save),
            ("login", "log in to a server (OAuth, in the browser): /login NAME", self._login),
            ("apps", "MCP Apps: tools that come with a page, and the pages open", self._apps),
            ("app", "show a tool's page in the browser: /app TOOL", self._app),
            ("logout", "forget a server's tokens: /logout NAME", self._logout),
            ("exit", "leave (also Ctrl-D)", self._exit),
            ("quit", "leave", self._exit),
        ):
            self.commands[name] = Command(name, help_text, handler)

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
        if command == "tools":  # a tool by its public name or by its server's own name
            own = {spec.name for spec in self.registry.tools.values()}
            return list(dict.fromkeys([*self.registry.servers, *self.registry.tools, *own]))
        if command == "approve":
            return ["ask", "yes", "read-only", "save"]
        if command == "prompt":
            return [p.name for _, p in self.catalog.prompts]
        if command == "skill":
            return [skill.handle for skill in self.skills.all]
        if command in ("resources", "prompts", "servers", "login", "logout"):
            return list(self.registry.servers)
        return []

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
            except KeyboardInterrupt:
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
                    leave = await self.dispatch(line)
                if scope.cancelled_caught:
                    self.console.print(Text("cancelled", style="yellow"))
                elif leave:
                    return 0
                continue
            await self.run_turn(line)

    async def dispatch(self, line: str) -> bool:
        """Run a slash command; True means leave the REPL."""
        name, _, arg = line[1:].partition(" ")
        command = self.commands.get(name)
        found = self.catalog.find_prompt(name) if command is None else None
        if isinstance(found, tuple):
            await self._prompt(line[1:])  # `/NAME args` for an unambiguous prompt
            return False
        if isinstance(found, str) and "offered by several servers" in found:
            self.console.print(Text(found, style="yellow"))  # names each server:prompt
            return False
        if command is None:
            close = difflib.get_close_matches(name, list(self.commands), n=1)
            hint = f" — did you mean /{close[0]}?" if close else " — try /help"
            self.console.print(Text(f"unknown command /{name}{hint}", style="yellow"))
            return False
        return bool(await command.handler(arg.strip()))

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
                    if isinstance(event, RunFinished) and event.answer and self.on_answer:
                        self.on_answer(event.answer)
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
                return (await self.input_line.prompt_async(clean(text), default=default)).strip()
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
        """Approval prompt; Ctrl-C or anything unclear counts as no.

        Long arguments are shown above the question, each with its beginning whole, long
        blank runs counted and long values cut in the middle with what was left out said
        (a command padded with spaces can hide neither its start nor its tail); secrets
        are masked as everywhere else.
        """
        if self._cannot_ask(f"run {request.server} › {request.tool}?", "refused"):
            return "no"
        if request.reason:  # a hook asks
            self.console.print(Text(f"a hook asks: {self.registry.redact(request.reason)}"))
        args = arguments.inline(request.arguments, self.registry.redact)
        if args is None:
            self.console.print(arguments.block(request.arguments, self.registry.redact))
            args = "(arguments above)"
        answer = await self.question(
            f"Run {request.server} › {request.tool} {args}? [y]es / [n]o / [a]lways for this tool: "
        )
        answer = (answer or "").lower()
        if answer in ("a", "always"):
            if self.registry.servers[request.server].config.config_file:
                hint = "(allowed for this session; /approve save keeps it in the config)"
                self.console.print(Text(hint, style="dim"))
            return "always"
        return "yes" if answer in ("y", "yes") else "no"

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

    # -- commands ----------------------------------------------------------------------

    async def _help(self, arg: str) -> None:
        table = Table(show_header=False, box=None)
        for command in self.commands.values():
            table.add_row(Text("/" + command.name, style="bold"), Text(command.help))
        self.console.print(table)

    async def _tools(self, arg: str) -> None:
        found = find_tools(self.registry.tools, arg) if arg else []
        for public, spec in found:  # in full; a server's own name may match several
            asks = self.agent.approval.needs_approval(spec)
            listings.show_tool(self.console, public, spec, asks=asks)
        if found:
            return
        if arg and arg not in self.registry.servers:
            self.console.print(Text(f"no server or tool named {arg!r}", style="yellow"))
            return
        listings.show_tools(self.console, self.registry.tools, arg, self.registry.app_only)

    async def _servers(self, arg: str) -> None:
        verb, _, name = arg.partition(" ")
        if verb in ("enable", "disable"):
            await self._switch_server(verb, name.strip())
            return
        auth = {name: self.registry.auth_words(name) for name in self.registry.servers}
        listings.show_servers(self.console, self.registry.statuses(), auth)
        for name, server in self.registry.servers.items():
            roots = server.roots
            offered = ", ".join(str(r) for r in roots) if roots else "none"
            self.console.print(Text(f"roots offered to {name}: {offered}", style="dim"))
        files = ", ".join(self.settings.config_files) or "none (defaults)"
        self.console.print(Text(f"config files read: {files}", style="dim"))

    async def _switch_server(self, verb: str, name: str) -> None:
        """`/servers enable|disable NAME`: for this session only (files stay as they are)."""
        server = self.registry.servers.get(name)
        if server is None:
            known = ", ".join(self.registry.servers) or "none"
            self.console.print(Text(f"no server '{name}' (servers: {known})", style="yellow"))
            return
        if verb == "disable":
            await self.registry.disable(name)
            said = f"server '{name}' disabled for this session ({len(self.registry.tools)} tools)"
            self.console.print(Text(said, style="dim"))
            return
        if server.status.state == "ready":
            self.console.print(Text(f"server '{name}' is already on", style="dim"))
            return
        failure = await self.registry.enable(name)
        if failure is not None:
            self.console.print(Text(f"server '{name}': {failure}", style="yellow"))
            return
        count = server.status.tool_count
        self.console.print(Text(f"server '{name}' enabled ({count} tools)", style="dim"))

    async def _tasks(self, arg: str) -> None:
        with self.console.status(Text("listing…", style="dim")):
            tasks = await self.registry.refresh_tasks()
        if not listings.show_tasks(self.console, tasks):
            self.console.print(Text("no tasks yet", style="dim"))

    async def _refreshed_catalog(self, server: str) -> bool:
        """Re-list for /resources and /prompts; False (said why) for an unknown server."""
        if server and server not in self.registry.servers:
            known = ", ".join(self.registry.servers)
            self.console.print(Text(f"no server named {server!r} (servers: {known})", "yellow"))
            return False
        with self.console.status(Text("listing…", style="dim")):
            await self.catalog.refresh()
        for name, error in self.catalog.errors.items():
            if not server or name == server:
                self.console.print(Text(f"{name}: {self.registry.redact(error)}", "yellow"))
        return True

    async def _resources(self, arg: str) -> None:
        if not await self._refreshed_catalog(arg):
            return
        shown = listings.show_resources(
            self.console,
            [(server, r) for server, r in self.catalog.resources if not arg or server == arg],
            [(server, t) for server, t in self.catalog.templates if not arg or server == arg],
        )
        if shown:
            self.console.print(Text("attach one to a request with @server:uri", style="dim"))
        else:
            self.console.print(Text("no resources", style="dim"))
        pages = [r for server, r in self.catalog.app_pages if not arg or server == arg]
        if pages:  # ui:// pages are for the app host, never attached
            self.console.print(Text(f"{len(pages)} app page(s) (MCP Apps): /apps", style="dim"))

    async def _prompts(self, arg: str) -> None:
        if not await self._refreshed_catalog(arg):
            return
        prompts = [(server, p) for server, p in self.catalog.prompts if not arg or server == arg]
        if not listings.show_prompts(self.console, prompts):
            self.console.print(Text("no prompts", style="dim"))

    async def _prompt(self, arg: str) -> None:
        """Fetch an MCP prompt (asking for missing required arguments) and run it as a turn."""
        name, _, rest = arg.partition(" ")
        if not name:
            self.console.print(Text("usage: /prompt NAME key=value ...", style="yellow"))
            return
        found = self.catalog.find_prompt(name)
        if isinstance(found, str):  # maybe published since the last listing
            await self.catalog.refresh()
            found = self.catalog.find_prompt(name)
        if isinstance(found, str):
            self.console.print(Text(found, style="yellow"))
            return
        server, prompt = found
        try:
            arguments = dict(_key_values(rest))
        except ValueError as exc:
            self.console.print(Text(str(exc), style="yellow"))
            return
        for spec in prompt.arguments or []:
            if spec.required and not arguments.get(spec.name):
                hint = f" ({spec.description})" if spec.description else ""
                value = await self.question(f"{spec.name}{hint}: ")
                if not value:
                    self.console.print(Text("prompt cancelled", style="dim"))
                    return
                arguments[spec.name] = value
        try:
            messages = await self.catalog.get_prompt(server, prompt.name, arguments)
        except LookupError as exc:
            self.console.print(Text(str(exc), style="red"))
            return
        if not messages:
            self.console.print(Text("the prompt has no messages", style="yellow"))
            return
        *earlier, (role, last) = messages
        for earlier_role, text in earlier:  # context before the request itself
            if earlier_role == "assistant":
                self.agent.memory.add_assistant(text)
            else:
                self.agent.memory.add_user(text)
        if role == "assistant":
            self.agent.memory.add_assistant(last)
            last = "Continue."
        await self.run_turn(last)

    async def _skills(self, arg: str) -> None:
        await skill_commands.refresh_and_list(self.console, self.skills)

    async def _skill(self, arg: str) -> None:
        await skill_commands.use_skill(self.console, self.skills, arg, self.run_turn)

    async def _model(self, arg: str) -> None:
        if arg:
            self.agent.model.model = arg
        self.console.print(Text(f"model: {self.agent.model.model}"))

    async def _compact(self, arg: str) -> None:
        self.renderer.handle(await self.agent.compact(arg.strip()))

    async def _clear(self, arg: str) -> None:
        self.agent.memory.clear()
        if self.transcript is not None:
            self.transcript.mark("clear")
        self.console.print(Text("conversation cleared", style="dim"))

    async def _history(self, arg: str) -> None:
        for message in self.agent.memory.messages:
            role = message["role"]
            content = message.get("content") or ""
            if message.get("tool_calls"):
                calls = ", ".join(c["function"]["name"] for c in message["tool_calls"])
                content = f"{content}\n(calls {calls})".strip()
            shown = self.registry.redact(str(content)[:500])
            self.console.print(Text(f"{role}: ", style="bold"), Text(shown))

    async def _hooks(self, arg: str) -> None:
        listings.show_hooks(
            self.console, self.agent.hooks.hookset if self.agent.hooks else HookSet()
        )

    async def _usage(self, arg: str) -> None:
        table = Table("", "prompt", "cached", "completion", "total", "cost", box=None)
        for label, usage in (
            ("last turn", self.agent.run_usage),
            ("session", self.agent.session_usage),
        ):
            total = usage.prompt_tokens + usage.completion_tokens
            counts = (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens, total)
            table.add_row(label, *(usage.shown(n) for n in counts), usage.shown_cost())
        self.console.print(table)

    async def _approve(self, arg: str) -> None:
        policy = self.agent.approval
        if arg == "save":
            self._save_trust()
            return
        if arg in ("ask", "yes", "read-only"):
            policy.mode = arg  # type: ignore[assignment]
        elif arg:
            self.console.print(
                Text(f"unknown mode {arg!r}: use ask, yes, read-only or save", style="yellow")
            )
            return
        always = ", ".join(f"{s} › {t}" for s, t in sorted(policy.always)) or "none"
        self.console.print(Text(f"approval: {policy.mode}; always allowed: {always}"))
        trusted = [
            f"{cfg.name} › {', '.join(cfg.trust) if isinstance(cfg.trust, tuple) else '*'}"
            for cfg in self.settings.servers
            if cfg.trust
        ]
        if trusted:
            self.console.print(Text(f"trusted in the config: {'; '.join(trusted)}"))

    def _save_trust(self) -> None:
        """Keep this session's "always" answers in our own file (agent/saved_approvals.py),
        never in the mcpServers file: it may be another program's, or a symlink."""
        by_server: dict[str, list[str]] = {}
        for server, tool in sorted(self.agent.approval.always):
            by_server.setdefault(server, []).append(tool)
        if not by_server:
            self.console.print(Text("nothing to save: no tool was allowed 'always'", "dim"))
        for server, tools in by_server.items():
            cfg = self.registry.servers[server].config
            if cfg.config_file is None:
                line = f'{server}: not from an mcpServers file; add "trust" to its entry'
                self.console.print(Text(line, style="yellow"))
                continue
            print_ = saved_approvals.fingerprint(cfg.command, cfg.args, cfg.url)
            try:
                path, added = saved_approvals.save(
                    self.settings.state_dir, cfg.config_file, server, print_, tools
                )
            except ConfigError as exc:
                self.console.print(Text(exc.message, style="red"))
                continue
            done = ", ".join(added) if added else "already there"
            line = f"{server} trust += {done} (kept in {path}, for {cfg.config_file})"
            self.console.print(Text(line))

    async def _save(self, arg: str) -> None:
        """Markdown as shown on screen: secrets masked, control characters as escapes."""
        session_id = self.transcript.session_id if self.transcript else "session"
        text = clean(self.registry.redact(to_markdown(self.agent.memory.messages)))
        try:
            path = await anyio.to_thread.run_sync(
                save_export, text, self.settings.state_dir, session_id, arg
            )
        except OSError as exc:
            where = exc.filename or arg
            self.console.print(Text(f"cannot save to {where}: {exc.strerror}", style="red"))
            return
        self.console.print(Text(f"saved {len(self.agent.memory.messages)} messages to {path}"))

    def _login_target(self, arg: str, command: str) -> ToolServer | None:
        server = self.registry.servers.get(arg.strip())
        if server is not None and server.auth is not None:
            return server
        known = [n for n, s in self.registry.servers.items() if s.auth is not None]
        hint = f"servers that log in: {', '.join(known)}" if known else "no server logs in"
        self.console.print(Text(f"usage: /{command} NAME ({hint})", style="yellow"))
        return None

    async def _login(self, arg: str) -> None:
        """Log in again (fresh tokens) and reconnect; Ctrl-C cancels the login only."""
        server = self._login_target(arg, "login")
        if server is None or server.auth is None:
            return
        # Closed first: closing sends a last request, which must not ask for a login.
        await self.registry.disconnect(server.name, "logging in")
        forget(server.auth, delete=False)
        try:
            await self.registry.reconnect(server.name)
        except ToolServerError as exc:
            self.console.print(Text(f"login failed: {exc}", style="red"))
            return
        words = self.registry.auth_words(server.name)
        self.console.print(Text(f"'{server.name}': {words}; {server.status.tool_count} tools"))

    async def _logout(self, arg: str) -> None:
        server = self._login_target(arg, "logout")
        if server is None or server.auth is None:
            return
        await self.registry.disconnect(server.name, f"logged out (/login {server.name})")
        had = forget(server.auth, delete=True)
        said = "tokens removed" if had else "no tokens were stored"
        self.console.print(Text(f"logged out of '{server.name}': {said}"))

    async def _exit(self, arg: str) -> bool:
        return True


def _key_values(text: str) -> Iterator[tuple[str, str]]:
    """`key=value` pairs; values may be quoted to hold spaces."""
    for token in shlex.split(text):
        key, eq, value = token.partition("=")
        if not eq or not key:
            raise ValueError(f"'{token}' is not key=value")
        yield key, value
