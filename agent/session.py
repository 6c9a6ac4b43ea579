"""Wiring for one process: model + registry + memory + agent, then a front end.

Single-shot: stdout holds only the answer (or one JSON object); everything else goes to
stderr. The REPL lives in agent.ui.repl and is given the same pieces.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import os
import platform
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import anyio
from rich.console import Console
from rich.text import Text

from agent.approval import ApprovalPolicy, AskFn
from agent.auth.login import LoginHost
from agent.catalog import Catalog
from agent.config import Settings
from agent.errors import ConfigError
from agent.events import (
    Event,
    RunFinished,
    StepStarted,
    TaskUpdate,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from agent.hook_files import HookSet
from agent.llm import DEFAULT_MAX_TOKENS, OpenAIModel, warm_model_imports
from agent.local import describe_ports, find_local_server, foreign_ports
from agent.memory import Memory, describe_environment
from agent.prices import PriceTable
from agent.react import AGENT_TOOL_NAMES, Agent
from agent.server_requests import ServerRequests
from agent.session_hooks import read_hooks, session_hooks, start_session
from agent.signals import ended_by_signals
from agent.skills import Skills, merged_tools, open_skills
from agent.telemetry_open import open_telemetry
from agent.text import valid_unicode
from agent.tools.base import ServerStatus
from agent.tools.prestart import Prestarts
from agent.tools.registry import ToolRegistry
from agent.tools.results import strip_marker
from agent.tools.search import SearchBudget, ToolSearch, default_budget_tokens
from agent.tools.stored import ResultStore
from agent.transcript import Loaded, Transcript, find_session, load
from agent.ui.inline_image import inline_protocol
from agent.ui.render import NORMAL, QUIET, VERBOSE, EventRenderer, LogLines
from agent.ui.safe import SafeConsole, clean, json_text, markdown
from agent.vision import vision_mode

if TYPE_CHECKING:
    from agent.apps.host import AppHost

EXIT_CODES = {"answered": 0, "error": 1, "max_steps": 3, "cancelled": 130}
CUT_SHORT = "cancelled by the user before it finished"
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


def with_local_server(settings: Settings, stderr: Console) -> Settings:
    """With no API key and no base URL, a model server on this machine if one answers
    (its first model unless one was configured); otherwise the settings as they are."""
    llm = settings.llm
    if llm.api_key or llm.base_url:
        return settings
    foreign = foreign_ports(llm.local_ports)  # another user's listener gets no prompt
    for port, uid in foreign.items():
        stderr.print(
            Text(
                f"warning: port {port} is listened on by another user (uid {uid}): not used "
                f"as the model; pass --base-url http://127.0.0.1:{port}/v1 to use it anyway",
                style="yellow",
            )
        )
    found = find_local_server(tuple(p for p in llm.local_ports if p not in foreign))
    if found is None:
        return settings
    update: dict[str, Any] = {"base_url": found.base_url}
    if "model" not in llm.model_fields_set and found.models:
        update["model"] = found.models[0]
    llm = llm.model_copy(update=update)
    if not settings.ui.quiet:
        stderr.print(
            Text(
                f"no API key or base URL set: using {found.name} at {found.base_url} "
                f"(model '{llm.model}'); [llm] local_ports = [] never looks",
                style="dim",
            )
        )
    return settings.model_copy(update={"llm": llm})


def make_model(settings: Settings) -> OpenAIModel:
    """The model client; a missing key is a config error unless the endpoint is local."""
    llm = settings.llm
    key = llm.api_key
    if not key:
        host = urlparse(llm.base_url or "").hostname
        if host not in LOCAL_HOSTS:
            looked = (
                f"; no local server answered on {describe_ports(llm.local_ports)}"
                if llm.local_ports and not llm.base_url
                else ""
            )
            raise ConfigError(
                "no API key: set OPENAI_API_KEY (or api_key in [llm] of config/config.toml), "
                "or run a local server (Ollama, llama.cpp, LM Studio, vLLM) and pass "
                f"--base-url http://localhost:PORT/v1{looked}"
            )
        key = "not-needed"
    return OpenAIModel(
        base_url=llm.base_url,
        api_key=key,
        model=llm.model,
        temperature=llm.temperature,
        max_tokens=llm.max_tokens or DEFAULT_MAX_TOKENS,
        request_timeout=llm.request_timeout,
        request_deadline=llm.request_deadline,
        stream=llm.stream,
    )


def verbosity(settings: Settings) -> int:
    if settings.ui.quiet:
        return QUIET
    return VERBOSE if settings.ui.verbose else NORMAL


@contextlib.asynccontextmanager
async def connected(
    settings: Settings,
    stderr: Console,
    requests: ServerRequests | None = None,
    prestarts: Prestarts | None = None,
    login: LoginHost | None = None,
    apps: bool = False,
    single_shot: bool = False,
) -> AsyncIterator[ToolRegistry]:
    """Connect every server; report failures by name and carry on with the rest.

    `login`: how a server that needs a login may ask a person; None (scripts) never asks.
    """
    callbacks = requests.callbacks if requests is not None else None
    if settings.ui.verbose:  # -v: which files these settings came from
        files = ", ".join(settings.config_files) or "none (defaults)"
        stderr.print(f"config files read: {files}", markup=False, highlight=False, style="dim")
    async with ToolRegistry(
        settings,
        reserved_names=AGENT_TOOL_NAMES,
        callbacks=callbacks,
        prestarts=prestarts,
        login=login,
        apps=apps,
    ) as registry:
        if not settings.ui.quiet:
            registry.start_listener = functools.partial(_say_slow_start, stderr)
        with _connecting(stderr, settings):
            async with anyio.create_task_group() as tg:
                # The model client's imports (~0.35 s) load in a thread while servers start.
                tg.start_soon(anyio.to_thread.run_sync, warm_model_imports)
                failures = await registry.connect_all()
        # A single-shot run that cannot go on says why in its one error line, once.
        said_by_the_error = single_shot and unavailable(registry) is not None
        for failure in failures if not said_by_the_error else ():
            log = registry.servers[failure.server].status.log_path
            hint = f" (log: {log})" if log and failure.step == "connect" else ""
            stderr.print(f"warning: {failure}{hint}", markup=False, highlight=False, style="yellow")
        for warning in registry.warnings:
            stderr.print(f"warning: {warning}", markup=False, highlight=False, style="yellow")
        yield registry


def _say_declined(stderr: Console, redact: Callable[[str], str], server: str, asked: str) -> None:
    """A form a script cannot answer was declined: say so, as the REPL would show it."""
    shown = clean(redact(asked))[:200]
    stderr.print(
        f"server '{server}' asks you to fill in a form — declined: a single-shot run cannot "
        f"answer (run it with -i at a terminal); it asked: {shown}",
        markup=False,
        highlight=False,
        style="yellow",
    )


def _say_slow_start(stderr: Console, message: str) -> None:
    stderr.print(message, markup=False, highlight=False, style="dim")


def unavailable(registry: ToolRegistry) -> str | None:
    """Why a run cannot go on as if it had its tools: a required server (one named on the
    command line, or `required: true`) failed to connect, or every server did. A script
    must not pass with no tools, so a single-shot run then ends with status error."""
    failed = [s for s in registry.servers.values() if s.status.state in ("failed", "down")]
    required = [s for s in failed if s.config.required]
    if required:
        server = required[0]
        return f"server '{server.name}' is unavailable: {_cause(server.status)}"
    if failed and len(failed) == len(registry.servers):
        return "no tool server is available: " + "; ".join(
            f"'{s.name}': {_cause(s.status)}" for s in failed
        )
    return None


def _cause(status: ServerStatus) -> str:
    """A connect error as the run's one error line says it: with the server's last
    stderr lines and where its log is (no warning line repeats it)."""
    cause = status.error or "unknown"
    return f"{cause} (log: {status.log_path})" if status.log_path else cause


def server_states(registry: ToolRegistry) -> list[dict[str, Any]]:
    """Each server's state for --output json (a script can tell which one failed)."""
    return [{"name": s.name, "state": s.state, "error": s.error} for s in registry.statuses()]


