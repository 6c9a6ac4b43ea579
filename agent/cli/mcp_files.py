"""An mcpServers file as `mcp add|get|remove|add-json` and `mcp add REGISTRY-NAME` read and
write it: the JSON document, its servers, an entry in words (secrets left out), and the
atomic write through a symlink.

Its own module so the `mcp` subcommands and the registry's `mcp add` share it without
importing each other.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from agent.common.errors import ConfigError


def read_doc(path: Path) -> dict[str, Any]:
    """An mcpServers file's JSON (an empty one when it does not exist yet)."""
    if not path.exists():
        return {"mcpServers": {}}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    key = "servers" if "mcpServers" not in doc and "servers" in doc else "mcpServers"
    if not isinstance(doc.setdefault(key, {}), dict):
        raise ConfigError(f"{path}: '{key}' must be an object")
    return doc


def servers_of(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["servers"] if "mcpServers" not in doc and "servers" in doc else doc["mcpServers"]


def add_entry(path: Path, name: str, entry: dict[str, Any], taken: str) -> None:
    """Add server `name` to the file at `path`; one of that name already there is an error
    that ends with `taken` (what to do instead)."""
    doc = read_doc(path)
    servers = servers_of(doc)
    if name in servers:
        raise ConfigError(f"server '{name}' already exists in {path} ({taken})")
    servers[name] = entry
    write_doc(path, doc)


def write_doc(path: Path, doc: dict[str, Any]) -> None:
    """Replace the file `path` names atomically; an existing file keeps its mode, a new one
    is 0600. A symlink (a dotfiles repository's `mcp.json`) is written through: the new
    file takes the target's place next to it, and the link stays a link."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    target = Path(os.path.realpath(path))
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o600
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def describe(name: str, entry: Any, where: str = "") -> list[str]:
    """An entry in words, secrets left out: env and header values are never shown. A value
    of the wrong shape (a file edited by hand, or a repository's) is a ConfigError naming
    its key, `where` being the file."""
    prefix = f"{where}: " if where else ""

    def strings(key: str, value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(
                f"{prefix}mcpServers.{name}.{key}: must be a list of strings, "
                f"not {json.dumps(value)[:80]}"
            )
        return value

    if not isinstance(entry, dict):
        raise ConfigError(f"{prefix}mcpServers.{name}: must be an object")
    kind = entry.get("type") or ("stdio" if "command" in entry else "http")
    lines = [f"{name}:", f"  type: {kind}"]
    if "command" in entry:
        command = strings("command", entry["command"]) + strings("args", entry.get("args", []))
        lines.append(f"  command: {' '.join(command)}")
    if "url" in entry:
        lines.append(f"  url: {entry['url']}")
    for key in ("env", "headers"):
        if entry.get(key):
            names = entry[key] if isinstance(entry[key], dict) else {}
            lines.append(f"  {key}: {', '.join(map(str, names))} (values not shown)")
    if entry.get("enabled") is False or entry.get("disabled") is True:
        lines.append("  enabled: false")
    return lines
