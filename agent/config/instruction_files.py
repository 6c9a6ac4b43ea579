"""Where the instructions files are: the user's own `AGENTS.md`, and the project's from its
root down to the working directory (agents.md; Claude Code's `CLAUDE.md` and gemini-cli's
`GEMINI.md` where a folder has no `AGENTS.md`).

Only where they are, not what they say: trust (agent/config/trust.py) lists and digests
the project's files, so a changed `AGENTS.md` makes the folder asked about again, and
agent/extensions/instructions.py reads the same files into the system prompt.

The project's root is the nearest folder at or above the working directory that holds
`.git` (a folder, or a worktree's file), as Codex walks it; outside a repository, the
working directory alone. The working directory is the folder trust decides on; its
parents' files up to that root are part of what the user trusts with it (the question
names them, e.g. `../AGENTS.md`).

May import: the rest of agent.config, and agent.common.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from agent.config.files import user_config_dir

NAMES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")  # one per folder, the first present
USER_FILE = "AGENTS.md"  # in the user's config folder ($XDG_CONFIG_HOME/mcp-agent)


def project_root(workspace: Path) -> Path:
    """The nearest folder at or above `workspace` holding `.git`; else `workspace`."""
    for folder in (workspace, *workspace.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return workspace


def folders(workspace: Path) -> list[Path]:
    """The folders whose files apply, the root first and `workspace` last."""
    root = project_root(workspace)
    chain = [workspace]
    while chain[-1] != root:
        chain.append(chain[-1].parent)
    return chain[::-1]


def folder_file(folder: Path) -> Path | None:
    """The folder's instructions file: its AGENTS.md, else CLAUDE.md, else GEMINI.md (a
    link to a file counts: `ln -s AGENTS.md CLAUDE.md` is common; a FIFO or a folder of
    that name does not)."""
    return next((folder / n for n in NAMES if (folder / n).is_file()), None)


def workspace_files(workspace: Path) -> tuple[Path, ...]:
    """The project's instructions files, the root's first and the working directory's last
    (the nearer one wins, so it comes after)."""
    return tuple(f for f in map(folder_file, folders(workspace)) if f is not None)


def user_file(environ: Mapping[str, str]) -> Path | None:
    """The user's own AGENTS.md, when there is one (it needs no trust: the user wrote it)."""
    folder = user_config_dir(environ)
    path = folder / USER_FILE if folder is not None else None
    return path if path is not None and path.is_file() else None


def said_in_question(path: Path, size: int, short: Callable[[str], str]) -> str:
    """The trust question's line on one: what it becomes, its size, and where a link leads
    (a link out of the project puts that file's text in the prompt)."""
    link = f" (a link to {short(os.readlink(path))})" if path.is_symlink() else ""
    return f"instructions for the model{link}, {size} bytes, put in the system prompt"
