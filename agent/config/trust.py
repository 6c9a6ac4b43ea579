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
instructions, prompt text the folder's authors control. Each
file is read with the agent's own reader (a `.vscode/mcp.json` with comments as VS Code
writes it); a "yes" for a file the question cannot read is refused: it was not shown.

Standard library only below the config layer: config_build.build_settings calls `decide`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
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
from agent.common.redact import PATTERNS_ONLY
from agent.config.clients import read_client_file
from agent.config.dialects import Dialects, read_env_file
from agent.config.files import PROJECT_CLIENT_FILES, env_overrides, from_file, user_config_dir
from agent.config.instruction_files import said_in_question, workspace_files
from agent.config.server_env import is_loader_variable

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
SHOWN = 240  # characters of one value in the question (beginning and end kept)
# ${VAR}, ${VAR:-default} (ours) and ${env:VAR} (VS Code's, Cursor's): the user's variables.
_VAR = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")
_CLIENT_WORDS = {"workspaceFolder", "workspaceFolderBasename", "userHome", "pathSeparator"}
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


class _CannotShow(Exception):
    """A file of the folder that the question cannot read (or show): the reason."""


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


def describe(trust: Trust, environ: Mapping[str, str]) -> list[str]:
    """The question's lines (see `question`)."""
    return question(trust, environ).lines


def question(trust: Trust, environ: Mapping[str, str]) -> Question:
    """What the folder's files would do, one line each: every server's command line or
    URL as written (no ${VAR} expanded), the variables of yours it would take, the
    environment it sets (loader variables such as PYTHONPATH with their values), its
    envFiles and the questions it would ask; a changed model endpoint and whose key would
    go to it (decided as the settings decide it), a telemetry endpoint; hooks; the other
    settings. Secrets masked (`with_changes` adds what changed since a "yes").

    Each file is read with the reader the agent loads it with (a servers file as
    agent/config/clients.py reads it: comments, trailing commas, VS Code's `servers`...);
    one it cannot read is said so and listed in `unreadable`.
    """
    lines: list[str] = []
    unreadable: list[tuple[str, str]] = []
    kinds = [
        *((n, WORKSPACE_FILES[n]) for n in trust.files),
        *((n, "instructions") for n in trust.instructions),
        *((n, None) for n in trust.env_files),
    ]
    for name, kind in kinds:
        try:
            lines += [f"{name}: {line}" for line in _file_lines(trust, name, kind, environ)]
        except _CannotShow as exc:
            lines.append(f"{name}: unreadable ({exc})")
            unreadable.append((name, PATTERNS_ONLY(str(exc))))
    return Question([PATTERNS_ONLY(line) for line in lines], tuple(unreadable))


def _file_lines(trust: Trust, name: str, kind: str | None, environ: Mapping[str, str]) -> list[str]:
    """One file's lines (`kind` None: one of its envFiles); _CannotShow when it cannot be
    read, with the reason its reader gave."""
    path = trust.folder / name
    if kind == "other":
        return ["present (read by the agent once trusted)"]
    if kind == "agents":
        return [_agents_said(path)]
    if kind == "commands":
        return [_commands_said(path)]
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block the read
            return ["not a regular file (the agent does not read it)"]
        if kind == "instructions":  # read in part when big (agent/extensions/instructions.py)
            return [said_in_question(path, info.st_size, _short)]
        if info.st_size > HASHED_BYTES:
            raise _CannotShow(f"too big to show: {info.st_size} bytes")  # nor digested whole
        if kind is None:
            return [f"an envFile your own servers read: {_env_file_shown(path)}"]
        if kind == "servers":
            return _servers(path, trust.folder, environ)
        if kind == "settings":
            return _settings(path, environ)
        return _hooks(path)
    except OSError as exc:
        raise _CannotShow(exc.strerror or exc.__class__.__name__) from None
    except ConfigError as exc:  # the message names the file first: the reason follows
        raise _CannotShow(str(exc).removeprefix(f"{path}: ")) from None
    except ValueError as exc:  # JSON, TOML, UTF-8
        raise _CannotShow(f"{exc.__class__.__name__}: {exc}") from None


def _agents_said(folder: Path) -> str:
    """The sub-agent definitions a folder holds: each file's text would become the system
    prompt of a sub-agent the model may start (`task`)."""
    try:
        names = sorted(p.name for p in folder.iterdir() if p.suffix == ".md")
    except OSError as exc:
        raise _CannotShow(exc.strerror or exc.__class__.__name__) from None
    listed = ", ".join(_short(n) for n in names[:20]) + (" …" if len(names) > 20 else "")
    return (
        f"sub-agent definitions ({listed or 'none'}): each file's text becomes the system "
        "prompt of a sub-agent the model may start"
    )


