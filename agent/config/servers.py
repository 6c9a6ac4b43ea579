"""The mcpServers file: each entry read into a ServerConfig, or a ConfigError naming the key.

The Claude Desktop / Cursor format (VS Code's `servers` too; other clients' words are
agent/config/dialects.py's), `${VAR}` / `${VAR:-default}` expanded in every string, the
transport inferred when `type` is left out, and a warning for secrets written out in a
file others can read. The expansion and that warning serve config.toml as well
(agent/config/build.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.common.errors import ConfigError
from agent.common.private import private_folder
from agent.common.redact import PATTERNS_ONLY, is_secret_name
from agent.config.checks import check_keys, check_trust, sandbox_entry
from agent.config.clients import read_client_file, said_empty
from agent.config.dialects import Dialects, InputUnavailable, declared_inputs, note
from agent.config.settings import ServerConfig, Transport

_TYPE_ALIASES: dict[str, Transport] = {
    "stdio": "stdio",
    "sse": "sse",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "openapi": "openapi",
}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_ANY_REF = re.compile(r"\$\{[^}]+\}")  # ours, or another client's (${input:id}, ${env:X})


class VariableUnset(ConfigError):
    """A `${VAR}` without a default whose variable is not set. In an mcpServers entry it
    makes that one server unusable for this run, not the file (agent/config/build.py)."""


@dataclass(frozen=True)
class Unusable:
    """An entry this run cannot use (an unset `${VAR}`, an `${input:...}` nobody can be
    asked), kept to be said once the run knows whether it wanted that server at all."""

    name: str
    error: ConfigError
    config_file: str
    required: bool  # `"required": true`: a run without it must not start


def expand_vars(value: Any, environ: Mapping[str, str], where: str, strict: bool = True) -> Any:
    """Expand ${VAR} and ${VAR:-default} in every string of a JSON-like value.

    Strict: an unset variable without a default is a VariableUnset naming the key.
    Lenient (for disabled servers) leaves it as written.
    """
    if isinstance(value, str):

        def repl(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ and (environ[name] or default is None):
                return environ[name]
            if default is not None:
                return default
            if not strict:
                return match.group(0)
            raise VariableUnset(
                f"{where}: environment variable {name} is not set "
                f"(set it, or write ${{{name}:-default}})"
            )

        return _VAR.sub(repl, value)
    if isinstance(value, dict):
        return {k: expand_vars(v, environ, f"{where}.{k}", strict) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_vars(v, environ, f"{where}[{i}]", strict) for i, v in enumerate(value)]
    return value


def validation_message(exc: ValidationError, where: str) -> str:
    """Pydantic's first complaint as one line naming the key (`file: mcpServers.x.timeout`)."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    key = f"{where}.{loc}" if loc else where
    return f"{key}: {first['msg']}"


def infer_type(raw: Mapping[str, Any], where: str) -> Transport:
    """The transport an entry asks for: its `type` (other clients' spellings too), else
    `command` means stdio and a `url` ending in /sse means sse, any other url http."""
    declared = raw.get("type", raw.get("transport"))
    if declared is not None:
        if not isinstance(declared, str) or declared.lower() not in _TYPE_ALIASES:
            allowed = "stdio, sse, http, openapi"
            raise ConfigError(f"{where}.type: unknown server type {declared!r} (use {allowed})")
        return _TYPE_ALIASES[declared.lower()]
    if "command" in raw:
        return "stdio"
    url = raw.get("url")
    if isinstance(url, str):
        return "sse" if url.rstrip("/").endswith("/sse") else "http"
    raise ConfigError(f"{where}: needs either 'command' (stdio) or 'url' (sse/http/openapi)")


_IGNORED_KEYS = {"type", "transport", "disabled", "description", "autoApprove", "alwaysAllow"}
_NOT_EXPANDED = _IGNORED_KEYS - {"type", "transport"}  # free text and lists we never read


