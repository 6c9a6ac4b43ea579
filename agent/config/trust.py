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

A remembered "yes" is kept with a digest of each of the folder's files (and of the envFiles
in it that servers read) and the lines the question showed: trust is given to what the
files were, not to the path. When they change (a hook added, a server's command edited,
an `AGENTS.md` written) the folder is untrusted again until the user answers once more,
shown what changed. Its instructions files (agent/config/instruction_files.py: its own and
its parents' up to the project's root) are among its files: they become the model's
instructions, prompt text the folder's authors control. The question itself (what each
file would do, read with the agent's own reader) is agent/config/trust_listing.py; a "yes"
for a file the question cannot read is refused here: it was not shown.

Standard library only below the config layer: config_build.build_settings calls `decide`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import stat
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.common.errors import ConfigError
from agent.common.private import private_folder
from agent.config.files import PROJECT_CLIENT_FILES, user_config_dir
from agent.config.instruction_files import workspace_files

TRUST_ENV = "MCP_AGENT_TRUST_WORKSPACE"
TRUST_FLAG = "--trust-workspace"
STORE_NAME = "trusted-folders.json"
# The working directory's own files the agent reads once the folder is trusted, and what
# kind each is (for the question that shows what they would do). A new reader of the
# working directory adds its files here, and checks Settings.workspace_trusted.
WORKSPACE_FILES: dict[
    str, Literal["settings", "servers", "hooks", "agents", "commands", "other"]
] = {
    "config/config.toml": "settings",
    "config/mcp.json": "servers",
    ".mcp-agent/skills": "other",  # agent/extensions/skill_files.py PROJECT_FOLDERS
    ".claude/skills": "other",
    "config/hooks.json": "hooks",  # agent/extensions/hook_files.py: commands run around tool calls
    ".claude/agents": "agents",  # agent/extensions/agent_files.py: sub-agents' system prompts
    ".claude/commands": "commands",  # agent/extensions/command_files.py: /NAME requests
    ".gemini/commands": "commands",
    **{name: "servers" for name in PROJECT_CLIENT_FILES},  # .mcp.json, .vscode/mcp.json…
}
HASHED_BYTES = 1 << 20  # a bigger file is known by its size and time, not read whole
HASHED_FILES = 2000  # files of one folder (a skills folder) digested, the rest counted
HASHED_TOTAL = 16 << 20  # bytes of one folder read for its digest; later files by size and time

Answer = Literal["trust", "never"]


@dataclass(frozen=True)
class Trust:
    """Whether a folder's own files may be used, why, and which it holds."""

    folder: Path  # real path
    trusted: bool
    reason: str  # empty when not trusted
    never: bool  # the user answered "never" for this folder
    files: tuple[str, ...]  # its own files present (WORKSPACE_FILES), relative
    # Its envFiles that servers would read (relative when inside it; agent/config/dialects.py).
    env_files: tuple[str, ...] = ()
    digests: tuple[tuple[str, str], ...] = ()  # each of files and env_files: its digest
    # Trusted once, but these files changed since (added, edited or removed) ...
    changed: tuple[str, ...] = ()
    was: tuple[str, ...] = ()  # ... and what the question showed when it was trusted
    # Its instructions files (AGENTS.md...), relative: `../AGENTS.md` is its parent's.
    instructions: tuple[str, ...] = ()

    def unread(self, *, named_settings: Path | None, named_servers: Path | None) -> tuple[str, ...]:
        """The files left unread because the folder is not trusted: none when it is, nor
        those a file named on the command line replaces (--config: the settings file,
        --mcp-config: the servers files), which trust would not bring in either. Its
        envFiles are read by no one until it is trusted, whichever servers file names them."""
        if self.trusted:
            return ()
        named = {"settings": named_settings, "servers": named_servers}
        own = tuple(f for f in self.files if named.get(WORKSPACE_FILES[f]) is None)
        return own + self.instructions + self.env_files

    def all_files(self) -> tuple[str, ...]:
        """Every file of it the agent would read once trusted, as the question lists them."""
        return (*self.files, *self.instructions, *self.env_files)


@dataclass(frozen=True)
class Question:
    """What the trust question shows of a folder's files, one line each, and those it
    could not read (name, why): trust is not remembered for a file nobody was shown."""

    lines: list[str]
    unreadable: tuple[tuple[str, str], ...] = ()

    def refusal(self, folder: Path) -> str:
        """The one line that says why trust cannot be remembered, and what the user can do."""
        return (
            f"cannot trust {folder}: {self.unreadable_said()}; fix it, or run with the folder "
            "untrusted (its files unread)"
        )

    def unreadable_said(self) -> str:
        return "; ".join(f"{name} cannot be read ({why})" for name, why in self.unreadable)


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
    env_files: tuple[str, ...] = (),
) -> Trust:
    """Whether `folder` (the working directory) is trusted, and the files it holds.

    `env_files`: the envFiles of it that servers would read (config_build.workspace_trust
    finds them). A remembered "yes" holds only while every file digests as it did then.
    """
    key = real(folder)
    present = tuple(name for name in WORKSPACE_FILES if (key / name).exists())
    instructions = tuple(os.path.relpath(path, key) for path in workspace_files(key))
    # settle() hands back every unread file that is not one of WORKSPACE_FILES as envFiles
    env_files = tuple(name for name in env_files if name not in instructions)
    remembered = load_store(state_dir).get(str(key))
    names = (*present, *instructions, *env_files)
    digests = tuple((name, _digest(key / name)) for name in names)
    kept = load_contents(state_dir).get(str(key), {}) if remembered == "trust" else {}
    before, now = kept.get("files", {}), dict(digests)
    changed = tuple(sorted(n for n in {*before, *now} if before.get(n) != now.get(n)))
    reasons = [
        (own_root is not None and key == real(own_root), "the agent's own folder"),
        (flag, TRUST_FLAG),
        (environ.get(TRUST_ENV, "").lower() in ("1", "true", "yes"), TRUST_ENV),
        (remembered == "trust" and not changed, f"remembered in {state_dir / STORE_NAME}"),
        (_listed(key, environ), "[trust] folders of the user-level config.toml"),
    ]
    reason = next((why for ok, why in reasons if ok), "")
    was = tuple(kept.get("effects", ())) if changed else ()
    return Trust(
        key,
        bool(reason),
        reason,
        remembered == "never",
        present,
        env_files,
        digests,
        changed if remembered == "trust" else (),
        was,
        instructions,
    )


