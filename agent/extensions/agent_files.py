"""Sub-agent definitions on disk: markdown files in Claude Code's shape, one agent a file.

Where they are: `agents/*.md` in the user's config folder (`$XDG_CONFIG_HOME/mcp-agent`,
always), and the project's `.claude/agents/*.md` only when the working directory is trusted:
a definition's body becomes a sub-agent's system prompt, prompt text whoever wrote a cloned
repository controls (trust lists the folder in its question and digests it, so a changed
definition asks again). A project's agent of the same name as the user's wins, as in
Claude Code.

The front matter (the YAML subset agent/extensions/skill_files.py reads): `name` (as a
skill's: lowercase letters, digits, hyphens), `description` (one line, listed in `task`'s
description: it is how the model picks one), `tools` (a comma list or a YAML list of names
as `--allowed-tools` takes them; absent: every tool), `model` (absent or `inherit`: the
session's), `max_steps` (absent: the session's). A file that is not a definition is said in
one warning line and skipped.

May import: config, common, and the rest of extensions.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.config.files import user_config_dir
from agent.config.settings import Settings
from agent.extensions.skill_files import name_and_description, split_front_matter

PROJECT_FOLDER = ".claude/agents"  # agent/config/trust.py WORKSPACE_FILES lists it
USER_FOLDER = "agents"  # in the user's config folder
MAX_DEFINITION_BYTES = 256 * 1024  # a definition larger than this is not used
MAX_DEFINITIONS = 64  # per folder; the rest are said once and left out
MAX_STEPS_LIMIT = 200


@dataclass(frozen=True)
class AgentDefinition:
    """One sub-agent as its file defines it."""

    name: str
    description: str
    prompt: str  # the body: the sub-agent's system prompt
    tools: tuple[str, ...] | None  # patterns as --allowed-tools takes them; None: every tool
    model: str | None  # None: the session's model
    max_steps: int | None
    source: str  # "user" or "project"
    path: Path


def agent_folders(settings: Settings, environ: Mapping[str, str]) -> list[tuple[str, Path]]:
    """(source, folder) in the order they are read: the user's, then a trusted project's."""
    folders: list[tuple[str, Path]] = []
    user = user_config_dir(environ)
    if user is not None:
        folders.append(("user", user / USER_FOLDER))
    if settings.workspace_trusted:  # the working directory's own files: only when trusted
        folders.append(("project", settings.workspace / PROJECT_FOLDER))
    return folders


def find_definitions(
    settings: Settings, environ: Mapping[str, str]
) -> tuple[dict[str, AgentDefinition], list[str]]:
    """Every definition by name (a project's replaces the user's of the same name), and a
    warning for each file that is not one."""
    found: dict[str, AgentDefinition] = {}
    warnings: list[str] = []
    for source, folder in agent_folders(settings, environ):
        try:
            paths = sorted(p for p in folder.iterdir() if p.suffix == ".md")
        except OSError:
            continue  # no such folder: nothing there
        if len(paths) > MAX_DEFINITIONS:
            warnings.append(
                f"{folder}: {len(paths)} agent definitions; only the first {MAX_DEFINITIONS} used"
            )
        for path in paths[:MAX_DEFINITIONS]:
            read = read_definition(source, path)
            if isinstance(read, str):
                warnings.append(read)
            else:
                found[read.name] = read
    return found, warnings


def read_definition(source: str, path: Path) -> AgentDefinition | str:
    """One file as a definition, or the one line that says why it is not one."""
    try:
        text = _read(path)
    except OSError as exc:
        return f"agent {path}: cannot read it ({exc.strerror or type(exc).__name__}), not used"
    except ValueError as exc:
        return f"agent {path}: {exc}, not used"
    meta, body = split_front_matter(text)
    named = name_and_description("agent", path, meta)
    if isinstance(named, str):
        return named
    if not body.strip():
        return f"agent {path}: it has no system prompt (the text after the front matter)"
    try:
        tools = _tools(meta.get("tools"))
        steps = _steps(meta.get("max_steps"))
    except ValueError as exc:
        return f"agent {path}: {exc}, not used"
    model = meta.get("model")
    model = model.strip() if isinstance(model, str) and model.strip() != "inherit" else None
    return AgentDefinition(
        *named,
        body.strip(),
        tools,
        model or None,
        steps,
        source,
        path,
    )


def _read(path: Path) -> str:
    """A regular file of at most MAX_DEFINITION_BYTES (a FIFO put there is not waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > MAX_DEFINITION_BYTES:
            raise ValueError(f"larger than {MAX_DEFINITION_BYTES:,} bytes")
        data = fh.read(MAX_DEFINITION_BYTES + 1)
    return data.decode("utf-8", errors="replace")


def _tools(value: Any) -> tuple[str, ...] | None:
    """`tools: a, b` or a YAML list; absent, empty or `*`: every tool (None)."""
    if value is None:
        return None
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str) for item in items):
        raise ValueError("'tools' must be tool names, a comma list or a YAML list")
    names = tuple(n for item in items for n in item.replace(",", " ").split() if n)
    return None if not names or names == ("*",) else names


def _steps(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_STEPS_LIMIT:
        raise ValueError(f"'max_steps' must be a whole number from 1 to {MAX_STEPS_LIMIT}")
    return value