def _entry_keys() -> frozenset[str]:
    internal = {"name", "config_file", "secrets", "policy"}
    return frozenset(set(ServerConfig.model_fields) - internal | _IGNORED_KEYS)


_ENTRY_KEYS = _entry_keys()


def parse_server(name: str, raw: Any, environ: Mapping[str, str], where: str) -> ServerConfig:
    """Turn one mcpServers entry into a ServerConfig, or a ConfigError naming the key.

    ${VAR} references expand before the type is decided: `"url": "${SSE_URL}"` is an sse
    server when SSE_URL ends in /sse, and `"type": "${T:-http}"` is a type like any other.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be an object, got {type(raw).__name__}")
    disabled = raw.get("disabled") is True or raw.get("enabled") is False
    kept = {k: v for k, v in raw.items() if k not in _NOT_EXPANDED}
    data = expand_vars(kept, environ, where, strict=not disabled)
    if disabled and _VAR.search(str(data.get("type", data.get("transport", "")))):
        data = {k: v for k, v in data.items() if k not in ("type", "transport")}
    check_keys(raw, _ENTRY_KEYS, where)
    check_trust(data.get("trust"), where)
    if "sandbox" in data:
        data["sandbox"] = sandbox_entry(data["sandbox"], where)
    kind = infer_type(data, where)
    data = {k: v for k, v in data.items() if k not in _IGNORED_KEYS}
    if disabled:
        data["enabled"] = False
    needed = "command" if kind == "stdio" else "url"
    if not isinstance(data.get(needed), str) or not data[needed].strip():
        raise ConfigError(f"{where}.{needed}: required for a {kind} server")
    try:
        return ServerConfig(name=name, type=kind, **data)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, where)) from None
    except TypeError as exc:  # e.g. a key that collides with `name`
        raise ConfigError(f"{where}: {exc}") from None


def load_mcp_config(
    path: Path,
    environ: Mapping[str, str],
    dialects: Dialects | None = None,
    skipped: list[Unusable] | None = None,
) -> list[ServerConfig]:
    """Read a servers file in any client's format. Every problem is one ConfigError naming
    file and key.

    Other clients' files (agent/config/clients.py) and their shared words (VS Code's
    inputs and ${workspaceFolder}, Cursor's envFile, Windsurf's serverUrl, Cline's
    autoApprove: agent/config/dialects.py) are read as those clients read them; `dialects`
    carries the workspace and who answers `${input:...}`. With `skipped` given, an entry
    that cannot be used in this run (an `${input:...}` nobody can be asked, an unset
    `${VAR}`) is left out and recorded there instead of ending the run.
    """
    dialects = dialects or Dialects(Path.cwd().resolve(), environ)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read mcp config ({exc.strerror})") from None
    found = read_client_file(path, text, dialects.workspace)
    for line in found.notes:
        note(line)
    if not found.servers and found.client is not None:
        note(said_empty(found, path))
    key = found.key
    warn_if_world_readable(path, literal_secrets(found.servers, "", key))
    inputs = declared_inputs(found.doc, path)
    servers = []
    for name, raw in found.servers.items():
        where = f"{path}: {key}.{name}"
        try:
            entry, secrets = (
                dialects.entry(raw, inputs, where) if isinstance(raw, dict) else (raw, ())
            )
            server = parse_server(name, entry, environ, where)
        except (InputUnavailable, VariableUnset) as exc:
            if skipped is None:
                raise
            required = isinstance(raw, dict) and raw.get("required") is True
            skipped.append(Unusable(name, exc, str(path), required))
            continue
        servers.append(server.model_copy(update={"config_file": str(path), "secrets": secrets}))
    return servers


def literal_secrets(value: Any, key: str = "", where: str = "") -> list[str]:
    """Where a secret is written out in full, not as a ${VAR} reference.

    Decided per value: a `${...}` elsewhere in the file says nothing about this one. A
    value is a secret when its name says so (api_key, key, Authorization, X-Api-Key,
    GITHUB_TOKEN, DB_PASS...) or when it looks like one (`Bearer ...`, `sk-...`,
    `user:password@host`, `?api_key=...`).
    """
    if isinstance(value, dict):
        return [
            found
            for name, item in value.items()
            for found in literal_secrets(item, str(name), f"{where}.{name}" if where else str(name))
        ]
    if isinstance(value, list):
        return [
            found
            for index, item in enumerate(value)
            for found in literal_secrets(item, key, f"{where}[{index}]")
        ]
    if not isinstance(value, str) or not value.strip() or _ANY_REF.search(value):
        return []
    if is_placeholder(value):
        return []
    return [where] if is_secret_name(key) or PATTERNS_ONLY(value) != value else []


# What READMEs write where the reader's own secret goes: a name in capitals (MY_TOKEN,
# YOUR_API_KEY), a <token> or [key], or words that say so (your-key-here, changeme, xxxx).
_PLACEHOLDER_NAME = re.compile(r"[A-Z][A-Z_]*[A-Z]")
_PLACEHOLDER_WORDS = re.compile(
    r"(?i)^(?:<[^<>]*>|\[[^\[\]]*\]|\{[^{}]*\}|[x*.]{3,})$"
    r"|(?:^|[^a-z0-9])(?:your|changeme|change[-_]me|placeholder|replace[-_]?me|example|xxx+)"
    r"(?:[^a-z0-9]|$)"
)
_VALUE_PREFIX = re.compile(r"(?i)^(?:(?:bearer|basic|token)\s+|-{0,2}[a-z0-9_.-]+=)")


def is_placeholder(value: str) -> bool:
    """Whether a value is the stand-in a README shows for a secret, not a secret: warning
    about `MY_TOKEN` on every run teaches people to ignore the warning."""
    bare = _VALUE_PREFIX.sub("", value.strip(), count=1)
    return bool(_PLACEHOLDER_NAME.fullmatch(bare) or _PLACEHOLDER_WORDS.search(bare))


SECRET_WARNINGS_FILE = "secret-warnings.json"  # in the state folder: files warned about


def default_state_dir(environ: Mapping[str, str]) -> Path:
    """Where sessions, logins and approvals live: $MCP_AGENT_STATE_DIR, else the XDG state
    folder, so nothing is written into the project being worked on. (Here, below
    agent/config/build.py, since the secrets warning remembers what it said there too.)"""
    if environ.get("MCP_AGENT_STATE_DIR"):
        return Path(environ["MCP_AGENT_STATE_DIR"])
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mcp-agent"


def warn_if_world_readable(path: Path, secret_keys: list[str]) -> None:
    """Secrets in a file others can read deserve a warning, not a refusal; once per file
    and content (remembered in the state folder), since a warning on every run is noise."""
    try:
        world_readable = bool(path.stat().st_mode & 0o004)
    except OSError:
        return
    if not (world_readable and secret_keys) or _warned_before(path):
        return
    shown = ", ".join(secret_keys[:3]) + (", ..." if len(secret_keys) > 3 else "")
    print(
        f"warning: {path} holds secrets written out in full ({shown}) and is readable "
        f"by every user (chmod 600 it, or use ${{VAR}} references); said once for this content",
        file=sys.stderr,
    )


def _warned_before(path: Path) -> bool:
    """True when this file with this content was warned about; else records it now. A
    state folder that cannot be written only means the warning comes again."""
    try:
        key = str(path.resolve())
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        record = default_state_dir(os.environ) / SECRET_WARNINGS_FILE
        try:
            seen = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            seen = {}
        if not isinstance(seen, dict):
            seen = {}
        if seen.get(key) == digest:
            return True
        seen[key] = digest
        private_folder(record.parent)
        record.write_text(json.dumps(seen, indent=1), encoding="utf-8")
        record.chmod(0o600)
    except OSError:
        return False
    return False