def _connecting(console: Console, settings: Settings) -> contextlib.AbstractContextManager[Any]:
    """A spinner on a terminal while servers start (npx-style servers can take seconds)."""
    if settings.ui.quiet or not console.is_terminal or console.is_dumb_terminal:
        return contextlib.nullcontext()
    names = ", ".join(s.name for s in settings.servers)
    return console.status(Text(f"connecting to {names}…", style="dim"), spinner="dots")


def open_transcript(settings: Settings, resume: str | None, stderr: Console) -> Loaded:
    """A new session file, or the resumed one with its messages; secrets never reach it."""
    redactor = settings.redactor(os.environ)
    if resume is None:
        meta = {"model": settings.llm.model, "servers": [s.name for s in settings.servers]}
        return Loaded(Transcript.create(settings.state_dir, meta, redactor), [], [])
    # Read back what a request can carry (twice the window: trimming picks), not the file.
    window = settings.llm.context_window
    loaded = load(find_session(settings.state_dir, resume), redactor, max_tokens=2 * window)
    for warning in loaded.warnings:
        stderr.print(f"warning: {warning}", markup=False, highlight=False, style="yellow")
    if not settings.ui.quiet:
        count = len(loaded.messages)
        said = f"resumed session {loaded.transcript.session_id} ({count} messages)"
        stderr.print(Text(said, style="dim"))
    return loaded


