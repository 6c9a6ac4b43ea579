"""Checks on an mcpServers entry that say what to fix, before the model validates it.

The model's own messages ("Extra inputs are not permitted", "trust.bool: Input should be a
valid boolean") name a rule, not the fix; and pydantic's lax mode reads `"trust": "yes"`
as true, which would trust every tool of a server without a word. These come first.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from agent.common.errors import ConfigError


def check_keys(entry: Mapping[str, Any], known: Iterable[str], where: str) -> None:
    """An unknown key is an error that suggests the key it was probably meant to be."""
    known = sorted(known)
    for key in entry:
        if key in known:
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(known)}"
        raise ConfigError(f"{where}.{key}: unknown key ({hint})")


def check_trust(value: Any, where: str) -> None:
    """`trust` is true, false, or a list of the server's own tool names; nothing else."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return
    if isinstance(value, str):
        raise ConfigError(
            f'{where}.trust: "{value}" is a string: write true (every tool of this server), '
            f'false, or a list of its tools, e.g. ["{value}"]'
        )
    raise ConfigError(
        f"{where}.trust: must be true, false or a list of tool names, not {type(value).__name__}"
    )


SANDBOX_MODES = ("workspace-write", "read-only", "off")


def sandbox_entry(value: Any, where: str) -> dict[str, Any] | None:
    """A server's `"sandbox"` as the object ServerSandbox reads: true ([sandbox] mode),
    false ("off"), a mode, or {"mode", "network", "write"}; anything else says what to
    write (pydantic would read "yes" as a mode error naming a rule, and "true" as true)."""
    key = f"{where}.sandbox"
    if value is None:
        return None
    if isinstance(value, bool):
        return {} if value else {"mode": "off"}
    if isinstance(value, str):
        if value not in SANDBOX_MODES:
            raise ConfigError(f'{key}: "{value}" is not a mode (use {", ".join(SANDBOX_MODES)})')
        return {"mode": value}
    if not isinstance(value, dict):
        raise ConfigError(
            f'{key}: write a mode ("workspace-write", "read-only", "off"), true, false, or '
            '{"mode": ..., "network": false, "write": [folders]}'
        )
    check_keys(value, ("mode", "network", "write"), key)
    if "mode" in value and value["mode"] not in SANDBOX_MODES:
        raise ConfigError(
            f"{key}.mode: {value['mode']!r} is not a mode (use {', '.join(SANDBOX_MODES)})"
        )
    if "network" in value and not isinstance(value["network"], bool):
        raise ConfigError(f"{key}.network: must be true or false")
    write = value.get("write", [])
    if not isinstance(write, list) or not all(isinstance(p, str) and p for p in write):
        raise ConfigError(f'{key}.write: must be a list of folders, e.g. ["~/.npm"]')
    return dict(value)
