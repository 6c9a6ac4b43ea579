"""Writing back to the user's own config files: a tool approved "always" can be kept as
the server's `trust` in the mcpServers file it came from (only when the user asks, with
`/approve save`).

The file is read again, changed in that one entry and replaced atomically with its mode
kept; a file that cannot be read or no longer holds the server is left alone.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from agent.errors import ConfigError


def save_trust(path: Path, server: str, tools: Iterable[str]) -> list[str]:
    """Add `tools` to `server`'s `trust` list in `path`; returns the names added."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot update it ({exc})") from None
    servers = doc.get("mcpServers", doc.get("servers")) if isinstance(doc, dict) else None
    entry = servers.get(server) if isinstance(servers, dict) else None
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}: no server '{server}' in it any more")
    trust = entry.get("trust", [])
    if trust is True:
        return []
    kept = list(trust) if isinstance(trust, list) else []
    added = [tool for tool in dict.fromkeys(tools) if tool not in kept]
    if not added:
        return []
    entry["trust"] = kept + added
    _replace(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return added


def _replace(path: Path, text: str) -> None:
    """Write `text` to `path` atomically, keeping the file's permissions."""
    mode = path.stat().st_mode & 0o777
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
