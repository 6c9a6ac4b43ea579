"""The subcommands that open a session of their own (`batch`, `serve`, `acp`): each takes
its own options, then every option of `run` that is not about one run's input or output
(`--mcp-config`, `--model`, `--yes`, …), with the same meaning.

One builder for the three, so a new `run` option reaches them all and they cannot drift.
"""

from __future__ import annotations

import inspect
import os
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import typer

from agent.common.errors import AgentError
from agent.common.signals import ended_by_signals
from agent.config.settings import Settings

# `run`'s options about one run's input or output, and the values a subcommand runs with.
ONE_RUN_OPTIONS: dict[str, Any] = {
    "prompt": None,
    "interactive": False,
    "output": "text",
    "input_format": "text",
    "resume": None,
    "login": None,
    "version": False,
}


def session_command_app(
    run: Callable[..., None],
    own_options: Callable[..., None] | None,
    handler: Callable[..., int],
    doc: str,
) -> typer.Typer:
    """A Typer app whose one command takes `own_options`' parameters (a function whose
    signature declares them; None: none) and `run`'s shared ones, and exits with
    `handler(opts, **own)`, `opts` being `run`'s options as a dict."""
    app = typer.Typer(
        add_completion=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    own = inspect.signature(own_options, eval_str=True).parameters if own_options else {}
    hints = typing.get_type_hints(run, include_extras=True)
    shared = [
        p.replace(annotation=hints[name])
        for name, p in inspect.signature(run).parameters.items()
        if name not in ONE_RUN_OPTIONS and name not in own
    ]

    def command(**given: Any) -> None:
        opts = {**ONE_RUN_OPTIONS, **{p.name: given[p.name] for p in shared}}
        raise typer.Exit(handler(opts, **{name: given[name] for name in own}))

    parameters = [*own.values(), *shared]
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    command.__doc__ = doc
    app.command()(command)
    return app


def run_session(settings: Settings, main: Callable[..., Awaitable[int]], *args: Any) -> int:
    """Run a subcommand's session under the signal handling every front end has
    (SIGTERM/SIGHUP end it cleanly); an error's message is masked with the session's
    redactor before anyone sees it."""
    try:
        return anyio.run(ended_by_signals, main, *args)
    except AgentError as exc:
        exc.message = settings.redactor(os.environ)(exc.message)
        raise
