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
