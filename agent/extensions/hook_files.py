"""Which hooks are active: `hooks.json` files in Claude Code's `{"hooks": {...}}` shape.

Read from the user-level config folder (`<user config>/hooks.json`) and, only when the
working directory is trusted (`Settings.workspace_trusted`), from the project's
`config/hooks.json` (beside its `config/mcp.json`). Both files' hooks are active; the
user's come first. A hook runs a command; the other handler types of Claude Code (http,
prompt, agent) are listed as skipped, not run, so a pasted settings file still loads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.common.errors import ConfigError
from agent.config.files import user_config_dir

PROJECT_HOOKS = Path("config") / "hooks.json"
DEFAULT_TIMEOUT = 60.0
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "Notification",
)
# Events whose matcher means something (what it is matched against is the event's own:
# tool names, the session's source, the compaction's trigger, the notification's type).
MATCHED = frozenset({"PreToolUse", "PostToolUse", "SessionStart", "PreCompact", "Notification"})
_PLAIN = re.compile(r"^[A-Za-z0-9_|-]+$")  # Claude Code: exact names, `|` between them


@dataclass(frozen=True)
class Hook:
    """One command to run on an event whose subject the matcher accepts."""

    event: str
    command: str
    matcher: str = ""
    timeout: float = DEFAULT_TIMEOUT
    source: str = ""  # the file it came from, for /hooks
    # From the user-level hooks.json: run with the user's environment, as Claude Code runs
    # its hooks (a project's hooks get the scrubbed one stdio servers get).
    user: bool = False

    def matches(self, names: tuple[str, ...]) -> bool:
        """`names`: what this event is about (a tool's public and own names, and Claude
        Code's `mcp__server__tool`; a session's source). "" and "*" match everything;
        letters, digits, `_`, `-` and `|` are exact names; anything else is a regular
        expression searched in each name, as in Claude Code (anchor it with ^…$ to match
        whole names)."""
        if self.event not in MATCHED or self.matcher in ("", "*"):
            return True
        if _PLAIN.match(self.matcher):
            return any(name in self.matcher.split("|") for name in names)
        pattern = re.compile(self.matcher)
        return any(pattern.search(name) for name in names)


@dataclass(frozen=True)
class HookSet:
    """The active hooks, and what was left out and why (shown by /hooks and once at start)."""

    hooks: tuple[Hook, ...] = ()
    notes: tuple[str, ...] = ()
    # The project's file left unread (the folder is not trusted): said by agent/config/trust.py's
    # one line at start, listed again by /hooks.
    ignored: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # the files the hooks were read from

    def matching(self, event: str, names: tuple[str, ...] = ()) -> list[Hook]:
        """Hooks of `event` that match, each command once (the first file's entry wins)."""
        seen: set[str] = set()
        found = []
        for hook in self.hooks:
            if hook.event == event and hook.command not in seen and hook.matches(names):
                seen.add(hook.command)
                found.append(hook)
        return found

    def has(self, event: str) -> bool:
        return any(hook.event == event for hook in self.hooks)


def load_hooks(environ: Mapping[str, str], workspace: Path, trusted: bool) -> HookSet:
    """The user's hooks, then the project's when its folder is trusted."""
    hooks: list[Hook] = []
    notes: list[str] = []
    files: list[str] = []
    ignored: list[str] = []
    user = user_config_dir(environ)
    places = [user / "hooks.json"] if user else []
    project = workspace / PROJECT_HOOKS
    if project.is_file() and not trusted:
        ignored.append(f"ignored {project}: this folder is not trusted, so its hooks do not run")
    elif project not in places:
        places.append(project)
    for path in places:
        if path.is_file():
            found, skipped = parse_hooks(
                _read(path), str(path), user=path == places[0] and bool(user)
            )
            hooks += found
            notes += skipped
            files.append(str(path))
    return HookSet(tuple(hooks), tuple(notes), tuple(ignored), tuple(files))


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read hooks ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid JSON: {exc}") from None


def parse_hooks(doc: Any, source: str, *, user: bool = False) -> tuple[list[Hook], list[str]]:
    """`{"hooks": {Event: [{"matcher": str, "hooks": [{"type": "command", "command": str,
    "timeout": seconds}]}]}}` -> hooks, and notes on what was skipped. A shape that cannot
    be what the user meant is a ConfigError naming the key."""
    if not isinstance(doc, dict) or not isinstance(doc.get("hooks", {}), dict):
        raise ConfigError(f'{source}: expected an object with a "hooks" object')
    hooks: list[Hook] = []
    notes: list[str] = []
    for event, groups in doc.get("hooks", {}).items():
        where = f"{source}: hooks.{event}"
        if event not in EVENTS:
            notes.append(f"{where}: no such event here (skipped; events: {', '.join(EVENTS)})")
            continue
        if not isinstance(groups, list):
            raise ConfigError(f"{where}: must be a list of {{matcher, hooks}} objects")
        for index, group in enumerate(groups):
            found, skipped = _parse_group(event, group, f"{where}[{index}]", source, user)
            hooks += found
            notes += skipped
    return hooks, notes


def _parse_group(
    event: str, group: Any, where: str, source: str, user: bool
) -> tuple[list[Hook], list[str]]:
    if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
        raise ConfigError(f'{where}: must be an object with a "hooks" list')
    matcher = group.get("matcher", "")
    if not isinstance(matcher, str):
        raise ConfigError(f"{where}.matcher: must be a string")
    if matcher not in ("", "*") and not _PLAIN.match(matcher):
        try:
            re.compile(matcher)
        except re.error as exc:
            raise ConfigError(f"{where}.matcher: not a valid regular expression ({exc})") from None
    hooks: list[Hook] = []
    notes: list[str] = []
    for index, entry in enumerate(group["hooks"]):
        at = f"{where}.hooks[{index}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{at}: must be an object")
        kind = entry.get("type", "command")
        if kind != "command":
            notes.append(f"{at}: type {kind!r} is not supported here (skipped; use command)")
            continue
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{at}.command: required (the command line to run)")
        timeout = entry.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"{at}.timeout: must be a positive number of seconds")
        hooks.append(Hook(event, command, matcher, float(timeout), source, user))
    return hooks, notes
