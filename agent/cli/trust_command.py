"""`run_mcp.py trust [PATH]`: remember an answer for a folder.

Kept apart from agent/cli/main.py: main() hands it any command line that starts with `trust`.
Settling a run's trust before its servers start (`settle`, the REPL's question) is the
session's: agent/session/run_settings.py, named here still for the subcommands that import
it from this module.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from agent.common.errors import ConfigError
from agent.config.build import default_state_dir, workspace_trust
from agent.config.trust import Answer, load_store, real, remember
from agent.config.trust_listing import question
from agent.session.run_settings import settle

__all__ = ["settle", "trust", "trust_app"]

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
