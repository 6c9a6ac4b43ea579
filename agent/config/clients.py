"""Other clients' whole files, each read the way that client reads it.

Claude Desktop, Cursor, Windsurf, Cline and Gemini CLI keep `mcpServers`; VS Code
`servers`; Claude Code's `~/.claude.json` keeps the user's `mcpServers` and, under
`projects`, each folder's own. Codex keeps `[mcp_servers.NAME]` tables in TOML, Zed
`context_servers` in JSON with comments, Goose `extensions` in YAML, opencode `mcp` with
`type: local|remote` and command arrays. Each becomes a set of mcpServers entries in our
words here, before agent/config/dialects.py reads the words those clients share
(`${input:}`, `envFile`, `serverUrl`, `autoApprove`) and agent/config/servers.py the rest.

A key of a known client that we do not read is said in one line naming the client and the
key, and a known client's file that holds no servers says so: never an "unknown key" error
for a file the user did not write for us, and never a silent drop.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.common import json_limits
from agent.common.errors import ConfigError
from agent.config import yaml_lite

# The name a user knows each client by, as it is said in a note.
LABELS = {
    "claude": "Claude Desktop",
    "claude-code": "Claude Code",
    "cursor": "Cursor",
    "vscode": "VS Code",
    "windsurf": "Windsurf",
    "cline": "Cline",
    "zed": "Zed",
    "codex": "Codex",
    "gemini": "Gemini CLI",
    "goose": "Goose",
    "opencode": "opencode",
}
_JSONC_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.S)
_GEMINI_VAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_OPENCODE_ENV = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class ClientFile:
    """A file's servers as mcpServers entries, and how to name where each came from."""

    client: str | None  # a key of LABELS, or None: our own format (or unknown)
    key: str  # the key the servers sit under, as the file writes it ("mcp_servers", ...)
    servers: dict[str, Any]
    doc: dict[str, Any] = field(default_factory=dict)  # for VS Code's `inputs`
    notes: list[str] = field(default_factory=list)


def client_of_path(path: Path) -> str | None:
    """The client whose file this is, by its name and folder (None: decided by content)."""
    name, parent = path.name.lower(), path.parent.name.lower()
    if path.suffix.lower() == ".toml":
        return "codex"
    if path.suffix.lower() in (".yaml", ".yml"):
        return "goose"
    if name == ".claude.json":
        return "claude-code"
    if name == "settings.json" and parent == ".gemini":
        return "gemini"
    if name == "settings.json" and parent in ("zed", ".zed"):
        return "zed"
    if name in ("opencode.json", "opencode.jsonc", "config.json") and parent == "opencode":
        return "opencode"
    if name.startswith("opencode.json"):
        return "opencode"
    if name == "mcp_config.json" and "windsurf" in str(path).lower():
        return "windsurf"
    if name == "cline_mcp_settings.json":
        return "cline"
    return None


def parse_json(text: str, path: Path) -> Any:
    """JSON, or JSON with comments and trailing commas (Zed, opencode, VS Code write it)."""
    try:
        return json_limits.loads(text)
    except json_limits.TooDeep as exc:
        raise ConfigError(f"{path}: {exc.msg}") from None
    except json.JSONDecodeError as exc:
        first = exc
    stripped = _JSONC_TOKEN.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else "", text)
    try:
        return json_limits.loads(stripped)
    except json.JSONDecodeError:
        raise ConfigError(f"{path}: invalid JSON at line {first.lineno}: {first.msg}") from None


def read_client_file(path: Path, text: str, workspace: Path) -> ClientFile:
    """The servers of a file in any client's format, as mcpServers entries."""
    client = client_of_path(path)
    if client == "codex":
        return _codex(_toml(text, path), path)
    if client == "goose":
        return _goose(yaml_lite.loads(text, str(path)), path)
    doc = parse_json(text, path)
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected an object with an 'mcpServers' object")
    if client == "zed" or (client is None and "context_servers" in doc):
        return _zed(doc, path)
    if client == "opencode" or (client is None and _looks_opencode(doc)):
        return _opencode(doc, path)
    if client == "claude-code":
        return _claude_code(doc, path, workspace)
    if client == "gemini" or (client is None and _has_http_url(doc)):
        return _gemini(doc, path)
    return _mcp_servers(doc, path, client)


