"""Custom commands (agent/extensions/command_files.py) where they run: `/NAME args` in the
REPL and an ACP editor (rows of the slash-command table, agent/ui/commands.py), a `-p`
request and a stream-json turn (agent/cli/front_ends.py, agent/cli/stream_front.py).

A command's turn is the expanded text as the user's request, with its front matter applied
to that turn only (`for_turn`): `allowed-tools` run without asking (added to the session's
`--allowed-tools` rules, as if given there; `--disallowed-tools` still wins, and a session
in read-only mode stays read-only) and `model` answers it; both are put back when the turn
ends, however it ends. A command named as a built-in one (`/help`) is said once at start-up
and never runs: the built-in does.

May import: the loop and everything below it (the ui layer).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from rich.console import Console
from rich.text import Text

from agent.config.settings import Settings
from agent.extensions.command_files import CustomCommand, expand, find_commands, invocation
from agent.loop.react import Agent

Handler = Callable[[str], Awaitable[None]]
Say = Callable[[str], None]
# The REPL's own commands (agent/ui/commands.py's table; tests/extensions/
# test_custom_commands.py holds the two equal): a custom command of one of these names
# never runs, in the REPL or in a `-p` run, which runs no built-in.
BUILT_IN = frozenset(
    {
        *("help", "tools", "servers", "sandbox", "tasks", "resources", "prompts", "prompt"),
        *("skills", "skill", "model", "clear", "compact", "history", "usage", "hooks"),
        *("approve", "save", "sessions", "undo", "redo", "memory", "init", "login"),
        *("apps", "app", "logout", "exit", "quit"),
    }
)


@dataclass(frozen=True)
class Invoked:
    """A request that named a custom command: the command, and the text it sends."""

    command: CustomCommand
    request: str


def available(
    settings: Settings, environ: Mapping[str, str] = os.environ
) -> dict[str, CustomCommand]:
    """The session's commands, less those a built-in one shadows (their files' problems
    were said at start-up: `warn`)."""
    found, _ = find_commands(settings, environ)
    return {name: command for name, command in found.items() if name not in BUILT_IN}


def warn(
    settings: Settings,
    stderr: Console,
    redact: Callable[[str], str],
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Once a session, on stderr: a line for each command file that is not one, and each
    command a built-in shadows (masked: a path or a file's words may hold a secret)."""
    found, warnings = find_commands(settings, environ)
    for name in sorted(found.keys() & BUILT_IN):
        warnings.append(
            f"command /{name} ({found[name].path}) has the name of a built-in command: "
            "the built-in runs; rename the file to use it"
        )
    for warning in warnings:
        stderr.print(Text(redact(f"warning: {warning}"), style="yellow"))


def invoked(text: str, commands: Mapping[str, CustomCommand]) -> Invoked | None:
    """The command `text` runs (`/name args`), or None: the text is a request as it is."""
    found = invocation(text)
    if found is None or found[0] not in commands:
        return None
    command = commands[found[0]]
    return Invoked(command, expand(command, found[1]))


@contextlib.contextmanager
def for_turn(agent: Agent, command: CustomCommand | None, say: Say) -> Iterator[None]:
    """The command's `allowed-tools` and `model` in force while inside (one turn), and
    what they were put back after."""
    if command is None:
        yield
        return
    policy, model = agent.approval, agent.model
    rules, name = policy.rules, model.model
    granted = command.allowed_tools
    if granted and policy.mode == "read-only":
        say(f"/{command.name}: its allowed-tools are not applied: approval is read-only")
        granted = ()
    if granted:
        policy.rules = replace(rules, allowed=rules.allowed + granted)
        say(f"/{command.name}: these run without asking in this turn: {', '.join(granted)}")
    if command.model:
        model.model = command.model
        say(f"/{command.name}: this turn runs on model {command.model}")
    try:
        yield
    finally:
        policy.rules = rules
        if command.model and model.model == command.model:  # not if /model changed it since
            model.model = name


def said_on(console: Console) -> Say:
    """Where `for_turn` says what a command changes for its turn: dim lines on `console`."""
    return lambda line: console.print(Text(line, style="dim"))


def help_line(command: CustomCommand) -> str:
    """What /help and an editor's command list say of it: what it does, how it is called,
    where it comes from."""
    usage = f" — /{command.name} {command.argument_hint}" if command.argument_hint else ""
    return f"{command.description}{usage} ({command.source})"


def table(
    console: Console,
    agent: Agent,
    settings: Settings,
    run_turn: Callable[[str], Awaitable[None]],
) -> tuple[tuple[str, str, Handler], ...]:
    """(name, help, handler) of each custom command, for the slash-command table."""

    def handler(command: CustomCommand) -> Handler:
        async def run(arg: str) -> None:
            with for_turn(agent, command, said_on(console)):
                await run_turn(expand(command, arg))

        return run

    commands = available(settings)
    return tuple((name, help_line(c), handler(c)) for name, c in sorted(commands.items()))