def environment(registry: ToolRegistry) -> str:
    """The system prompt's lines on where we run: today, this folder, OS, shell, servers."""
    system = {"Darwin": "macOS"}.get(platform.system(), platform.system())
    shell = os.environ.get("SHELL") or os.environ.get("COMSPEC") or ""
    ready = [s.name for s in registry.statuses() if s.state == "ready"]
    return describe_environment(
        datetime.date.today(),
        os.getcwd(),
        f"{system} ({platform.machine()})",
        os.path.basename(shell),
        ready,
    )


def build_agent(
    settings: Settings,
    registry: ToolRegistry,
    model: OpenAIModel,
    ask: AskFn | None,
    session: Loaded,
    catalog: Catalog | None = None,
    skills: Skills | None = None,
    hookset: HookSet | None = None,
) -> Agent:
    memory = Memory.with_instructions(
        settings.agent.system_prompt, registry.instructions(), environment(registry)
    )
    memory.messages.extend(session.messages)
    memory.sink = session.transcript.append
    memory.marker = session.transcript.mark
    for call_id in memory.pending_call_ids():  # a session killed mid-step
        memory.add_tool_result(call_id, "Error: interrupted before it finished")
    approval = ApprovalPolicy(mode=settings.ui.approval, ask=ask, trusted=settings.trusts)
    return Agent(
        model,
        registry,
        memory,
        max_steps=settings.agent.max_steps,
        context_window=settings.llm.context_window,
        reserve_tokens=settings.llm.max_tokens or DEFAULT_MAX_TOKENS,
        approval=approval,
        agent_tools=merged_tools(
            *([catalog.agent_tools] if catalog is not None else []),
            *([skills.agent_tools] if skills is not None else []),
        ),
        tool_search=tool_search(settings, skills.search if skills is not None else None),
        vision=vision_mode(settings.llm.vision),
        tool_calls=settings.llm.tool_calls,
        compact_at=settings.agent.compact_at,
        results=ResultStore(session.transcript.path.with_suffix(".results"), registry.redact),
        hooks=session_hooks(hookset or HookSet(), settings, approval, session),
        price=pricing(settings, model),
        telemetry=open_telemetry(
            os.environ,
            registry.redact,
            endpoint=settings.telemetry.endpoint,
            capture_content=settings.telemetry.capture_content,
        ),
        image_store=session.transcript.images,
    )


def pricing(settings: Settings, model: OpenAIModel) -> Callable[[Usage], Usage]:
    """Each request priced by the model it went to (/model may change it mid-session)."""
    table = PriceTable(settings.llm.prices)
    return lambda usage: table.priced(model.model, usage)


def tool_search(
    settings: Settings, more: Callable[[str, int], list[str]] | None = None
) -> ToolSearch | None:
    """The session's tool search, from `[agent] tool_search` and its budget."""
    agent = settings.agent
    if agent.tool_search == "off":
        return None
    tokens = agent.tool_search_tokens or default_budget_tokens(settings.llm.context_window)
    budget = SearchBudget(agent.tool_search, tokens, agent.tool_search_tools, agent.pinned_tools)
    return ToolSearch(budget, more)


