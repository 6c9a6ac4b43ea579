"""`--output stream-json`: the single-shot run (or, with `--input-format stream-json`, one
session fed a turn per stdin line) with its events on stdout as JSON lines.

Built like the single-shot run (agent.cli.front_ends): the session agent.session.startup
opens, the one loop (`Agent.run`), the trace on stderr; only stdout differs
(agent.ui.stream_json). Approval is the single-shot run's: without `--yes`, a call that
needs approval is refused and the model is told so. Documented in docs/programs.md.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
from collections.abc import Mapping

import anyio

from agent.cli.stream_input import (
    QUEUED_LINES,
    InputError,
    InputLine,
    Interrupt,
    UserTurn,
    read_lines,
)
from agent.common.signals import ended_by_signals
from agent.config.settings import Settings
from agent.extensions.command_files import CustomCommand
from agent.loop.events import RunFinished, ToolCallFinished, ToolCallStarted, Usage
from agent.loop.react import Agent
from agent.session.startup import (
    Session,
    Unavailable,
    expand_refs,
    open_session,
    prepare_session,
    say_declined,
    verbosity,
)
from agent.tools.prestart import Prestarts
from agent.ui import custom_commands
from agent.ui.output import server_states
from agent.ui.render import EventRenderer, LogLines
from agent.ui.safe import SafeConsole
from agent.ui.stream_json import StdoutClosed, StreamJsonOutput, StreamJsonWriter

EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell expects of a writer whose reader left


async def _stream(
    settings: Settings,
    request: str | None,
    resume: str | None,
    prestarts: Prestarts | None,
) -> int:
    """`request`: the one turn of `-p`; None: the turns come from stdin."""
    redact = settings.redactor(os.environ)
    stderr = SafeConsole(stderr=True, redact=redact)
    prepared = prepare_session(settings, stderr, resume, stderr)
    renderer = EventRenderer(
        stderr, verbosity=verbosity(prepared.settings), stream_answer=False, redact=redact
    )
    session_id = prepared.saved.transcript.session_id
    out = StreamJsonOutput(renderer, StreamJsonWriter(redact), session_id)
    logs = LogLines(stderr)
    agent: Agent | None = None
    closed = False
    commands = custom_commands.available(prepared.settings)
    invoked = custom_commands.invoked(request, commands) if request is not None else None
    request, command = (invoked.request, invoked.command) if invoked else (request, None)
    try:
        async with open_session(
            prepared,
            stderr,
            notices=stderr,
            prestarts=prestarts,
            request=request,
            script=True,
            on_declined=functools.partial(say_declined, stderr, redact),
            on_log=logs.add,
        ) as session:
            agent = session.agent
            out.init(
                model=session.model.model,
                approval=session.settings.ui.approval,
                servers=server_states(session.registry),
                tools=sorted(session.registry.tools),
            )
            if session.request is not None:
                await _turn(session, session.request, out, command, stderr)
            else:
                await _turns(session, out, stderr, commands)
            logs.flush()
            session.registry.hasten_shutdown()  # the process ends next: a short grace
    except* Unavailable as refused:
        unavailable = refused.exceptions[0]
        assert isinstance(unavailable, Unavailable)
        out.start_turn(unavailable.servers)
        with contextlib.suppress(StdoutClosed):
            out.add(RunFinished("error", None, 0, Usage(), unavailable.problem))
            out.report()
    except* StdoutClosed:
        closed = True
    finally:
        if agent is not None:  # a turn cut short (Ctrl-C, a signal): its result line
            with contextlib.suppress(StdoutClosed):
                out.report(agent.run_usage, agent.session_usage)
    if closed:
        stderr.print("stdout was closed by its reader: the run was stopped", style="yellow")
        return EXIT_PIPE
    return out.exit_code


async def _turn(
    session: Session,
    request: str,
    out: StreamJsonOutput,
    command: CustomCommand | None,
    stderr: SafeConsole,
) -> None:
    """One turn on the session's agent (`command`: the custom command it runs, whose
    allowed-tools and model hold for it): its events out as they come, then its result. A
    call cut short (an interrupt, Ctrl-C) still gets its `tool_result` line: a program
    pairs each `tool_use` with one."""
    agent = session.agent
    out.start_turn(server_states(session.registry))
    running: dict[str, tuple[ToolCallStarted, float]] = {}
    try:
        with custom_commands.for_turn(agent, command, custom_commands.said_on(stderr)):
            async with contextlib.aclosing(agent.run(request)) as events:
                async for event in events:
                    out.add(event)
                    if isinstance(event, ToolCallStarted):
                        running[event.call_id] = (event, time.monotonic())
                    elif isinstance(event, ToolCallFinished):
                        running.pop(event.call_id, None)
    finally:
        for call, began in running.values():
            ms = (time.monotonic() - began) * 1000
            said = "interrupted before it finished"
            args = (call.call_id, call.name, call.server, call.tool, call.arguments)
            out.add(ToolCallFinished(*args, said, True, ms))
        out.record.servers = server_states(session.registry)
        out.report(agent.run_usage, agent.session_usage)


async def _turns(
    session: Session,
    out: StreamJsonOutput,
    stderr: SafeConsole,
    commands: Mapping[str, CustomCommand],
) -> None:
    """A turn per user line, in order, in one session (`/name args` runs a custom command);
    a control request interrupts the turn that is running (its result says cancelled) and
    the next line goes on; an unusable line is an error line. Input ends: the queued turns
    run, then the session."""
    lines_in, lines = anyio.create_memory_object_stream[InputLine](QUEUED_LINES)
    turns_in, turns = anyio.create_memory_object_stream[UserTurn](QUEUED_LINES)
    read_lines(sys.stdin.buffer, lines_in)
    running: list[anyio.CancelScope] = []

    async def sort() -> None:
        async with lines, turns_in:
            async for item in lines:
                match item:
                    case UserTurn():
                        await turns_in.send(item)
                    case Interrupt():
                        if not running:
                            out.control_response(item.request_id, "no turn is running")
                            continue
                        running[0].cancel()
                        session.requests.cancel_in_flight()
                        out.control_response(item.request_id)
                    case InputError():
                        out.error(item.message, item.line)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sort)
        async with turns:
            async for turn in turns:
                invoked = custom_commands.invoked(turn.text, commands)
                text = invoked.request if invoked else turn.text
                request = await expand_refs(session.catalog, text, stderr)
                with anyio.CancelScope() as scope:
                    running.append(scope)
                    try:
                        await _turn(
                            session, request, out, invoked.command if invoked else None, stderr
                        )
                    finally:
                        running.clear()


def run_stream(
    settings: Settings,
    request: str | None,
    *,
    resume: str | None,
    prestarts: Prestarts | None = None,
) -> int:
    """`--output stream-json`: `request` (from -p) or, when None, turns from stdin."""
    return anyio.run(ended_by_signals, _stream, settings, request, resume, prestarts)
