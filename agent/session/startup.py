"""Start-up: open everything a session holds, and close it again.

A session is one conversation from start to exit (what `--resume` continues). Opening
one is the same for every front end (agent.cli.front_ends): `prepare_session` (the model
client, hooks, the transcript: what is wrong with the settings shows here) and then
`open_session` (the servers, skills, the catalog, the agent); what differs between the
front ends is given as arguments.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import os
import platform
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import anyio
from rich.console import Console
from rich.text import Text

from agent.auth.login import LoginHost
from agent.common.checkpoints import Checkpoints
from agent.common.errors import ConfigError
from agent.common.memory import Memory, describe_environment
from agent.common.sandbox import remove_placeholders
from agent.common.transcript import Loaded, Transcript, find_session, load
from agent.config.sandbox import unsandboxed_warning
from agent.config.settings import Settings
from agent.extensions.hook_files import HookSet
from agent.extensions.instructions import load_instructions
from agent.extensions.skills import Skills, merged_tools, open_skills
from agent.extensions.telemetry_open import open_telemetry
from agent.loop.approval import ApprovalPolicy, AskFn, ToolRules
from agent.loop.events import Usage
from agent.loop.plan import PLAN_GUIDANCE, Plans, offers_plan
from agent.loop.react import Agent
from agent.loop.tool_offer import AGENT_TOOL_NAMES
from agent.loop.vision import vision_mode
from agent.model.llm import DEFAULT_MAX_TOKENS, OpenAIModel, warm_model_imports
from agent.model.local import describe_ports, find_local_server, foreign_ports
from agent.model.prices import PriceTable
from agent.session.hooks import read_hooks, session_hooks, start_session
from agent.session.subagent_setup import open_subagents, warn_definitions
from agent.tools.base import ServerStatus
from agent.tools.catalog import Catalog
from agent.tools.prestart import Prestarts
from agent.tools.registry import ToolRegistry
from agent.tools.search import SearchBudget, ToolSearch, default_budget_tokens
from agent.tools.server_requests import ServerRequests
from agent.tools.stored import ResultStore
from agent.ui import custom_commands
from agent.ui.output import server_states
from agent.ui.render import NORMAL, QUIET, VERBOSE
from agent.ui.safe import SafeConsole, clean

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
        on_slow_start=None if settings.ui.quiet else functools.partial(_say_slow_start, stderr),
    ) as registry:
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
        down = {name for name, s in registry.servers.items() if s.status.state != "ready"}
        rules = ToolRules.of(settings.agent.allowed_tools)
        unmatched = rules.unmatched(registry.tools, AGENT_TOOL_NAMES, down)
        for warning in [*registry.warnings, *unmatched]:
            stderr.print(f"warning: {warning}", markup=False, highlight=False, style="yellow")
        yield registry


SCRIPT_CANNOT_ANSWER = "a single-shot run cannot answer (run it with -i at a terminal)"


def say_declined(
    stderr: Console,
    redact: Callable[[str], str],
    server: str,
    asked: str,
    why: str = SCRIPT_CANNOT_ANSWER,
) -> None:
    """A form nobody can answer was declined: say so, and why (`why`: the front end's
    own reason: a single-shot run's, serve's, acp's)."""
    shown = clean(redact(asked))[:200]
    stderr.print(
        f"server '{server}' asks you to fill in a form — declined: {why}; it asked: {shown}",
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
        meta["cwd"] = str(settings.workspace)  # `--resume` continues this folder's sessions
        return Loaded(Transcript.create(settings.state_dir, meta, redactor), [], [])
    # Read back what a request can carry (twice the window: trimming picks), not the file.
    window = settings.llm.context_window
    path = find_session(settings.state_dir, resume, settings.workspace)
    loaded = load(path, redactor, max_tokens=2 * window)
    for warning in loaded.warnings:
        stderr.print(f"warning: {warning}", markup=False, highlight=False, style="yellow")
    if not settings.ui.quiet:
        count = len(loaded.messages)
        said = f"resumed session {loaded.transcript.session_id} ({count} messages)"
        stderr.print(Text(said, style="dim"))
    return loaded


def environment(registry: ToolRegistry) -> str:
    """The system prompt's lines on where we run: today, the session's folder (its
    workspace: an ACP session's cwd, not the process's), OS, shell, servers."""
    system = {"Darwin": "macOS"}.get(platform.system(), platform.system())
    shell = os.environ.get("SHELL") or os.environ.get("COMSPEC") or ""
    ready = [s.name for s in registry.statuses() if s.state == "ready"]
    return describe_environment(
        datetime.date.today(),
        str(registry.settings.workspace),
        f"{system} ({platform.machine()})",
        os.path.basename(shell),
        ready,
    )


def build_agent(
    settings: Settings,
    registry: ToolRegistry,
    model: OpenAIModel,
    ask: AskFn | None,
    saved: Loaded,
    catalog: Catalog | None = None,
    skills: Skills | None = None,
    hookset: HookSet | None = None,
) -> Agent:
    files = load_instructions(settings, os.environ)  # AGENTS.md: the user's, a trusted project's
    plans = Plans.resumed(saved.messages)
    planning = offers_plan(settings.agent.plan, settings.llm.context_window)
    memory = Memory.with_instructions(
        settings.agent.system_prompt,
        registry.instructions(),
        environment(registry),
        files.text,
        guidance=PLAN_GUIDANCE if planning else "",
    )
    memory.files = files.files
    memory.messages.extend(saved.messages)
    memory.sink = saved.transcript.append
    memory.marker = saved.transcript.mark
    for call_id in memory.pending_call_ids():  # a session killed mid-step
        memory.add_tool_result(call_id, "Error: interrupted before it finished")
    rules = ToolRules.of(settings.agent.allowed_tools, settings.agent.disallowed_tools)
    subagents = open_subagents(  # task: sub-agents on this session's connections
        settings, registry, environment(registry), lambda: tool_search(settings)
    )
    approval = ApprovalPolicy(
        mode=settings.ui.approval, ask=ask, trusted=settings.trusts, rules=rules
    )
    agent = Agent(
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
            *([plans.agent_tools] if planning else []),
            *([subagents.agent_tools] if subagents is not None else []),
        ),
        tool_search=tool_search(settings, skills.search if skills is not None else None),
        vision=vision_mode(settings.llm.vision),
        tool_calls=settings.llm.tool_calls,
        compact_at=settings.agent.compact_at,
        results=ResultStore(saved.transcript.path.with_suffix(".results"), registry.redact),
        hooks=session_hooks(hookset or HookSet(), settings, approval, saved),
        price=pricing(settings, model),
        telemetry=open_telemetry(
            os.environ,
            registry.redact,
            endpoint=settings.telemetry.endpoint,
            capture_content=settings.telemetry.capture_content,
        ),
        image_store=saved.transcript.images,
        checkpoints=checkpoints(settings, registry, saved),
    )
    if subagents is not None:
        subagents.attach(agent)
    return agent


def checkpoints(settings: Settings, registry: ToolRegistry, saved: Loaded) -> Checkpoints:
    """The session's snapshots for /undo, beside its transcript (`<id>.checkpoints/`, so a
    resume finds them); a call to a server that is not a local process is remote."""

    def is_remote(server: str) -> bool:
        found = registry.servers.get(server)
        return found is not None and found.config.type != "stdio"

    return Checkpoints(
        saved.transcript.path.with_suffix(".checkpoints"),
        settings.workspace,
        redact=registry.redact,
        is_remote=is_remote,
        # The sandbox's stand-ins for protected names are not the user's files.
        exclude=(settings.state_dir, *(Path(p) for p in settings.sandbox_placeholders)),
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
    """The skills of this session (agent.extensions.skills); what is wrong with one is a warning."""
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
class Prepared:
    """The first half of opening a session, done before anything runs: what is wrong with
    the settings (no API key, no session to resume) ends the process here, with nothing
    to report yet."""

    settings: Settings  # with a local model server found, when none was configured
    model: OpenAIModel
    hookset: HookSet
    saved: Loaded  # the transcript, and what a resume read back from it
    resumed: bool


def prepare_session(
    settings: Settings, stderr: Console, resume: str | None, notices: Console
) -> Prepared:
    """`notices`: where 'resumed session …' goes (the REPL's screen, or stderr)."""
    settings = with_local_server(settings, stderr)
    if settings.sandbox_problem is not None:  # one line; the run goes on unsandboxed
        said = f"warning: {unsandboxed_warning(settings.sandbox_problem)}"
        stderr.print(said, markup=False, highlight=False, style="yellow")
    model = make_model(settings)
    hookset = read_hooks(settings, stderr)
    saved = open_transcript(settings, resume, notices)
    return Prepared(settings, model, hookset, saved, resumed=resume is not None)


@dataclass
class Session:
    """Everything one session holds while its front end runs (opened by `open_session`)."""

    settings: Settings
    model: OpenAIModel
    saved: Loaded
    requests: ServerRequests  # what servers ask of us: sampling, elicitation, roots
    registry: ToolRegistry
    skills: Skills
    catalog: Catalog
    agent: Agent
    request: str | None  # a single-shot run's request, its @refs read
    hookset: HookSet | None = None  # the user's hooks, for each new conversation

    @contextlib.asynccontextmanager
    async def conversation(self, stderr: Console) -> AsyncIterator[tuple[Agent, str]]:
        """A conversation of its own (a batch row) on this session's servers, skills and
        catalog: a new transcript, a new agent built as the session's was (approval from
        the settings, SessionStart hooks run), and its session ID; its transcript is
        closed when it ends."""
        saved = open_transcript(self.settings, None, stderr)
        agent: Agent | None = None
        try:
            agent = build_agent(
                self.settings,
                self.registry,
                self.model,
                None,
                saved,
                self.catalog,
                self.skills,
                self.hookset,
            )
            await start_session(agent, False, stderr)
            yield agent, saved.transcript.session_id
        finally:
            if agent is not None:
                agent.telemetry.flush()
            saved.transcript.close()


class Unavailable(Exception):
    """A single-shot run cannot go on as if it had its tools (see `unavailable`)."""

    def __init__(self, problem: str, servers: list[dict[str, Any]]) -> None:
        super().__init__(problem)
        self.problem = problem
        self.servers = servers


@contextlib.asynccontextmanager
async def open_session(
    prepared: Prepared,
    stderr: Console,
    *,
    notices: Console,
    prestarts: Prestarts | None,
    login: LoginHost | None = None,
    apps: bool = False,
    request: str | None = None,
    on_declined: Callable[[str, str], None] | None = None,
    on_log: Callable[[str, str], None] | None = None,
    script: bool = False,
) -> AsyncIterator[Session]:
    """Connect the servers, then skills, the catalog and the agent (SessionStart hooks
    run); everything is closed here, in the task that opened it, however the front end
    ends: telemetry flushed, servers stopped, the model client and the transcript closed.

    `request`: a single-shot run's; a required server that failed (or all of them) then
    raises Unavailable. `login`: how a server that needs a login may ask a person (None
    never asks); `apps`: the front end shows MCP Apps' pages; `on_log`: MCP log lines (-v);
    `script`: a program drives the session (stream-json, the API, a batch) and, like a
    single-shot run, must not go on without its required servers.
    """
    settings, model, saved = prepared.settings, prepared.model, prepared.saved
    agent: Agent | None = None
    try:
        requests = ServerRequests(
            model,
            auto_approve=settings.ui.approval == "yes",
            max_prompt_tokens=settings.llm.sampling_max_prompt_tokens,
            on_declined=on_declined,
        )
        single_shot = request is not None or script
        async with connected(
            settings,
            stderr,
            requests,
            prestarts=prestarts,
            login=login,
            apps=apps,
            single_shot=single_shot,
        ) as registry:
            if single_shot and (problem := unavailable(registry)) is not None:
                raise Unavailable(problem, server_states(registry))
            if settings.ui.verbose and on_log is not None:
                registry.log_listener = on_log
            skills = await load_skills(settings, registry, stderr)
            warn_definitions(settings, registry, stderr)
            custom_commands.warn(settings, stderr, registry.redact)
            catalog = await open_catalog(registry, stderr, skills)
            if request is not None:
                request = await expand_refs(catalog, request, stderr)
            agent = build_agent(
                settings, registry, model, None, saved, catalog, skills, prepared.hookset
            )
            requests.on_sampled = sampling_reporter(agent, notices, settings)
            await start_session(agent, prepared.resumed, stderr)
            yield Session(
                settings,
                model,
                saved,
                requests,
                registry,
                skills,
                catalog,
                agent,
                request,
                prepared.hookset,
            )
    finally:
        if agent is not None:  # once the servers closed: the loop's last spans have ended
            agent.telemetry.flush()  # the process ends soon: spans out first
        remove_placeholders(settings.sandbox_placeholders)  # no sandbox of ours runs now
        await model.aclose()
        saved.transcript.close()


def open_script_session(
    prepared: Prepared,
    stderr: SafeConsole,
    prestarts: Prestarts | None = None,
    cannot_answer: str = SCRIPT_CANNOT_ANSWER,
) -> contextlib.AbstractAsyncContextManager[Session]:
    """A session no person answers at a terminal (stream-json, the API, batch, serve, acp):
    its notices, and the questions servers asked that nobody could answer, go to stderr,
    masked with stderr's own redactor; `cannot_answer` says why, for that front end."""
    return open_session(
        prepared,
        stderr,
        notices=stderr,
        prestarts=prestarts,
        script=True,
        on_declined=functools.partial(say_declined, stderr, stderr.redact, why=cannot_answer),
    )


async def expand_refs(catalog: Catalog, request: str, stderr: Console) -> str:
    """The request with its `@server:uri` references read; what could not be read is said."""
    request, problems = await catalog.expand_refs(request)
    redact = catalog.registry.redact
    for problem in problems:
        stderr.print(f"warning: {redact(problem)}", markup=False, highlight=False, style="yellow")
    return request