def sampling_reporter(
    agent: Agent, console: Console, settings: Settings
) -> Callable[[str, Usage], None]:
    """Each sampling request a server had our model answer: counted with the run, and shown
    (the user pays for those tokens too)."""

    def report(server: str, usage: Usage) -> None:
        agent.count_usage(usage)
        if not settings.ui.quiet:
            tokens = usage.shown(usage.prompt_tokens + usage.completion_tokens)
            line = f"server '{server}' had the model answer a sampling request ({tokens} tokens)"
            console.print(Text(line, style="dim"))

    return report


async def load_skills(settings: Settings, registry: ToolRegistry, stderr: Console) -> Skills:
    """The skills of this session (agent.skills); what is wrong with one is a warning."""
    skills, warnings = await open_skills(settings, registry, os.environ)
    for warning in warnings:
        stderr.print(
            f"warning: {registry.redact(warning)}", markup=False, highlight=False, style="yellow"
        )
    return skills


async def open_catalog(
    registry: ToolRegistry, stderr: Console, skills: Skills | None = None
) -> Catalog:
    catalog = Catalog(registry, skill_reader=skills.route_read if skills is not None else None)
    await catalog.refresh()
    redact = registry.settings.redactor(os.environ)
    for server, error in catalog.errors.items():
        stderr.print(
            f"warning: server '{server}': listing resources/prompts failed: {redact(error)}",
            markup=False,
            highlight=False,
            style="yellow",
        )
    return catalog


@dataclass
class RunRecord:
    """What a single-shot run reports in --output json, even when it is cut short."""

    finished: RunFinished | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    servers: list[dict[str, Any]] = field(default_factory=list)
    _slots: dict[str, int] = field(default_factory=dict)
    _started: dict[str, float] = field(default_factory=dict)  # unfinished calls: start time
    _tasks: dict[str, dict[str, str]] = field(default_factory=dict)  # calls run as tasks

    def add(self, event: Event) -> None:
        if isinstance(event, StepStarted):
            self.steps = event.step
        elif isinstance(event, ToolCallStarted):  # a slot in call order; filled when it ends
            self._slots[event.call_id] = len(self.tool_calls)
            self._started[event.call_id] = time.perf_counter()
            self.tool_calls.append(self._entry(event, CUT_SHORT, True, 0.0))
        elif isinstance(event, ToolCallFinished):
            slot = self._slots.pop(event.call_id, None)
            self._started.pop(event.call_id, None)
            if slot is None:
                slot = len(self.tool_calls)
                self.tool_calls.append({})
            output = strip_marker(event.output)
            self.tool_calls[slot] = self._entry(event, output, event.is_error, event.duration_ms)
            if event.structured is not None:  # the model may have had the text only
                self.tool_calls[slot]["structured_content"] = event.structured
            if event.images:
                self.tool_calls[slot]["images"] = [
                    {"mime": i.mime_type, "bytes": i.bytes, "path": i.path} for i in event.images
                ]
            if (task := self._tasks.pop(event.call_id, None)) is not None:
                self.tool_calls[slot]["task"] = task
        elif isinstance(event, TaskUpdate):  # the call runs as a task: its id, last status
            self._tasks[event.call_id] = {"id": event.task_id, "status": event.status}
            if (slot := self._slots.get(event.call_id)) is not None:
                self.tool_calls[slot]["task"] = self._tasks[event.call_id]
        elif isinstance(event, RunFinished):
            self.finished = event

    @staticmethod
    def _entry(
        event: ToolCallStarted | ToolCallFinished, output: str, is_error: bool, ms: float
    ) -> dict[str, Any]:
        return {
            "server": event.server or None,
            "tool": event.tool,
            "name": event.name,
            "arguments": event.arguments,
            "is_error": is_error,
            "output": output,
            "duration_ms": round(ms, 1),
        }

    def to_json(
        self, usage_so_far: Usage | None = None, session: Usage | None = None
    ) -> dict[str, Any]:
        """`usage_so_far` (the agent's count) stands in when the run was cut short;
        `session`: the session's usage (the turn's is the run's)."""
        done = self.finished or RunFinished(
            "cancelled", None, self.steps, usage_so_far or Usage(), "interrupted"
        )
        for call_id, at in self._started.items():  # cut short: how long it ran
            self.tool_calls[self._slots[call_id]]["duration_ms"] = round(
                (time.perf_counter() - at) * 1000, 1
            )
        return {
            "answer": done.answer,
            "status": done.status,
            "steps": done.steps,
            "tool_calls": self.tool_calls,
            "usage": {
                **usage_json(done.usage),
                **({"session": usage_json(session)} if session is not None else {}),
            },
            "error": done.error,
            "servers": self.servers,
        }