def _digest(path: Path) -> str:
    """What a file (or a folder's files, by relative name) holds now, as one sha256."""
    whole = hashlib.sha256()
    if not path.is_dir():
        return _file_digest(path)
    count, budget = 0, HASHED_TOTAL
    for top, folders, names in os.walk(path):  # links to folders are not followed
        folders.sort()
        for name in sorted(names):
            count += 1
            if count > HASHED_FILES:
                whole.update(b"\0and more")
                return whole.hexdigest()
            item = Path(top) / name
            digest = _file_digest(item, read=budget > 0)
            budget -= _size(item)
            whole.update(f"{item.relative_to(path)}\0{digest}\0".encode())
    return whole.hexdigest()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _file_digest(path: Path, read: bool = True) -> str:
    """A file's sha256; past the size (or the folder's budget) its size and time."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return f"not a file: {stat.S_IFMT(info.st_mode)}"
        if info.st_size > HASHED_BYTES or not read:
            return f"size {info.st_size}, modified {info.st_mtime_ns}"
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return f"unreadable: {exc.errno}"


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


def _load(state_dir: Path) -> dict[str, Any]:
    try:
        doc = json.loads((state_dir / STORE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def load_store(state_dir: Path) -> dict[str, Answer]:
    """Remembered answers by real path; an unreadable or foreign-shaped file is empty."""
    folders = _load(state_dir).get("folders")
    if not isinstance(folders, dict):
        return {}
    return {k: v for k, v in folders.items() if v in ("trust", "never")}


def load_contents(state_dir: Path) -> dict[str, dict[str, Any]]:
    """What each trusted folder's files were when it was trusted, by real path: `files`
    (name -> digest) and `effects` (the question's lines). A foreign shape counts as none
    (so the folder is asked about again)."""
    contents = _load(state_dir).get("contents")
    if not isinstance(contents, dict):
        return {}
    kept = {}
    for folder, entry in contents.items():
        files = entry.get("files") if isinstance(entry, dict) else None
        effects = entry.get("effects") if isinstance(entry, dict) else None
        if isinstance(files, dict) and all(isinstance(v, str) for v in files.values()):
            lines = [e for e in effects if isinstance(e, str)] if isinstance(effects, list) else []
            kept[folder] = {"files": files, "effects": lines}
    return kept


def remember(
    state_dir: Path,
    folder: Path,
    answer: Answer | None,
    trust: Trust | None = None,
    shown: Question | None = None,
) -> Path:
    """Keep `answer` for `folder` (None forgets it); the file is 0600 in a 0700 folder.

    A "trust" is kept with what `trust` (decided for this folder) found its files to be,
    and the lines `shown` to the user: a later change asks again (see `decide`). A "trust"
    for files the question could not read is refused (ConfigError): they were not shown,
    and the digest could leave out the envFiles they name.
    """
    if answer == "trust" and shown is not None and shown.unreadable:
        raise ConfigError(shown.refusal(real(folder)))
    store = load_store(state_dir)
    contents = load_contents(state_dir)
    key = str(real(folder))
    store.pop(key, None)
    contents.pop(key, None)
    if answer is not None:
        store[key] = answer
    if answer == "trust" and trust is not None:
        contents[key] = {"files": dict(trust.digests), "effects": shown.lines if shown else []}
    private_folder(state_dir)
    path = state_dir / STORE_NAME
    fd, temp = tempfile.mkstemp(dir=state_dir, prefix=f".{STORE_NAME}.")
    doc = {"folders": dict(sorted(store.items())), "contents": dict(sorted(contents.items()))}
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:  # mkstemp: 0600 already
            json.dump(doc, fh, indent=2)
            fh.write("\n")
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


# --------------------------------------------------------------------------- telling the user


def hint(
    trust: Trust, environ: Mapping[str, str] | None = None, shown: Question | None = None
) -> str:
    """The one stderr line of a run that leaves the folder's files unread (`shown`: the
    question's reading of them; one it cannot read must be fixed before any trust)."""
    files = ", ".join(trust.all_files())
    why = "you chose never to trust this folder" if trust.never else "this folder is not trusted"
    again = ""
    if trust.changed:
        why = f"its files changed since you trusted it: {', '.join(trust.changed)}"
        again = " again (to trust them as they are now)"
    if shown is not None and shown.unreadable and not trust.never:
        return (
            f"note: ignoring {files} of {trust.folder} ({why}); to trust it, first fix what "
            f"the trust question cannot read: {shown.unreadable_said()}"
        )
    user = user_config_dir(environ) if environ is not None else None
    where = str(user / "config.toml") if user else "your user-level config.toml"
    return (
        f"note: ignoring {files} of {trust.folder} ({why}); to use them pass {TRUST_FLAG}, "
        f"run 'run_mcp.py trust {shlex.quote(str(trust.folder))}'{again}, or list the folder "
        f"in [trust] folders of {where}"
    )
