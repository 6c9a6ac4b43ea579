"""Tools approved "always" and kept with `/approve save`: in a file of our own.

Never written into an mcpServers file: that file may belong to another program (Claude
Desktop's own config, which does not know a `trust` key), be a symlink into a dotfiles
repository, carry comments (VS Code's mcp.json is JSONC) or be a project's file under
version control. `<state>/approvals.json` (0600, in the private state folder) keeps them
per mcpServers file (by its real path) and server name, with a fingerprint of the server's
command line or URL: an entry changed to run something else gets none of the approvals
given to what it ran before. A `trust` key written in an mcpServers file by hand still
counts too (config.ServerConfig.trust); these are added to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agent.common.errors import ConfigError
from agent.common.private import private_folder

FILE_NAME = "approvals.json"


def fingerprint(command: str | None, args: Sequence[str], url: str | None) -> str:
    """What the server runs or where it connects, as a short digest (no secrets kept)."""
    text = json.dumps([command, list(args), url], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _key(config_file: str | Path) -> str:
    return os.path.realpath(config_file)


def load(state_dir: Path) -> dict[str, dict[str, Any]]:
    """{real path of an mcpServers file: {server: {"fingerprint", "tools"}}}; a missing or
    unreadable file holds none (the approvals are a convenience, never a requirement)."""
    try:
        doc = json.loads((state_dir / FILE_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = doc.get("files") if isinstance(doc, dict) else None
    return (
        {k: v for k, v in files.items() if isinstance(v, dict)} if isinstance(files, dict) else {}
    )


def approved(
    saved: dict[str, dict[str, Any]], config_file: str | None, server: str, print_: str
) -> tuple[str, ...]:
    """The tools kept for `server` of `config_file`, if it still runs what it ran then."""
    if config_file is None:
        return ()
    entry = saved.get(_key(config_file), {}).get(server)
    if not isinstance(entry, dict) or entry.get("fingerprint") != print_:
        return ()
    tools = entry.get("tools")
    return tuple(t for t in tools if isinstance(t, str)) if isinstance(tools, list) else ()


def with_saved(server: Any, saved: dict[str, dict[str, Any]]) -> Any:
    """A ServerConfig with its kept approvals added to its `trust`."""
    print_ = fingerprint(server.command, server.args, server.url)
    tools = approved(saved, server.config_file, server.name, print_)
    if not tools or server.trust is True:
        return server
    trust = tuple(dict.fromkeys((*(server.trust or ()), *tools)))
    return server.model_copy(update={"trust": trust})


def save(
    state_dir: Path, config_file: str, server: str, print_: str, tools: Iterable[str]
) -> tuple[Path, list[str]]:
    """Keep `tools` for `server` of `config_file`; returns the file and the names added.

    A kept entry for a server that now runs something else is replaced, not extended.
    """
    saved = load(state_dir)
    entry = saved.setdefault(_key(config_file), {}).get(server)
    kept = approved(saved, config_file, server, print_) if isinstance(entry, dict) else ()
    added = [tool for tool in dict.fromkeys(tools) if tool not in kept]
    path = state_dir / FILE_NAME
    if not added:
        return path, []
    saved[_key(config_file)][server] = {"fingerprint": print_, "tools": [*kept, *added]}
    try:
        _write_private(path, json.dumps({"files": saved}, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot save the approvals ({exc.strerror})") from None
    return path, added


def _write_private(path: Path, text: str) -> None:
    """Replace the file atomically (0600); a symlink is written through, so the file it
    points to changes and the link stays a link."""
    private_folder(path.parent)
    target = Path(os.path.realpath(path))
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
