"""Workspace trust: a folder the user merely runs the agent in does not configure it.

A cloned repository's `config/mcp.json` would otherwise start its server command at launch
(with `${GITHUB_TOKEN}` of the user's environment expanded into it), and its `[llm]
base_url` would receive the user's OPENAI_API_KEY. So the working directory's own files
are read only once the folder is trusted, the way editors and other agents do it.

Trusted without asking: the agent's own folder (the working directory is the checkout
holding run_mcp.py), and the files the user chose (the user-level folder, paths named on
the command line: those never go through here). A folder becomes trusted by
`--trust-workspace`, by `MCP_AGENT_TRUST_WORKSPACE=1`, by `run_mcp.py trust [PATH]` or a
"yes" in the REPL (remembered per folder, by its real path, in the user's state), or by
`[trust] folders` in the user-level config.toml (a listed folder and every folder below
it). "Never" is remembered too: the REPL stops asking.

Standard library only below the config layer: config_build.build_settings calls `decide`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.config_files import PROJECT_CLIENT_FILES, user_config_dir
from agent.errors import ConfigError
from agent.private import private_folder
from agent.redact import PATTERNS_ONLY

TRUST_ENV = "MCP_AGENT_TRUST_WORKSPACE"
TRUST_FLAG = "--trust-workspace"
STORE_NAME = "trusted-folders.json"
# The working directory's own files the agent reads once the folder is trusted, and what
# kind each is (for the question that shows what they would do). A new reader of the
# working directory adds its files here, and checks Settings.workspace_trusted.
WORKSPACE_FILES: dict[str, Literal["settings", "servers", "hooks", "other"]] = {
    "config/config.toml": "settings",
    "config/mcp.json": "servers",
    ".mcp-agent/skills": "other",  # agent/skill_files.py PROJECT_FOLDERS
    ".claude/skills": "other",
    "config/hooks.json": "hooks",  # agent/hook_files.py: commands run around tool calls
    **{name: "servers" for name in PROJECT_CLIENT_FILES},  # .mcp.json, .vscode/mcp.json…
}
SHOWN = 240  # characters of one value in the question (beginning and end kept)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")

Answer = Literal["trust", "never"]


@dataclass(frozen=True)
class Trust:
    """Whether a folder's own files may be used, why, and which it holds."""

    folder: Path  # real path
    trusted: bool
    reason: str  # empty when not trusted
    never: bool  # the user answered "never" for this folder
    files: tuple[str, ...]  # its own files present (WORKSPACE_FILES), relative

    def unread(self, *, named_settings: Path | None, named_servers: Path | None) -> tuple[str, ...]:
        """The files left unread because the folder is not trusted: none when it is, nor
        those a file named on the command line replaces (--config: the settings file,
        --mcp-config: the servers files), which trust would not bring in either."""
        if self.trusted:
            return ()
        named = {"settings": named_settings, "servers": named_servers}
        return tuple(f for f in self.files if named.get(WORKSPACE_FILES[f]) is None)


def real(path: Path) -> Path:
    """The key of a folder: absolute, symlinks resolved."""
    return Path(os.path.realpath(path.expanduser()))


def decide(
    folder: Path,
    environ: Mapping[str, str],
    state_dir: Path,
    *,
    flag: bool = False,
    own_root: Path | None = None,
) -> Trust:
    """Whether `folder` (the working directory) is trusted, and the files it holds."""
    key = real(folder)
    present = tuple(name for name in WORKSPACE_FILES if (key / name).exists())
    remembered = load_store(state_dir).get(str(key))
    reasons = [
        (own_root is not None and key == real(own_root), "the agent's own folder"),
        (flag, TRUST_FLAG),
        (environ.get(TRUST_ENV, "").lower() in ("1", "true", "yes"), TRUST_ENV),
        (remembered == "trust", f"remembered in {state_dir / STORE_NAME}"),
        (_listed(key, environ), "[trust] folders of the user-level config.toml"),
    ]
    reason = next((why for ok, why in reasons if ok), "")
    return Trust(key, bool(reason), reason, remembered == "never", present)


def _listed(folder: Path, environ: Mapping[str, str]) -> bool:
    """`[trust] folders = [...]` of the user-level config.toml: each folder and below."""
    user = user_config_dir(environ)
    if user is None:
        return False
    path = user / "config.toml"
    try:
        with path.open("rb") as fh:
            table = tomllib.load(fh).get("trust", {})
    except (OSError, tomllib.TOMLDecodeError):
        return False  # the settings loader reports a broken file; here it trusts nothing
    folders = table.get("folders", []) if isinstance(table, dict) else None
    if not isinstance(folders, list) or not all(isinstance(f, str) and f for f in folders):
        raise ConfigError(f'{path}: [trust] folders must be a list of folders, e.g. ["~/src"]')
    listed = [real(Path(os.path.expandvars(f))) for f in folders]
    return any(folder == p or folder.is_relative_to(p) for p in listed)


# --------------------------------------------------------------------------- the store