def said_empty(found: ClientFile, path: Path) -> str:
    """The one line for a known client's file that holds no servers."""
    label = LABELS.get(found.client or "", "this file")
    return f"{label}'s {path} holds no servers (nothing under '{found.key}')"


# ----------------------------------------------------------------- mcpServers files


def _mcp_servers(doc: dict[str, Any], path: Path, client: str | None) -> ClientFile:
    """Claude Desktop / Cursor / Windsurf / Cline `mcpServers`, VS Code `servers`; a
    pasted fragment (`"chroma": {...}` without `mcpServers`) is read with a note."""
    key = "servers" if "mcpServers" not in doc and "servers" in doc else "mcpServers"
    if key in doc:
        if not isinstance(doc[key], dict):
            raise ConfigError(f"{path}: expected an object with an 'mcpServers' object")
        return ClientFile(client, key, dict(doc[key]), doc)
    if doc and all(_is_entry(v) for v in doc.values()):
        names = ", ".join(doc)
        note = f"{path}: no 'mcpServers' object: read its top-level entries as servers ({names})"
        return ClientFile(client, "mcpServers", dict(doc), {}, [note])
    if doc and client is None:
        found = ", ".join(repr(k) for k in list(doc)[:5])
        raise ConfigError(
            f"{path}: no 'mcpServers' object (found {found}); a server's entry needs "
            "'command' or 'url'"
        )
    return ClientFile(client, key, {}, doc)


def _is_entry(value: Any) -> bool:
    return isinstance(value, dict) and any(k in value for k in ("command", "url", "serverUrl"))


def _has_http_url(doc: dict[str, Any]) -> bool:
    servers = doc.get("mcpServers")
    return isinstance(servers, dict) and any(
        isinstance(v, dict) and "httpUrl" in v for v in servers.values()
    )


def _claude_code(doc: dict[str, Any], path: Path, workspace: Path) -> ClientFile:
    """`~/.claude.json`: the user's servers, then this folder's (Claude Code's local scope,
    which wins for a name in both, as in Claude Code)."""
    found = _mcp_servers({"mcpServers": doc.get("mcpServers") or {}}, path, "claude-code")
    projects = doc.get("projects")
    own = projects.get(str(workspace)) if isinstance(projects, dict) else None
    local = own.get("mcpServers") if isinstance(own, dict) else None
    if isinstance(local, dict) and local:
        found.servers.update(local)
        found.notes.append(
            f"Claude Code's {path}: read this folder's servers too "
            f"(projects[{json.dumps(str(workspace))}].mcpServers: {', '.join(local)})"
        )
    return found


_GEMINI_KEYS = {"httpUrl": "url", "includeTools": "include_tools", "excludeTools": "exclude_tools"}
_GEMINI_UNREAD = {"oauth", "authProviderType", "targetAudience", "targetServiceAccount"}


def _gemini(doc: dict[str, Any], path: Path) -> ClientFile:
    """Gemini CLI: `httpUrl` is a streamable HTTP url and `url` an SSE one; `timeout` is in
    milliseconds; `$VAR` expands like `${VAR}`; `trust` means what ours means."""
    found = _mcp_servers(doc, path, "gemini")
    servers = {}
    for name, raw in found.servers.items():
        if not isinstance(raw, dict):
            servers[name] = raw
            continue
        where = f"{found.key}.{name}"
        entry = _unread(raw, _GEMINI_UNREAD, "Gemini CLI", where, found.notes)
        if "url" in entry and "httpUrl" not in entry:
            entry.setdefault("type", "sse")
        elif "httpUrl" in entry:
            entry.setdefault("type", "http")
        entry = {_GEMINI_KEYS.get(k, k): v for k, v in entry.items()}
        if isinstance(entry.get("timeout"), int | float):
            entry["timeout"] = entry["timeout"] / 1000
        if isinstance(entry.get("env"), dict):
            entry["env"] = {k: _gemini_vars(v) for k, v in entry["env"].items()}
        servers[name] = entry
    for key in ("allowed", "excluded"):
        if isinstance(doc.get("mcp"), dict) and key in doc["mcp"]:
            found.notes.append(f"Gemini CLI's mcp.{key} ({path}) is not read")
    found.servers = servers
    return found


