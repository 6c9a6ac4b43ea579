"""The trust question: what a folder's own files would do, one line each, as the user is
shown it before trusting the folder (the REPL's question, `run_mcp.py trust`).

Every server's command line or URL as written, the variables of the user's it would take,
the environment it sets (loader variables with their values), its envFiles and VS Code
`inputs`; a model endpoint and whose key would go to it; a telemetry endpoint; hooks;
instructions files, sub-agent definitions and custom commands. Each file is read with the
agent's own reader, so what is shown is what would be loaded; one it cannot read is listed
as unreadable, and trust.remember refuses a "yes" for it. Deciding, remembering and
digesting a folder stay in agent/config/trust.py, whose Trust and Question this fills.

Imports the standard library, agent.common and its config siblings (trust, clients,
dialects, files, instruction_files, server_env); trust.py does not import it back.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.common.errors import ConfigError
from agent.common.redact import PATTERNS_ONLY
from agent.config.clients import read_client_file
from agent.config.dialects import Dialects, read_env_file
from agent.config.files import env_overrides, from_file
from agent.config.instruction_files import said_in_question
from agent.config.server_env import is_loader_variable
from agent.config.trust import HASHED_BYTES, WORKSPACE_FILES, Question, Trust

SHOWN = 240  # characters of one value in the question (beginning and end kept)
# ${VAR}, ${VAR:-default} (ours) and ${env:VAR} (VS Code's, Cursor's): the user's variables.
_VAR = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")
_CLIENT_WORDS = {"workspaceFolder", "workspaceFolderBasename", "userHome", "pathSeparator"}


class _CannotShow(Exception):
    """A file of the folder that the question cannot read (or show): the reason."""


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