def _commands_said(folder: Path) -> str:
    """The custom commands a folder holds (a subfolder's by `folder:name`, as they are
    typed): each file's text is sent as the request, and its `allowed-tools` run without
    asking in that turn. Listed as agent/extensions/command_files.py walks them."""
    names: list[str] = []
    for top, subfolders, files in os.walk(folder):  # links to folders are not followed
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        inside = Path(top).relative_to(folder).parts
        names += [
            ":".join([*inside, Path(f).stem]) for f in sorted(files) if f.endswith((".md", ".toml"))
        ]
        if len(names) > 20:
            break
    shown = sorted(names[:20])
    listed = ", ".join("/" + _short(n) for n in shown) + (" …" if len(names) > 20 else "")
    return (
        f"custom commands ({listed or 'none'}): each file's text becomes your request when "
        "you type its /NAME, and the tools its allowed-tools names run without asking then"
    )


def with_changes(trust: Trust, effects: list[str]) -> list[str]:
    """The question's lines: for a folder trusted before whose files changed since, which
    files and what they would do differently (+ new, - gone) come before all of `effects`."""
    if not trust.changed:
        return effects
    gone = [f"- {line}" for line in trust.was if line not in effects]
    new = [f"+ {line}" for line in effects if line not in trust.was]
    head = f"changed since you trusted it: {', '.join(trust.changed)}"
    return [head, *new, *gone, "all it would do now:", *effects]


def _short(value: Any) -> str:
    """A value as written; a long one keeps its beginning and its end (padding in the
    middle of a command line must not push what it really does out of sight)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= SHOWN:
        return text
    half = SHOWN // 2
    return f"{text[:half]} …({len(text) - 2 * half} characters)… {text[-half:]}"


def _servers(path: Path, folder: Path, environ: Mapping[str, str]) -> list[str]:
    """Each server of a servers file, read as the agent loads it (load_mcp_config)."""
    found = read_client_file(path, path.read_text(encoding="utf-8"), folder)
    lines = _inputs(found.doc.get("inputs"))
    if not found.servers:
        return [*lines, "no servers"]
    for name, raw in found.servers.items():
        if not isinstance(raw, dict):
            lines.append(f"server {name!r}: (not an object)")
            continue
        if "command" in raw:
            argv = [str(raw.get("command")), *(str(a) for a in raw.get("args") or [])]
            what = f"runs {_short(shlex.join(argv))}"
            if raw.get("cwd"):
                what += f" in {_short(raw['cwd'])}"
        else:
            what = f"connects to {_short(raw.get('url', raw.get('serverUrl')))}"
        refs = sorted(set(_env_refs(raw)))
        if refs:
            what += f" (with your {', '.join(refs)})"
        if isinstance(raw.get("env"), dict) and raw["env"]:
            what += f"; sets {_variables(raw['env'])}"
        if isinstance(raw.get("envFile"), str):
            effect = _env_file_of(raw["envFile"], folder, environ)
            what += f"; envFile {_short(raw['envFile'])}: {effect}"
        lines.append(f"server {name!r} {what}")
    return lines


def _inputs(inputs: Any) -> list[str]:
    """VS Code's `inputs`: each is a question the user would be asked at start."""
    lines = []
    for item in inputs if isinstance(inputs, list) else []:
        if isinstance(item, dict) and "id" in item:
            hidden = ", hidden" if item.get("password") is True else ""
            asked = _short(str(item.get("description") or item["id"]))
            lines.append(f"asks you for {asked} (input {_short(str(item['id']))}{hidden})")
    return lines


def _variables(values: Mapping[str, Any]) -> str:
    """Variables set for a server: names, and a loader variable (code it names runs in the
    server: PYTHONPATH, NODE_OPTIONS, LD_PRELOAD...) with its value."""
    plain = [str(k) for k in values if not is_loader_variable(str(k))]
    loaders = [f"{k}={_short(v)}" for k, v in values.items() if is_loader_variable(str(k))]
    said = f"environment {', '.join(plain)}" if plain else ""
    if loaders:
        said += "; " if said else ""
        said += f"loader variables {', '.join(loaders)} (code they name runs in the server)"
    return said or "no variables"