def _gemini_vars(value: Any) -> Any:
    return _GEMINI_VAR.sub(r"${\1}", value) if isinstance(value, str) else value


# ----------------------------------------------------------------- other formats


def _toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


_CODEX_KEYS = {
    "command": "command",
    "args": "args",
    "env": "env",
    "cwd": "cwd",
    "url": "url",
    "http_headers": "headers",
    "enabled": "enabled",
    "required": "required",
    "enabled_tools": "include_tools",
    "disabled_tools": "exclude_tools",
    "tool_timeout_sec": "tool_timeout",
    "startup_timeout_sec": "timeout",
}


def _codex(doc: dict[str, Any], path: Path) -> ClientFile:
    """Codex's `[mcp_servers.NAME]`: a url is streamable HTTP; `bearer_token_env_var` and
    `env_http_headers` name variables; `env_vars` passes the agent's own through."""
    tables = doc.get("mcp_servers") or {}
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: mcp_servers: must be a table of [mcp_servers.NAME] tables")
    found = ClientFile("codex", "mcp_servers", {})
    for name, raw in tables.items():
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: mcp_servers.{name}: must be a table")
        entry = _mapped(raw, _CODEX_KEYS, "Codex", f"mcp_servers.{name}", found.notes, _codex_extra)
        if "url" in entry:
            entry.setdefault("type", "http")
        found.servers[name] = entry
    return found


def _codex_extra(key: str, value: Any, entry: dict[str, Any]) -> bool:
    headers = entry.setdefault("headers", {}) if key.endswith(("_var", "headers")) else None
    if key == "bearer_token_env_var" and isinstance(value, str) and headers is not None:
        headers["Authorization"] = f"Bearer ${{{value}}}"
    elif key == "env_http_headers" and isinstance(value, dict) and headers is not None:
        headers.update({h: f"${{{var}}}" for h, var in value.items()})
    elif key == "env_vars" and isinstance(value, list):
        entry.setdefault("env", {}).update({v: f"${{{v}:-}}" for v in value if isinstance(v, str)})
    elif key == "startup_timeout_ms" and isinstance(value, int | float):
        entry["timeout"] = value / 1000
    else:
        return False
    return True


def _zed(doc: dict[str, Any], path: Path) -> ClientFile:
    """Zed's `context_servers`: `command` a string (or, in older files, `{path, args, env}`),
    or a `url`; a server an extension installed (`source: extension`) is Zed's to run."""
    servers = doc.get("context_servers") or {}
    found = ClientFile("zed", "context_servers", {})
    for name, raw in servers.items() if isinstance(servers, dict) else ():
        if not isinstance(raw, dict):
            continue
        where = f"context_servers.{name}"
        if raw.get("source") == "extension" or not any(k in raw for k in ("command", "url")):
            found.notes.append(f"Zed's {where} is a Zed extension's server: not read ({path})")
            continue
        entry = _unread(raw, {"settings", "source"}, "Zed", where, found.notes, quiet={"source"})
        command = entry.get("command")
        if isinstance(command, dict):  # the older shape
            entry["command"] = command.get("path")
            entry.setdefault("args", command.get("args", []))
            if command.get("env"):
                entry.setdefault("env", command["env"])
        found.servers[name] = entry
    return found


def _looks_opencode(doc: dict[str, Any]) -> bool:
    servers = doc.get("mcp")
    return isinstance(servers, dict) and any(
        isinstance(v, dict) and v.get("type") in ("local", "remote") for v in servers.values()
    )