def usage_json(usage: Usage) -> dict[str, Any]:
    """Token counts (null: the server reported none, as many local servers do) and the
    cost in US dollars, or "unknown" (no price for the model, or no counts): never 0."""
    known = usage.known
    return {
        "prompt_tokens": usage.prompt_tokens if known else None,
        "completion_tokens": usage.completion_tokens if known else None,
        "cached_tokens": usage.cached_tokens if known else None,
        "cost_usd": round(usage.cost_usd, 6) if usage.cost_known else "unknown",
    }


def print_answer(answer: str) -> None:
    """Rendered on a terminal; as written (no wrapping, no markup) into pipes and files, but
    with control and invisible characters shown (`| cat` must not retitle the terminal)."""
    if sys.stdout.isatty():
        SafeConsole().print(markdown(answer))
    else:
        answer = clean(answer)
        sys.stdout.write(answer if answer.endswith("\n") else answer + "\n")
        sys.stdout.flush()


async def _single(
    settings: Settings, request: str, output: str, resume: str | None, prestarts: Prestarts | None
) -> int:
    stderr = SafeConsole(stderr=True)
    settings = with_local_server(settings, stderr)
    redact = settings.redactor(os.environ)
    model = make_model(settings)
    hookset = read_hooks(settings, stderr)
    session = open_transcript(settings, resume, stderr)
    record = RunRecord()
    agent: Agent | None = None
    renderer = EventRenderer(
        stderr, verbosity=verbosity(settings), stream_answer=False, redact=redact
    )
    reported = False

    def report() -> None:
        """The answer (or the JSON object) out and flushed, once: as soon as the run ends,
        before the servers close, so closing them is not the caller's wait."""
        nonlocal reported
        if reported:
            return
        reported = True
        renderer.close()
        if output == "json":
            so_far = agent.run_usage if agent is not None else None
            session_usage = agent.session_usage if agent is not None else None
            line = json.dumps(
                redact.deep(record.to_json(so_far, session_usage)), ensure_ascii=False
            )
            print(json_text(valid_unicode(line)), flush=True)
        elif record.finished is not None and record.finished.answer is not None:
            print_answer(redact(record.finished.answer))

    try:
        requests = ServerRequests(
            model,
            auto_approve=settings.ui.approval == "yes",
            max_prompt_tokens=settings.llm.sampling_max_prompt_tokens,
            on_declined=functools.partial(_say_declined, stderr, settings.redactor(os.environ)),
        )
        async with connected(
            settings, stderr, requests, prestarts=prestarts, single_shot=True
        ) as registry:
            record.servers = server_states(registry)
            if (problem := unavailable(registry)) is not None:
                refused = RunFinished("error", None, 0, Usage(), problem)
                record.add(refused)
                renderer.handle(refused)
                return EXIT_CODES["error"]
            logs = LogLines(stderr)
            if settings.ui.verbose:
                registry.log_listener = logs.add
            skills = await load_skills(settings, registry, stderr)
            catalog = await open_catalog(registry, stderr, skills)
            request, problems = await catalog.expand_refs(request)
            for problem in problems:
                stderr.print(
                    f"warning: {redact(problem)}", markup=False, highlight=False, style="yellow"
                )
            agent = build_agent(settings, registry, model, None, session, catalog, skills, hookset)
            requests.on_sampled = sampling_reporter(agent, stderr, settings)
            await start_session(agent, resume is not None, stderr)
            async for event in agent.run(request):
                record.add(event)
                renderer.handle(event)
            logs.flush()
            record.servers = server_states(registry)
            report()
            registry.hasten_shutdown()  # the process ends next: servers get a short grace
    finally:
        report()
        if agent is not None:
            agent.telemetry.flush()  # the process ends next: spans out first
        await model.aclose()
        session.transcript.close()
    done = record.finished
    assert done is not None
    return EXIT_CODES[done.status]


