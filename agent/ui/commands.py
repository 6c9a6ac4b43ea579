"""The REPL's slash commands: one table (`Command`: name, help, handler, the words that
complete its argument) and the handlers, which print what they find.

Kept apart from agent/ui/repl.py, which holds the loop, Ctrl-C and the asking. A command
is given what it reads in the constructor (console, agent, registry, settings, catalog,
skills, transcript, renderer, app host) and reaches back into the REPL only through the
two callables it is handed: `question` (one line from the user) and `run_turn` (a request
as a turn, cancellable by Ctrl-C), which `/prompt` and `/skill` end in. Groups of commands
over one part of the session live beside it: what the catalog lists (`/resources`,
`/prompts`, `/prompt`) in agent/ui/catalog_commands.py, skills in skill_commands.py, the
instructions files in instructions_commands.py.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent.apps.host import AppHost
from agent.auth.provider import forget
from agent.common.checkpoints import Direction
from agent.common.errors import ConfigError, ToolServerError
from agent.common.transcript import Transcript, save_export, to_markdown
from agent.config import saved_approvals
from agent.config.settings import Settings
from agent.extensions.hook_files import HookSet
from agent.extensions.skills import Skills
from agent.loop.react import Agent
from agent.tools.base import ToolServer
from agent.tools.catalog import Catalog
from agent.tools.registry import ToolRegistry
from agent.tools.sandbox import runs_under
from agent.tools.toolspec import ToolSpec
from agent.ui import (
    catalog_commands,
    custom_commands,
    instructions_commands,
    listings,
    skill_commands,
)
from agent.ui.layout import Column, print_path, show_table
from agent.ui.listings import find_tools
from agent.ui.render import EventRenderer
from agent.ui.safe import clean
from agent.ui.sessions import show_sessions

Handler = Callable[[str], Awaitable[bool | None]]
Question = Callable[[str], Awaitable[str | None]]
Words = Callable[[], list[str]]


@dataclass(frozen=True)
class Command:
    """A slash command: `handler` gets the text after the name (True: leave the REPL);
    `words` lists what completes its argument (agent/ui/input.py's completer);
    `terminal`: it needs the REPL's terminal (leaving it, a browser login, app pages), so a
    front end without one (an editor over ACP) does not offer it."""

    name: str
    help: str
    handler: Handler
    words: Words | None = None
    terminal: bool = False


class SlashCommands:
    """The command table and its handlers over the parts of a running session."""

    def __init__(
        self,
        console: Console,
        agent: Agent,
        registry: ToolRegistry,
        settings: Settings,
        renderer: EventRenderer,
        catalog: Catalog,
        skills: Skills,
        transcript: Transcript | None,
        apps: AppHost | None,
        *,
        question: Question,
        run_turn: Callable[[str], Awaitable[None]],
    ) -> None:
        self.console = console
        self.agent = agent
        self.registry = registry
        self.settings = settings
        self.renderer = renderer
        self.catalog = catalog
        self.skills = skills
        self.transcript = transcript
        self.apps = apps
        self.question = question
        self.run_turn = run_turn
        self.commands: dict[str, Command] = {c.name: c for c in self._table()}
        for row in custom_commands.table(console, agent, settings, run_turn):
            self.commands.setdefault(row[0], Command(*row))  # a built-in of the name wins

    def _table(self) -> tuple[Command, ...]:
        """In the order /help lists them: what the servers offer, the conversation, logins
        and app pages, leaving."""
        return (
            Command("help", "show the commands", self._help, terminal=True),
            *self._server_commands(),
            *self._conversation_commands(),
            *self._login_and_app_commands(),
            Command("exit", "leave (also Ctrl-D)", self._exit, terminal=True),
            Command("quit", "leave", self._exit, terminal=True),
        )

    def _server_commands(self) -> tuple[Command, ...]:
        servers = self._server_names
        return (
            Command(
                "tools",
                "list tools: /tools [server], or one tool in full: /tools NAME",
                self._tools,
                self._tool_words,
            ),
            Command(
                "servers",
                "server status table; enable|disable NAME for this session",
                self._servers,
                servers,
            ),
            Command(
                "sandbox",
                "what each server (and the bundled shell) runs under, and how to widen it",
                self._sandbox,
            ),
            Command("tasks", "running and recent tasks (tool calls run as tasks)", self._tasks),
            Command(
                "resources",
                "list resources and templates: /resources [server]",
                self._resources,
                servers,
            ),
            Command("prompts", "list prompts: /prompts [server]", self._prompts, servers),
            Command(
                "prompt",
                "run a prompt: /prompt NAME key=value ... (or /NAME)",
                self._prompt,
                lambda: [p.name for _, p in self.catalog.prompts],
            ),
            Command("skills", "list skills and where they come from", self._skills),
            Command(
                "skill",
                "use a skill in a turn: /skill NAME [request]",
                self._skill,
                lambda: [skill.handle for skill in self.skills.all],
            ),
        )

    def _conversation_commands(self) -> tuple[Command, ...]:
        return (
            Command("model", "show or set the model: /model [name]", self._model),
            Command("clear", "forget the conversation", self._clear),
            Command(
                "compact",
                "summarise all but the last turn into one message, now: /compact [focus]",
                self._compact,
            ),
            Command("history", "show the conversation so far", self._history),
            Command("usage", "tokens and cost of the last turn and the session", self._usage),
            Command("hooks", "the active hooks and where they came from", self._hooks),
            Command(
                "approve",
                "show or set approval: /approve [ask|yes|read-only], or /approve save",
                self._approve,
                lambda: ["ask", "yes", "read-only", "save"],
            ),
            Command("save", "export the conversation as Markdown: /save [file.md]", self._save),
            Command(
                "sessions",
                "this folder's saved sessions: /sessions [--all] (--all: every folder's)",
                self._sessions,
                lambda: ["--all"],
            ),
            Command("undo", "restore the files the last turn changed (again: earlier)", self._undo),
            Command("redo", "re-apply the changes /undo took back", self._redo),
            *(Command(*row) for row in self._instructions_table()),
        )

    def _instructions_table(self) -> tuple[tuple[str, str, Handler], ...]:
        """/memory and /init (agent/ui/instructions_commands.py)."""
        memory, question, turn = self.agent.memory, self.question, self.run_turn
        return instructions_commands.table(self.console, memory, self.settings, question, turn)

    def _login_and_app_commands(self) -> tuple[Command, ...]:
        return (
            Command(
                "login",
                "log in to a server (OAuth, in the browser): /login NAME",
                self._login,
                self._server_names,
                terminal=True,
            ),
            Command(
                "apps",
                "MCP Apps: tools that come with a page, and the pages open",
                self._apps,
                terminal=True,
            ),
            Command(
                "app", "show a tool's page in the browser: /app TOOL", self._app, terminal=True
            ),
            Command(
                "logout",
                "forget a server's tokens: /logout NAME",
                self._logout,
                self._server_names,
            ),
        )

    def argument_words(self, command: str) -> list[str]:
        """Completions for a command's argument: servers and tools, modes, prompt names."""
        found = self.commands.get(command)
        return found.words() if found is not None and found.words is not None else []

    def _server_names(self) -> list[str]:
        return list(self.registry.servers)

    def _tool_words(self) -> list[str]:
        """A tool by its public name or by its server's own name, and the servers."""
        own = {spec.name for spec in self.registry.tools.values()}
        return list(dict.fromkeys([*self.registry.servers, *self.registry.tools, *own]))

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

    async def _help(self, arg: str) -> None:
        table = Table(show_header=False, box=None)
        for command in self.commands.values():
            table.add_row(Text("/" + command.name, style="bold"), Text(command.help))
        self.console.print(table)

    async def _tools(self, arg: str) -> None:
        found = find_tools(self.registry.tools, arg) if arg else []
        for public, spec in found:  # in full; a server's own name may match several
            asks = self.agent.approval.needs_approval(spec, public)
            listings.show_tool(self.console, public, spec, asks=asks)
            if self.agent.approval.hidden(spec, public):
                said = "disallowed (--disallowed-tools): never offered to the model, never run"
                self.console.print(Text(said, style="yellow"))
        if found:
            return
        if arg and arg not in self.registry.servers:
            self.console.print(Text(f"no server or tool named {arg!r}", style="yellow"))
            return
        tools, app_only = self.registry.tools, self.registry.app_only
        if not any(s.server == arg or not arg for s in [*tools.values(), *app_only]):
            said = listings.no_tools_said(self.registry.statuses(), arg)
            self.console.print(Text(said, style="yellow"))
            return
        shown: list[listings.Listing] = [lambda c: listings.show_tools(c, tools, arg, app_only)]
        if not arg and len({s.server for s in tools.values()}) > 1:  # else: full, paged
            shown.append(lambda c: listings.show_tool_names(c, tools, app_only))
        await listings.fit_or_page(self.console, *shown)

    async def _servers(self, arg: str) -> None:
        verb, _, name = arg.partition(" ")
        if verb in ("enable", "disable"):
            await self._switch_server(verb, name.strip())
            return
        auth = {name: self.registry.auth_words(name) for name in self.registry.servers}
        problem = self.settings.sandbox_problem
        sandbox = {
            name: runs_under(server.config, problem, short=True)
            for name, server in self.registry.servers.items()
        }
        listings.show_servers(self.console, self.registry.statuses(), auth, sandbox)
        for name, server in self.registry.servers.items():
            roots = server.roots
            offered = ", ".join(str(r) for r in roots) if roots else 'none (its entry\'s "roots")'
            self.console.print(Text(f"roots offered to {name}: {offered}", style="dim"))
        files = ", ".join(self.settings.config_files) or "none (defaults)"
        self.console.print(Text(f"config files read: {files}", style="dim"))

    async def _sandbox(self, arg: str) -> None:
        configs = [server.config for server in self.registry.servers.values()]
        listings.show_sandbox(self.console, configs, self.settings)

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

    async def _resources(self, arg: str) -> None:
        await catalog_commands.list_resources(self.console, self.registry, self.catalog, arg)

    async def _prompts(self, arg: str) -> None:
        await catalog_commands.list_prompts(self.console, self.registry, self.catalog, arg)

    async def _prompt(self, arg: str) -> None:
        memory, question, turn = self.agent.memory, self.question, self.run_turn
        await catalog_commands.run_prompt(self.console, self.catalog, memory, arg, question, turn)

    async def _skills(self, arg: str) -> None:
        await skill_commands.refresh_and_list(self.console, self.skills)

    async def _skill(self, arg: str) -> None:
        await skill_commands.use_skill(self.console, self.skills, arg, self.run_turn)

    async def _model(self, arg: str) -> None:
        if arg:
            self.agent.model.model = arg
        self.console.print(Text(f"model: {self.agent.model.model}"))

    async def _sessions(self, arg: str) -> None:
        if arg.strip() not in ("", "--all"):
            self.console.print(Text("usage: /sessions [--all]", style="yellow"))
            return
        current = self.transcript.session_id if self.transcript is not None else None
        state, here = self.settings.state_dir, self.settings.workspace
        show_sessions(self.console, state, here, arg.strip() == "--all", current)

    async def _compact(self, arg: str) -> None:
        self.renderer.handle(await self.agent.compact(arg.strip()))

    async def _clear(self, arg: str) -> None:
        self.agent.memory.clear()
        if self.transcript is not None:
            self.transcript.mark("clear")
        self.console.print(Text("conversation cleared", style="dim"))

    async def _undo(self, arg: str) -> None:
        await self._restore("undo")

    async def _redo(self, arg: str) -> None:
        await self._restore("redo")

    async def _restore(self, direction: Direction) -> None:
        """/undo, /redo (agent.common.checkpoints): asks before overwriting files changed
        outside the agent since its snapshot."""
        checkpoints = self.agent.checkpoints
        if checkpoints is None:
            self.console.print(Text(f"/{direction}: this session keeps no checkpoints"))
            return
        plan = await checkpoints.plan(direction)
        if isinstance(plan, str):
            self.console.print(Text(plan))
            return
        if plan.conflicts:
            answer = await self.question(checkpoints.question(plan))
            if (answer or "").strip().lower() not in ("y", "yes"):
                self.console.print(Text(f"/{direction}: nothing changed", style="dim"))
                return
        self.console.print(Text(await checkpoints.apply(plan)))

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
        """Keep this session's "always" answers in our own file (agent/config/saved_approvals.py),
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
            print_path(self.console, f"{server} trust += {done}, for", cfg.config_file)
            print_path(self.console, "  kept in", str(path))

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

    async def _exit(self, arg: str) -> bool:
        return True
