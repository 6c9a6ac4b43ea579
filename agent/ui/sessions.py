"""Saved sessions as a person picks among them: `/sessions` in the REPL, and the list
`--resume` (with no ID) shows at a terminal before the REPL opens.

A session belongs to the folder it was started in (its transcript's `meta` record), so
`--resume` in one project never continues another's conversation; `--all` lists every
folder's. What a row shows (the first request) was typed by a person but is read back from
a file: it passes the one terminal writer like everything else.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

from agent.common.errors import ConfigError
from agent.common.transcript import SavedSession, find_session, saved_sessions
from agent.config.settings import Settings
from agent.ui.layout import Column, show_table
from agent.ui.safe import clean, terminal

LISTED = 20  # sessions a list shows, newest first


def show_sessions(
    console: Console, state_dir: Path, workspace: Path, every: bool, current: str | None
) -> None:
    """`/sessions [--all]`: this folder's saved sessions (every folder's), newest first."""
    found = saved_sessions(state_dir, None if every else workspace, LISTED, keep=current)
    if not found:
        where = "" if every else f" started in this folder ({workspace}); /sessions --all lists all"
        console.print(Text(f"no saved sessions{where}", style="dim"))
        return
    columns = [Column("#", key=True), Column("session", key=True), Column("started", key=True)]
    if every:
        columns.append(Column("folder", label="folder"))
    columns.append(Column("first request", stacked="line"))
    rows = []
    for number, saved in enumerate(found, 1):
        mark = " (this one)" if saved.session_id == current else ""
        row = [str(number), saved.session_id + mark, saved.started]
        if every:
            row.append(clean(saved.workspace or "(not recorded)"))
        rows.append([*row, clean(saved.first)])
    show_table(console, columns, rows)
    console.print(Text("continue one: run_mcp.py --resume ID", style="dim"))


def choose_session(settings: Settings, resume: str, every: bool, ask: bool) -> str | None:
    """What `--resume` continues: an ID as given; with none, at a terminal (`ask`), the
    session the person picks from this folder's (every folder's with `--all`), or None for
    a new one; otherwise the newest (this folder's, or any with `--all`)."""
    if resume != "latest":
        return resume
    workspace = None if every else settings.workspace
    if not ask:
        return find_session(settings.state_dir, "latest", workspace).stem if every else resume
    found = saved_sessions(settings.state_dir, workspace, LISTED)
    if not found:
        find_session(settings.state_dir, "latest", workspace)  # raises, saying what there is
        raise ConfigError("--resume: no saved sessions")
    where = "every folder" if every else f"this folder ({settings.workspace})"
    terminal(f"Saved sessions of {where}, newest first:", err=True)
    for number, saved in enumerate(found, 1):
        terminal(_line(number, saved, every), err=True)
    return _ask(found)


def _line(number: int, saved: SavedSession, every: bool) -> str:
    folder = f"  {saved.workspace or '(folder not recorded)'}" if every else ""
    return f"{number:>3}  {saved.started}  {saved.session_id}{folder}  {saved.first}"


def _ask(found: list[SavedSession]) -> str | None:
    """The number typed (Enter: the newest; n: a new session); asked again after a typo.
    End of input is Ctrl-D: leave as Ctrl-C would (main maps it to exit 130)."""
    question = f"Resume which? [1-{len(found)}, Enter: 1, n: a new session] "
    while True:
        terminal(question, err=True, end="")
        line = sys.stdin.readline()
        if not line:
            raise KeyboardInterrupt
        answer = line.strip().lower()
        if answer in ("n", "new"):
            return None
        if answer == "":
            return found[0].session_id
        if answer.isdigit() and 1 <= int(answer) <= len(found):
            return found[int(answer) - 1].session_id
        said = f"'{answer}' is not one of them: type a number from 1 to {len(found)}, or n"
        terminal(said, err=True)