def run_single(
    settings: Settings,
    request: str,
    *,
    output: str,
    resume: str | None,
    prestarts: Prestarts | None = None,
) -> int:
    """One request; `prestarts` are its stdio servers, started before the imports."""
    return anyio.run(ended_by_signals, _single, settings, request, output, resume, prestarts)


async def _repl(settings: Settings, resume: str | None, prestarts: Prestarts | None = None) -> int:
    """Build the pieces and hand them to the REPL (the front end never builds them itself).

    Input from a pipe: each line a turn, no prompt-toolkit; stdout holds the answers and
    command output only, the trace and status lines go to stderr, questions are not asked.
    """
    from prompt_toolkit.history import FileHistory, InMemoryHistory  # only the REPL needs them

    from agent.ui.input import (
        PipedLines,
        ReplCompleter,
        history_file,
        prompt_session,
        typeahead_unechoed,
    )
    from agent.ui.login_host import terminal_host
    from agent.ui.repl import Repl

    console, stderr = SafeConsole(), SafeConsole(stderr=True)
    piped = not sys.stdin.isatty()
    settings = with_local_server(settings, stderr)
    model = make_model(settings)
    hookset = read_hooks(settings, stderr)
    loaded = open_transcript(settings, resume, stderr if piped else console)
    if piped:
        session: Any = PipedLines(sys.stdin)
    else:
        try:
            history: FileHistory | InMemoryHistory = FileHistory(str(history_file(settings)))
        except OSError:
            history = InMemoryHistory()
        session = prompt_session(history)
    try:
        requests = ServerRequests(
            model,
            auto_approve=settings.ui.approval == "yes",
            max_prompt_tokens=settings.llm.sampling_max_prompt_tokens,
        )
        login = None if piped else terminal_host(stderr, paste=False)
        async with connected(
            settings,
            stderr,
            requests,
            prestarts=prestarts,
            login=login,
            apps=True,  # the REPL hosts MCP Apps' pages: declare the extension
        ) as registry:
            renderer = EventRenderer(
                stderr if piped else console,
                verbosity=verbosity(settings),
                stream_answer=not piped,
                redact=registry.redact,
                inline_images=None if piped else inline_protocol(os.environ, console.is_terminal),
            )
            skills = await load_skills(settings, registry, stderr)
            catalog = await open_catalog(registry, stderr, skills)
            agent = build_agent(settings, registry, model, None, loaded, catalog, skills, hookset)
            requests.on_sampled = sampling_reporter(agent, renderer.console, settings)
            await start_session(agent, resume is not None, stderr)
            # Pages are torn down before the servers close (ui/resource-teardown first).
            async with app_host(settings, registry, agent, catalog) as apps:
                repl = Repl(
                    console,
                    session,
                    agent,
                    registry,
                    settings,
                    renderer,
                    loaded.transcript,
                    catalog,
                    skills,
                    apps,
                )
                apps.ui = repl
                if not piped:  # piped: ask-mode calls are refused, as in a single-shot run
                    agent.approval.ask = repl.ask
                if settings.ui.verbose:
                    registry.log_listener = repl.server_log
                requests.ui = repl
                repl.on_cancel = requests.cancel_in_flight
                if piped:
                    repl.status, repl.can_ask, repl.on_answer = stderr, False, print_answer
                else:
                    session.completer = ReplCompleter(repl)
                try:
                    with typeahead_unechoed(sys.stdin):  # drawn once, by the prompt
                        return await repl.loop()
                finally:
                    agent.telemetry.flush()
    finally:
        await model.aclose()
        loaded.transcript.close()


def app_host(settings: Settings, registry: ToolRegistry, agent: Agent, catalog: Catalog) -> AppHost:
    """The REPL's host for MCP Apps' pages: opens them in a browser when one can show up
    ($BROWSER, a display) unless `--no-browser`; otherwise it prints their URLs."""
    from agent.apps.host import AppHost
    from agent.auth.login import may_open_browser, open_browser

    browse = settings.ui.browser and may_open_browser()
    opener = open_browser if browse else None
    return AppHost(registry, agent.approval, browser=opener, catalog=catalog)


def run_repl(settings: Settings, *, resume: str | None, prestarts: Prestarts | None = None) -> int:
    return anyio.run(ended_by_signals, _repl, settings, resume, prestarts)