def _opencode(doc: dict[str, Any], path: Path) -> ClientFile:
    """opencode's `mcp`: `type: local` with `command` an array and `environment`, or
    `type: remote` with `url`; `{env:VAR}` is `${VAR}`; `timeout` is in milliseconds."""
    servers = doc.get("mcp") or {}
    found = ClientFile("opencode", "mcp", {})
    for name, raw in servers.items() if isinstance(servers, dict) else ():
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: mcp.{name}: must be an object")
        where = f"mcp.{name}"
        entry = _unread(raw, {"oauth"}, "opencode", where, found.notes)
        kind = entry.pop("type", None)
        command = entry.pop("command", None)
        if kind == "local" or command is not None:
            if (
                not isinstance(command, list)
                or not command
                or not all(isinstance(c, str) for c in command)
            ):
                raise ConfigError(
                    f"{path}: {where}.command: must be a list: the program, then its arguments"
                )
            entry["command"], entry["args"] = command[0], command[1:]
        if "environment" in entry:
            entry["env"] = entry.pop("environment")
        if isinstance(entry.get("timeout"), int | float):
            entry["timeout"] = entry["timeout"] / 1000
        found.servers[name] = _opencode_vars(entry)
    return found


def _opencode_vars(value: Any) -> Any:
    if isinstance(value, str):
        return _OPENCODE_ENV.sub(r"${\1}", value)
    if isinstance(value, dict):
        return {k: _opencode_vars(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_opencode_vars(v) for v in value]
    return value


_GOOSE_KEYS = {
    "cmd": "command",
    "args": "args",
    "envs": "env",
    "uri": "url",
    "headers": "headers",
    "enabled": "enabled",
    "timeout": "tool_timeout",
    "cwd": "cwd",
}
_GOOSE_TYPES = {"stdio": "stdio", "sse": "sse", "streamable_http": "http"}
_GOOSE_QUIET = {"name", "description", "bundled", "type", "display_name"}


def _goose(doc: Any, path: Path) -> ClientFile:
    """Goose's `extensions`: `stdio` (`cmd`, `args`, `envs`), `sse` and `streamable_http`
    (`uri`); `env_keys` are read from the environment; its built-in extensions are its own."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping with an 'extensions' mapping")
    extensions = doc.get("extensions") or {}
    found = ClientFile("goose", "extensions", {})
    for name, raw in extensions.items() if isinstance(extensions, dict) else ():
        if not isinstance(raw, dict):
            continue
        where = f"extensions.{name}"
        kind = raw.get("type")
        if kind not in _GOOSE_TYPES:
            found.notes.append(f"Goose's {where} is Goose's own ({kind} extension): not read")
            continue
        entry = _mapped(raw, _GOOSE_KEYS, "Goose", where, found.notes, _goose_extra)
        entry["type"] = _GOOSE_TYPES[kind]
        found.servers[name] = entry
    return found


def _goose_extra(key: str, value: Any, entry: dict[str, Any]) -> bool:
    if key in _GOOSE_QUIET:
        return True
    if key == "env_keys" and isinstance(value, list):
        entry.setdefault("env", {}).update({k: f"${{{k}}}" for k in value if isinstance(k, str)})
        return True
    if key == "available_tools" and isinstance(value, list):
        if value:
            entry["include_tools"] = value
        return True
    return False


# ----------------------------------------------------------------- shared


def _mapped(
    raw: Mapping[str, Any],
    keys: Mapping[str, str],
    label: str,
    where: str,
    notes: list[str],
    extra: Callable[[str, Any, dict[str, Any]], bool],
) -> dict[str, Any]:
    """An entry whose keys are renamed to ours; one the client has that we do not read is a note."""
    entry: dict[str, Any] = {}
    for key, value in raw.items():
        if key in keys and isinstance(entry.get(keys[key]), dict) and isinstance(value, dict):
            entry[keys[key]] = {**entry[keys[key]], **value}  # env_vars' and env's, say
        elif key in keys:
            entry[keys[key]] = value
        elif not extra(key, value, entry):
            notes.append(f"{label}'s {where}.{key} is not read")
    if isinstance(entry.get("headers"), dict) and not entry["headers"]:
        del entry["headers"]
    return entry


def _unread(
    raw: Mapping[str, Any],
    unread: set[str],
    label: str,
    where: str,
    notes: list[str],
    quiet: set[str] = frozenset(),  # type: ignore[assignment]
) -> dict[str, Any]:
    for key in sorted(unread & set(raw) - quiet):
        notes.append(f"{label}'s {where}.{key} is not read")
    return {k: v for k, v in raw.items() if k not in unread}
