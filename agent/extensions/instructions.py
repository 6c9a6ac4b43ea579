"""The instructions files in the system prompt: the user's own `AGENTS.md` first, then the
project's from its root down to the working directory (agent/config/instruction_files.py
finds them: `AGENTS.md`, else `CLAUDE.md`, else `GEMINI.md` in each folder), each headed
with its path, so the nearer file comes later and wins where they disagree.

The project's files only when the folder is trusted (`Settings.workspace_trusted`): they
are prompt text whoever wrote the repository controls, and trust digests them (a changed
`AGENTS.md` asks again). An untrusted folder's are listed as skipped and not one byte of
them is read; trust's one stderr line has already named them.

All of them together are capped (`cap_bytes`: 32 KiB, less for a small context window: they
ride along in every request). The nearest files are kept whole first; what does not fit is
cut with a note naming the file and how much was left out, so the model can read the rest
with its tools. Never silently: /memory shows what was cut.

May import: config, common.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.common.memory import PromptFile
from agent.config.instruction_files import user_file, workspace_files
from agent.config.settings import Settings

MAX_BYTES = 32 * 1024  # of all the files together (Codex's project_doc_max_bytes)
HEADER = (
    "Instructions from AGENTS.md files (the user's own, then the project's from its root "
    "down to the working directory; where they disagree, the later one wins):"
)


@dataclass(frozen=True)
class Instructions:
    """What the instructions files put in the system prompt, and what /memory says of them."""

    text: str  # the system prompt's section; "" when there is none
    files: tuple[PromptFile, ...]  # in the prompt's order
    skipped: tuple[Path, ...]  # the project's, unread: the folder is not trusted


def cap_bytes(context_window: int) -> int:
    """32 KiB in all, and at most about a quarter of the window (a token is ~4 bytes)."""
    return min(MAX_BYTES, context_window)


def load_instructions(settings: Settings, environ: Mapping[str, str]) -> Instructions:
    """The session's instructions files, read once at its start."""
    project = workspace_files(settings.workspace)
    user = user_file(environ)
    paths = [*([user] if user else []), *(project if settings.workspace_trusted else ())]
    cap = budget = cap_bytes(settings.llm.context_window)
    read: list[tuple[PromptFile, str]] = []
    for path in reversed(paths):  # the nearest first: it wins, so it is kept whole first
        found, text = _read(path, budget)
        budget -= found.kept
        read.append((found, text))
    read.reverse()
    sections = [_section(found, text, cap) for found, text in read if not found.problem]
    body = "\n\n".join([HEADER, *sections]) if sections else ""
    skipped = () if settings.workspace_trusted else project
    return Instructions(body, tuple(found for found, _ in read), skipped)


def _read(path: Path, limit: int) -> tuple[PromptFile, str]:
    """At most `limit` bytes of a regular file (a FIFO put there is not waited on), cut at a
    line end when one is near, as text."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return PromptFile(str(path), 0, 0, exc.strerror or type(exc).__name__), ""
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return PromptFile(str(path), 0, 0, "not a regular file"), ""
        data = fh.read(max(0, limit) + 1)
    size = max(info.st_size, len(data))
    if len(data) > limit:
        data = data[:limit]
        line_end = data.rfind(b"\n")
        if line_end >= limit // 2:
            data = data[: line_end + 1]
    text = data.decode("utf-8", errors="replace")
    if len(data) < size:  # a character cut in two is dropped, not shown as garbage
        text = text.rstrip("\ufffd")
    return PromptFile(str(path), size, len(data)), text


def _section(found: PromptFile, text: str, cap: int) -> str:
    """One file, headed with its path; a cut one ends with a note saying what is missing."""
    body = text.strip("\n")
    if found.kept < found.size:
        body += (
            f"\n[… cut: {found.size - found.kept} more bytes of this file are not shown "
            f"(the instructions files are capped at {cap} bytes in all); read the rest from "
            f"{found.path}]"
        )
    return f'<instructions path="{found.path}">\n{body}\n</instructions>'
