"""`run_mcp.py trust [PATH]`, and settling a run's trust before its servers start.

Kept apart from agent/cli/main.py: main() hands it any command line that starts with `trust`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated

import typer

from agent.common.errors import ConfigError
from agent.config.build import default_state_dir, workspace_trust
from agent.config.settings import Settings
from agent.config.trust import (
    STORE_NAME,
    WORKSPACE_FILES,
    Answer,
    decide,
    hint,
    load_store,
    question,
    real,
    remember,
    with_changes,
)

trust_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    help="Trust a folder: the agent then uses its own config/ files when run there.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


@trust_app.command()
def trust(
    path: Annotated[Path, typer.Argument(help="The folder (default: this one).")] = Path("."),
    never: Annotated[
        bool, typer.Option("--never", help="Never use its files, and stop asking.")
    ] = False,
    forget: Annotated[
        bool, typer.Option("--forget", help="Forget the answer kept for it (ask again).")
    ] = False,
    show: Annotated[bool, typer.Option("--list", help="List the remembered folders.")] = False,
) -> None:
    """Remember an answer for PATH in the user's state (by its real path)."""
    from agent.ui.safe import clean  # (rich: not loaded on every run's start)

    environ = dict(os.environ)
    state_dir = default_state_dir(environ)
    if show:
        for folder, kept in load_store(state_dir).items():
            print(clean(f"{kept}\t{folder}"))
        return
    if not real(path).is_dir():
        raise ConfigError(f"trust {path}: not a folder")
    answer: Answer | None = None if forget else "never" if never else "trust"
    # What its files are now is what is trusted (a later change asks again); a file the
    # question cannot read cannot be trusted (remember refuses, in one line).
    found = workspace_trust(real(path), environ, state_dir)
    shown = question(found, environ)
    store = remember(state_dir, path, answer, found, shown)
    done = {"trust": "trusted", "never": "never trusted", None: "forgot"}[answer]
    print(clean(f"{done} {real(path)} (kept in {store})"))
    if answer == "trust":
        for line in shown.lines:
            print(clean(f"  {line}"))  # the folder's own text: shown inert


def settle(
    settings: Settings,
    environ: Mapping[str, str],
    *,
    ask: bool,
    trusted: Callable[[], Settings],
) -> Settings:
    """The run's settings once the folder's trust is settled (before any server starts).

    An untrusted folder with files of its own: the REPL asks (unless the answer was
    "never", or a file is one the question cannot read: then it says so in one line, and
    the run goes on with the folder untrusted); any other run says in one stderr line what
    was ignored and how to trust. `trusted` builds the settings again with the folder trusted.
    """
    if settings.workspace_trusted or not settings.untrusted_files:
        return settings
    from agent.ui.safe import clean

    # Its envFiles the servers would read are in untrusted_files beside its own files.
    env_files = tuple(f for f in settings.untrusted_files if f not in WORKSPACE_FILES)
    found = decide(settings.workspace, environ, settings.state_dir, env_files=env_files)
    shown = question(found, environ)
    if not ask or found.never or shown.unreadable:
        # a folder's name, a file's words may hold escapes
        print(clean(hint(found, environ, shown)), file=sys.stderr)
        return settings
    from prompt_toolkit import PromptSession

    from agent.ui.safe import SafeConsole
    from agent.ui.trust_question import ask_trust

    lines = with_changes(found, shown.lines)
    reply = ask_trust(found, lines, SafeConsole(stderr=True), PromptSession())
    if reply == "not now":
        return settings
    try:
        remember(settings.state_dir, found.folder, reply, found, shown)
    except OSError as exc:
        where = settings.state_dir / STORE_NAME
        print(f"warning: cannot remember it in {where}: {exc.strerror}", file=sys.stderr)
    return trusted() if reply == "trust" else settings