def load_store(state_dir: Path) -> dict[str, Answer]:
    """Remembered answers by real path; an unreadable or foreign-shaped file is empty."""
    try:
        doc = json.loads((state_dir / STORE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    folders = doc.get("folders") if isinstance(doc, dict) else None
    if not isinstance(folders, dict):
        return {}
    return {k: v for k, v in folders.items() if v in ("trust", "never")}


def remember(state_dir: Path, folder: Path, answer: Answer | None) -> Path:
    """Keep `answer` for `folder` (None forgets it); the file is 0600 in a 0700 folder."""
    store = load_store(state_dir)
    if answer is None:
        store.pop(str(real(folder)), None)
    else:
        store[str(real(folder))] = answer
    private_folder(state_dir)
    path = state_dir / STORE_NAME
    fd, temp = tempfile.mkstemp(dir=state_dir, prefix=f".{STORE_NAME}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:  # mkstemp: 0600 already
            json.dump({"folders": dict(sorted(store.items()))}, fh, indent=2)
            fh.write("\n")
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


# --------------------------------------------------------------------------- telling the user


def hint(trust: Trust, environ: Mapping[str, str] | None = None) -> str:
    """The one stderr line of a run that leaves the folder's files unread."""
    files = ", ".join(trust.files)
    why = "you chose never to trust this folder" if trust.never else "this folder is not trusted"
    user = user_config_dir(environ) if environ is not None else None
    where = str(user / "config.toml") if user else "your user-level config.toml"
    return (
        f"note: ignoring {files} of {trust.folder} ({why}); to use them pass {TRUST_FLAG}, "
        f"run 'run_mcp.py trust {shlex.quote(str(trust.folder))}', or list the folder in "
        f"[trust] folders of {where}"
    )


def describe(trust: Trust, environ: Mapping[str, str]) -> list[str]:
    """What the folder's files would do, one line each: every server's command line or
    URL as written (no ${VAR} expanded), a changed model endpoint and whether the
    environment's key would go to it, the other settings. Secrets masked."""
    lines: list[str] = []
    for name in trust.files:
        kind = WORKSPACE_FILES[name]
        path = trust.folder / name
        try:
            if kind == "servers":
                lines += [f"{name}: {line}" for line in _servers(path)]
            elif kind == "settings":
                lines += [f"{name}: {line}" for line in _settings(path, environ)]
            elif kind == "hooks":
                lines += [f"{name}: {line}" for line in _hooks(path)]
            else:
                lines.append(f"{name}: present (read by the agent once trusted)")
        except (OSError, ValueError) as exc:
            lines.append(f"{name}: unreadable ({exc.__class__.__name__})")
    return [PATTERNS_ONLY(line) for line in lines]


def _short(value: Any) -> str:
    """A value as written; a long one keeps its beginning and its end (padding in the
    middle of a command line must not push what it really does out of sight)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= SHOWN:
        return text
    half = SHOWN // 2
    return f"{text[:half]} …({len(text) - 2 * half} characters)… {text[-half:]}"


def _servers(path: Path) -> list[str]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    servers = doc.get("mcpServers", doc.get("servers")) if isinstance(doc, dict) else None
    if not isinstance(servers, dict) or not servers:
        return ["no servers"]
    lines = []
    for name, raw in servers.items():
        if not isinstance(raw, dict):
            lines.append(f"server {name!r}: (not an object)")
            continue
        if "command" in raw:
            argv = [str(raw.get("command")), *(str(a) for a in raw.get("args") or [])]
            what = f"runs {_short(shlex.join(argv))}"
            if raw.get("cwd"):
                what += f" in {_short(raw['cwd'])}"
        else:
            what = f"connects to {_short(raw.get('url'))}"
        refs = sorted(set(_env_refs(raw)))
        if refs:
            what += f" (with your {', '.join(refs)})"
        lines.append(f"server {name!r} {what}")
    return lines


def _hooks(path: Path) -> list[str]:
    """Each hook command and the event (and matcher) it would run on."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    events = doc.get("hooks") if isinstance(doc, dict) else None
    lines = []
    for event, groups in (events if isinstance(events, dict) else {}).items():
        for group in groups if isinstance(groups, list) else []:
            group = group if isinstance(group, dict) else {}
            matcher = group.get("matcher") or "*"
            for hook in group.get("hooks") or []:
                command = hook.get("command") if isinstance(hook, dict) else None
                if isinstance(command, str):
                    lines.append(f"on {event} ({_short(matcher)}) runs {_short(command)}")
    return lines or ["no hooks"]


def _env_refs(value: Any) -> list[str]:
    """The environment variables a value names as ${VAR} / ${VAR:-default}."""
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in _env_refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _env_refs(item)]
    if not isinstance(value, str):
        return []
    return _VAR.findall(value)


def _settings(path: Path, environ: Mapping[str, str]) -> list[str]:
    with path.open("rb") as fh:
        doc = tomllib.load(fh)
    lines = []
    for section, table in doc.items():
        if not isinstance(table, dict):
            continue
        for key, value in table.items():
            if section == "llm" and key == "base_url":
                line = f"model endpoint {_short(value)}"
                if environ.get("OPENAI_BASE_URL"):
                    line += " (your OPENAI_BASE_URL overrides it)"
                elif "api_key" not in table and environ.get("OPENAI_API_KEY"):
                    line += " (your OPENAI_API_KEY would be sent to it)"
                lines.append(line)
            elif "key" in key.lower() or "secret" in key.lower():
                lines.append(f"[{section}] {key} = (set)")
            else:
                lines.append(f"[{section}] {key} = {_short(value)}")
    return lines or ["no settings"]
