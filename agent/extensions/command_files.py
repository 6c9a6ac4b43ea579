"""Custom slash commands on disk: a file's text is the request `/NAME args` sends.

Where they are, read in this order (a later folder's command replaces an earlier one's of
the same name, so a project's wins over the user's, and ours over another client's):

- Codex's `$CODEX_HOME/prompts` (else `~/.codex/prompts`), Claude Code's `~/.claude/commands`
  (markdown) and gemini-cli's `~/.gemini/commands` (TOML): the user's own, as those tools
  keep them;
- the user's `commands/` in our config folder (`$XDG_CONFIG_HOME/mcp-agent`): both kinds;
- the project's `.gemini/commands` and `.claude/commands`, only when the working directory
  is trusted: a command is prompt text, and its `allowed-tools` run without asking, that a
  cloned repository's authors wrote (agent/config/trust.py lists both folders in its
  question and digests them, so a changed command asks again).

A file in a subfolder gets a namespaced name, as in Claude Code and gemini-cli:
`frontend/test.md` is `/frontend:test`. Markdown takes front matter (the YAML subset
agent/extensions/skill_files.py reads): `description`, `argument-hint`, `allowed-tools`
(names as `--allowed-tools` takes them) and `model`; `$ARGUMENTS` is everything after the
name, `$1`..`$9` its words split as a shell does. A TOML file has `prompt` (required) and
`description`, and `{{args}}` for the arguments. Nothing in a file runs: Claude Code's
`!`command`` and `@file`, gemini-cli's `!{...}` and `@{...}`, stay text.

Reading is bounded: files of at most MAX_FILE_BYTES, MAX_COMMANDS per folder, MAX_DEPTH
folders down, links to folders not followed (as trust's digest walks them), and in a
project a file whose link leads out of the project is not read.

May import: config, common, and the rest of extensions.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.config.files import user_config_dir
from agent.config.settings import Settings
from agent.extensions.skill_files import one_line, split_front_matter

PROJECT_FOLDERS = (".gemini/commands", ".claude/commands")  # agent/config/trust.py lists them
USER_FOLDER = "commands"  # in the user's config folder
MAX_FILE_BYTES = 64 * 1024  # a larger command file is not used
MAX_COMMANDS = 200  # per folder; the rest are said once and left out
MAX_DEPTH = 3  # subfolders below a commands folder (namespaces)
MAX_NAME = 64
DESCRIPTION = 120  # characters of a description in /help and an editor's list
_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# What an invocation looks like: `/name args`; a path (`/etc/hosts`) is not one.
_INVOCATION = re.compile(r"/([A-Za-z0-9][\w.-]*(?::[\w.-]+)*)(?:\s+(.*))?\Z", re.DOTALL)
_CLAUDE_PLACEHOLDER = re.compile(r"\$(ARGUMENTS|[1-9])")

Kind = Literal["markdown", "toml"]
MARKDOWN, TOML = (".md",), (".toml",)


@dataclass(frozen=True)
class CustomCommand:
    """One command as its file defines it."""

    name: str  # `frontend:test` for frontend/test.md
    description: str
    argument_hint: str
    allowed_tools: tuple[str, ...]  # run without asking during the command's turn
    model: str | None  # the turn runs on this model; None: the session's
    template: str  # the body (markdown) or `prompt` (TOML)
    kind: Kind
    path: Path
    source: str  # the folder as the user knows it: `.claude/commands`, `~/.codex/prompts`…


@dataclass(frozen=True)
class Folder:
    source: str
    path: Path
    suffixes: tuple[str, ...]
    project: Path | None = None  # a trusted working directory's folder: that directory


def command_folders(settings: Settings, environ: Mapping[str, str]) -> list[Folder]:
    """The folders in the order they are read (the last one's command of a name wins)."""
    folders: list[Folder] = []
    home = environ.get("HOME")
    codex = environ.get("CODEX_HOME")
    if codex:
        folders.append(Folder("$CODEX_HOME/prompts", Path(codex) / "prompts", MARKDOWN))
    elif home:
        folders.append(Folder("~/.codex/prompts", Path(home, ".codex", "prompts"), MARKDOWN))
    if home:
        folders.append(Folder("~/.claude/commands", Path(home, ".claude", "commands"), MARKDOWN))
        folders.append(Folder("~/.gemini/commands", Path(home, ".gemini", "commands"), TOML))
    user = user_config_dir(environ)
    if user is not None:
        folders.append(Folder(str(user / USER_FOLDER), user / USER_FOLDER, MARKDOWN + TOML))
    if settings.workspace_trusted:  # the working directory's own files: only when trusted
        for sub in PROJECT_FOLDERS:
            suffixes = TOML if sub.startswith(".gemini") else MARKDOWN
            folders.append(Folder(sub, settings.workspace / sub, suffixes, settings.workspace))
    seen: set[str] = set()
    unique = []
    for folder in folders:  # the workspace may be the home folder: each folder once
        key = os.path.realpath(folder.path)
        if key not in seen:
            seen.add(key)
            unique.append(folder)
    return unique


def find_commands(
    settings: Settings, environ: Mapping[str, str]
) -> tuple[dict[str, CustomCommand], list[str]]:
    """Every command by name, and a warning line for each file that is not one."""
    found: dict[str, CustomCommand] = {}
    warnings: list[str] = []
    for folder in command_folders(settings, environ):
        paths = list(_command_files(folder, MAX_COMMANDS + 1))
        if len(paths) > MAX_COMMANDS:
            warnings.append(
                f"{folder.path}: more than {MAX_COMMANDS} command files; only the first used"
            )
        for path in paths[:MAX_COMMANDS]:
            read = read_command(folder, path)
            if isinstance(read, str):
                warnings.append(read)
            else:
                found[read.name] = read
    return found, warnings


def _command_files(folder: Folder, limit: int) -> Iterator[Path]:
    """The folder's command files, sorted, at most `limit`, MAX_DEPTH folders down; links
    to folders are not followed and hidden entries are skipped."""
    count = 0
    for top, subfolders, names in os.walk(folder.path):  # no such folder: nothing
        depth = len(Path(top).relative_to(folder.path).parts)
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        if depth >= MAX_DEPTH:
            subfolders[:] = []
        for name in sorted(names):
            if name.startswith(".") or not name.endswith(folder.suffixes):
                continue
            count += 1
            yield Path(top) / name
            if count >= limit:
                return


def command_name(folder: Path, path: Path) -> str | None:
    """`frontend:test` for `folder/frontend/test.md`; None when a part is not a name."""
    parts = [*path.relative_to(folder).parent.parts, path.stem]
    name = ":".join(parts)
    if len(name) > MAX_NAME or not all(_PART.fullmatch(part) for part in parts):
        return None
    return name


def read_command(folder: Folder, path: Path) -> CustomCommand | str:
    """One file as a command, or the one line that says why it is not one."""
    name = command_name(folder.path, path)
    if name is None:
        return f"command {path}: its name is not letters, digits, '-', '_' or '.', not used"
    try:
        if folder.project is not None and not _inside(path, folder.project):
            return f"command {path}: a link that leads out of the project, not used"
        text = _read(path)
    except OSError as exc:
        return f"command {path}: cannot read it ({exc.strerror or type(exc).__name__}), not used"
    except ValueError as exc:
        return f"command {path}: {exc}, not used"
    if path.suffix == ".toml":
        return _from_toml(name, folder, path, text)
    return _from_markdown(name, folder, path, text)


def _from_markdown(name: str, folder: Folder, path: Path, text: str) -> CustomCommand | str:
    meta, body = split_front_matter(text)
    if not body.strip():
        return f"command {path}: it has no text (after the front matter), not used"
    try:
        tools = _tools(meta.get("allowed-tools"))
    except ValueError as exc:
        return f"command {path}: {exc}, not used"
    model = meta.get("model")
    return CustomCommand(
        name,
        _description(meta.get("description"), body),
        _text(meta.get("argument-hint")),
        tools,
        model.strip() if isinstance(model, str) and model.strip() else None,
        body.strip("\n"),
        "markdown",
        path,
        folder.source,
    )


def _from_toml(name: str, folder: Folder, path: Path, text: str) -> CustomCommand | str:
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return f"command {path}: not TOML ({exc}), not used"
    prompt = table.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return f"command {path}: it has no 'prompt' text, not used"
    description = table.get("description")
    return CustomCommand(
        name,
        _description(description, prompt),
        "",
        (),
        None,
        prompt.strip("\n"),
        "toml",
        path,
        folder.source,
    )


def _description(value: Any, body: str) -> str:
    """The front matter's description, else the text's first line (as Claude Code shows)."""
    if isinstance(value, str) and value.strip():
        return one_line(value, DESCRIPTION)
    first = next((line for line in body.splitlines() if line.strip()), "")
    return one_line(first.lstrip("# "), DESCRIPTION)


def _text(value: Any) -> str:
    return one_line(value, DESCRIPTION) if isinstance(value, str) else ""


def _tools(value: Any) -> tuple[str, ...]:
    """`allowed-tools: a, b` or a YAML list, names as `--allowed-tools` takes them.
    Claude Code's rules with arguments (`Bash(git add:*)`) cannot be held to their
    arguments here: they are refused, never widened to the whole tool."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(item, str) for item in items):
        raise ValueError("'allowed-tools' must be tool names, a comma list or a YAML list")
    joined = ", ".join(items)
    if "(" in joined or ")" in joined:
        raise ValueError(
            "'allowed-tools' holds a rule with arguments (as Claude Code's 'Bash(git add:*)'); "
            "name whole tools as --allowed-tools takes them (local__bash)"
        )
    return tuple(n for n in joined.replace(",", " ").split() if n)


def _inside(path: Path, project: Path) -> bool:
    """Whether `path`, its links followed, is in the project."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(project))


def _read(path: Path) -> str:
    """A regular file of at most MAX_FILE_BYTES (a FIFO put there is not waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES:,} bytes")
        data = fh.read(MAX_FILE_BYTES + 1)
    return data.decode("utf-8", errors="replace")


def invocation(text: str) -> tuple[str, str] | None:
    """(name, arguments) when `text` is `/name args`, else None."""
    found = _INVOCATION.match(text.strip())
    return (found.group(1), (found.group(2) or "").strip()) if found else None


def expand(command: CustomCommand, arguments: str) -> str:
    """The request the command sends: its text with the arguments put in. One pass, so
    an argument's own `$1` or `{{args}}` stays as typed. Arguments given to a text with no
    place for them are added at its end, as Claude Code and gemini-cli do: never lost."""
    arguments = arguments.strip()
    if command.kind == "toml":
        if "{{args}}" in command.template:
            return command.template.replace("{{args}}", arguments)
        return (
            f"{command.template}\n\n/{command.name} {arguments}" if arguments else command.template
        )
    words = _words(arguments)
    placed = False

    def put(match: re.Match[str]) -> str:
        nonlocal placed
        placed = True
        key = match.group(1)
        if key == "ARGUMENTS":
            return arguments
        index = int(key) - 1
        return words[index] if index < len(words) else ""

    text = _CLAUDE_PLACEHOLDER.sub(put, command.template)
    return f"{text}\n\nARGUMENTS: {arguments}" if arguments and not placed else text


def _words(arguments: str) -> list[str]:
    """The arguments split as a shell splits them; an unclosed quote splits at spaces."""
    try:
        return shlex.split(arguments)
    except ValueError:
        return arguments.split()
