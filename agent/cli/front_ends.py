"""The front ends: a single-shot run and the REPL, each built by one constructor on a
session agent.session.startup opened.

The single-shot run's stdout is agent.ui.output's; the REPL is agent.ui.repl, whose imports
(prompt-toolkit) load only when it runs. agent.cli.main calls `run_single` or `run_repl`.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Any, Literal

import anyio
from rich.console import Console

from agent.common.signals import ended_by_signals
from agent.config.settings import Settings
from agent.loop.events import RunFinished, Usage
from agent.loop.react import Agent
from agent.session.startup import (
    Session,
    Unavailable,
    open_session,
    prepare_session,
    say_declined,
    verbosity,
)
from agent.tools.prestart import Prestarts
from agent.ui import custom_commands
from agent.ui.inline_image import inline_protocol
from agent.ui.output import SingleShotOutput, print_answer, server_states
from agent.ui.render import EventRenderer, LogLines
from agent.ui.safe import SafeConsole

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from agent.apps.host import AppHost
    from agent.ui.repl import Repl


# -- single-shot: one request, the answer (or one JSON object) on stdout ----------------


async def _single(
    settings: Settings,
    request: str,
    output: Literal["text", "json"],
    resume: str | None,
    prestarts: Prestarts | None,
) -> int:
    redact = settings.redactor(os.environ)
    stderr = SafeConsole(stderr=True, redact=redact)
    prepared = prepare_session(settings, stderr, resume, stderr)
    renderer = EventRenderer(
        stderr, verbosity=verbosity(settings), stream_answer=False, redact=redact
    )
    out = SingleShotOutput(renderer, redact, output)
    logs = LogLines(stderr)
    agent: Agent | None = None
    # `-p "/name args"`: a custom command's text is the request (its @refs then read)
    invoked = custom_commands.invoked(request, custom_commands.available(prepared.settings))
    request, command = (invoked.request, invoked.command) if invoked else (request, None)
    try:
        async with open_session(
            prepared,
            stderr,
            notices=stderr,
            prestarts=prestarts,
            request=request,
            on_declined=functools.partial(say_declined, stderr, redact),
            on_log=logs.add,
        ) as session:
            agent = session.agent
            out.record.servers = server_states(session.registry)
            assert session.request is not None  # the request, its @refs read
            with custom_commands.for_turn(agent, command, custom_commands.said_on(stderr)):
                async for event in agent.run(session.request):
                    out.add(event)
            logs.flush()
            out.record.servers = server_states(session.registry)
            out.report(agent.run_usage, agent.session_usage)
            session.registry.hasten_shutdown()  # the process ends next: a short grace
    except* Unavailable as refused:  # raised through the registry's task group
        unavailable = refused.exceptions[0]
        assert isinstance(unavailable, Unavailable)
        out.record.servers = unavailable.servers
        out.add(RunFinished("error", None, 0, Usage(), unavailable.problem))
    finally:
        so_far = (agent.run_usage, agent.session_usage) if agent is not None else (None, None)
        out.report(*so_far)
    return out.exit_code


def run_single(
    settings: Settings,
    request: str,
    *,
    output: Literal["text", "json"],
    resume: str | None,
    prestarts: Prestarts | None = None,
) -> int:
    """One request; `prestarts` are its stdio servers, started before the imports."""
    return anyio.run(ended_by_signals, _single, settings, request, output, resume, prestarts)


# -- the REPL ------------------------------------------------------------------------------


async def _repl(settings: Settings, resume: str | None, prestarts: Prestarts | None = None) -> int:
    """Open the session and hand it to the REPL (the front end never builds it itself).

    Input from a pipe: each line a turn, no prompt-toolkit; stdout holds the answers and
    command output only, the trace and status lines go to stderr, questions are not asked.
    """
    from agent.ui.input import PipedLines, typeahead_unechoed
    from agent.ui.login_host import terminal_host

    redact = settings.redactor(os.environ)  # every console masks what it is told of
    console, stderr = SafeConsole(redact=redact), SafeConsole(stderr=True, redact=redact)
    piped = not sys.stdin.isatty()
    screen = stderr if piped else console  # the trace, notices and status lines
    prepared = prepare_session(settings, stderr, resume, screen)
    settings = prepared.settings
    # What reads the user's lines; PipedLines reads like a PromptSession (prompt_async).
    input_line: Any = PipedLines(sys.stdin) if piped else terminal_input_line(settings)
    renderer = EventRenderer(
        screen,
        verbosity=verbosity(settings),
        stream_answer=not piped,
        redact=redact,
        inline_images=None if piped else inline_protocol(os.environ, console.is_terminal),
    )
    login = None if piped else terminal_host(stderr, paste=False)
    async with (
        open_session(
            prepared,
            stderr,
            notices=screen,
            prestarts=prestarts,
            login=login,
            apps=True,  # the REPL hosts MCP Apps' pages: declare the extension
        ) as session,
        # Pages are torn down before the servers close (ui/resource-teardown first).
        app_host(session) as apps,
    ):
        repl = build_repl(session, console, screen, input_line, renderer, apps)
        with typeahead_unechoed(sys.stdin):  # drawn once, by the prompt
            return await repl.loop()


def terminal_input_line(settings: Settings) -> PromptSession[str]:
    """The input line at a terminal, with the history file (in memory when it cannot be
    opened)."""
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory

    from agent.ui.input import history_file, prompt_session

    try:
        history: History = FileHistory(str(history_file(settings)))
    except OSError:
        history = InMemoryHistory()
    return prompt_session(history)


def build_repl(
    session: Session,
    console: Console,
    status: Console,
    input_line: PromptSession[str],
    renderer: EventRenderer,
    apps: AppHost,
) -> Repl:
    """The REPL, made by its constructor. The session's parts exist before it (it is given
    them), so the questions they ask reach it here, in one place: tool approvals and
    completion at a terminal only (from a pipe, ask-mode calls are refused as in a
    single-shot run), servers' requests, apps' messages, and MCP log lines with -v."""
    from agent.ui.input import PipedLines, ReplCompleter
    from agent.ui.repl import Repl

    piped = isinstance(input_line, PipedLines)
    repl = Repl(
        console,
        input_line,
        session.agent,
        session.registry,
        session.settings,
        renderer,
        session.saved.transcript,
        session.catalog,
        session.skills,
        apps,
        status=status,
        can_ask=not piped,
        # Into a pipe each answer is printed by the one answer writer, masked as `-p` does.
        on_answer=functools.partial(print_answer, redact=session.registry.redact)
        if piped
        else None,
        on_cancel=session.requests.cancel_in_flight,
    )
    apps.ui = repl
    session.requests.ui = repl
    if not piped:
        session.agent.approval.ask = repl.ask
        input_line.completer = ReplCompleter(repl)
    if session.settings.ui.verbose:
        session.registry.log_listener = repl.server_log
    return repl


def app_host(session: Session) -> AppHost:
    """The REPL's host for MCP Apps' pages: opens them in a browser when one can show up
    ($BROWSER, a display) unless `--no-browser`; otherwise it prints their URLs."""
    from agent.apps.host import AppHost
    from agent.auth.login import may_open_browser, open_browser

    browse = session.settings.ui.browser and may_open_browser()
    opener = open_browser if browse else None
    return AppHost(session.registry, session.agent.gate, browser=opener, catalog=session.catalog)


def run_repl(settings: Settings, *, resume: str | None, prestarts: Prestarts | None = None) -> int:
    return anyio.run(ended_by_signals, _repl, settings, resume, prestarts)