def _env_file_of(written: str, folder: Path, environ: Mapping[str, str]) -> str:
    """A folder's server's envFile: what it sets (one of the folder's), or that it is
    one of the user's files whose every variable would go to that server."""
    dialects = Dialects(folder, environ)
    name = dialects.words(written)
    place = dialects.env_file_place(name)
    if not dialects.of_workspace(written, name, place):
        return (
            f"a file outside this folder: every variable in {_short(str(place))} goes to the server"
        )
    try:  # one that cannot be shown is in the folder's envFiles too: trust is refused there
        return _env_file_shown(place)
    except _CannotShow as exc:
        return f"unreadable ({exc})"


def _env_file_shown(path: Path) -> str:
    """A dotenv file's variables, as `_variables` says them (read with the reader servers
    use); _CannotShow when it cannot be read or is too big to show whole."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block the read
            raise _CannotShow("not a regular file")
        if info.st_size > HASHED_BYTES:
            raise _CannotShow(f"too big to show: {info.st_size} bytes")
        return _variables(read_env_file(path, str(path)))
    except OSError as exc:
        raise _CannotShow(exc.strerror or exc.__class__.__name__) from None
    except ConfigError as exc:  # "PATH: PATH line 3 is not KEY=value": the reason
        raise _CannotShow(str(exc).removeprefix(f"{path}: ").removeprefix(f"{path} ")) from None


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
    """The environment variables a value names as ${VAR}, ${VAR:-default} or ${env:VAR}."""
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in _env_refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _env_refs(item)]
    if not isinstance(value, str):
        return []
    return [name for name in _VAR.findall(value) if name not in _CLIENT_WORDS]


def _with_refs(value: Any) -> str:
    refs = sorted(set(_env_refs(value)))
    return f" (with your {', '.join(refs)})" if refs else ""


def _settings(path: Path, environ: Mapping[str, str]) -> list[str]:
    with path.open("rb") as fh:
        doc = tomllib.load(fh)
    lines = []
    for section, table in doc.items():
        if not isinstance(table, dict):
            continue
        if section == "llm":
            lines += _llm(table, environ)
            continue
        for key, value in table.items():
            if section == "telemetry" and key == "endpoint":
                lines.append(_telemetry_endpoint(value, environ))
            elif section == "telemetry" and key == "capture_content" and value is True:
                lines.append(
                    "[telemetry] capture_content = true: your prompts, tool arguments and "
                    "results go to the telemetry endpoint (redacted)"
                )
            else:
                lines.append(_setting(section, key, value))
    return lines or ["no settings"]


def _setting(section: str, key: str, value: Any) -> str:
    shown = "(set)" if "key" in key.lower() or "secret" in key.lower() else _short(value)
    return f"[{section}] {key} = {shown}{_with_refs(value)}"


def _llm(table: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """[llm] as the settings would use it: the environment's OPENAI_* win over the file
    (config_files.from_file, the rule build_settings applies), so the key that goes to the
    folder's endpoint is yours whenever OPENAI_API_KEY is set, its own api_key or not."""
    overrides = env_overrides(environ)
    used = from_file(table, overrides)
    lines = []
    for key, value in table.items():
        if key == "base_url" and key not in used:
            lines.append(f"model endpoint {_short(value)} (your OPENAI_BASE_URL overrides it)")
        elif key == "base_url":
            sent = _key_sent(used, overrides)
            to = f"{sent} would be sent to it" if sent else "no key is sent to it"
            lines.append(f"model endpoint {_short(value)}{_with_refs(value)} ({to})")
        elif key == "api_key" and key not in used:
            lines.append("[llm] api_key = (set; your OPENAI_API_KEY wins over it)")
        else:
            lines.append(_setting("llm", key, value))
    return lines


def _key_sent(used: Mapping[str, Any], overrides: Mapping[str, Any]) -> str:
    """Whose key the model endpoint would receive, given the values in effect."""
    if "api_key" in overrides:
        return "your OPENAI_API_KEY"
    if "api_key" not in used:
        return ""
    refs = sorted(set(_env_refs(used["api_key"])))
    return f"your {', '.join(refs)}" if refs else "the api_key written in this file"


def _telemetry_endpoint(value: Any, environ: Mapping[str, str]) -> str:
    """[telemetry] endpoint: it wins over OTEL_EXPORTER_OTLP_*ENDPOINT
    (agent/extensions/telemetry.py), and the exporter sends
    the OTEL_EXPORTER_OTLP_*HEADERS of the environment with it."""
    line = (
        f"telemetry endpoint {_short(value)}{_with_refs(value)}: traces of your sessions go there"
    )
    headers = [
        name
        for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        if environ.get(name)
    ]
    if headers:
        line += f", with your {', '.join(headers)}"
    return line
