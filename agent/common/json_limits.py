"""JSON from others, read within a depth limit.

Nesting a thousand deep makes `json.loads` raise RecursionError, which no `except
ValueError` catches (it ended a reader thread, a batch, a resume with a traceback); nesting
just short of that parses, and then whatever walks it recursively (the redactor, an echo,
pydantic) fails instead. `loads` makes both one error, `TooDeep`: a `json.JSONDecodeError`,
so every caller's existing `except json.JSONDecodeError` / `except ValueError` reports that
input as malformed and goes on.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # lists and objects inside each other: far past any honest message


class TooDeep(json.JSONDecodeError):
    """JSON nested past the limit (or past the parser's own recursion limit)."""

    def __init__(self, limit: int, doc: str = "") -> None:
        super().__init__(f"JSON nested deeper than {limit} levels", doc, 0)

    def __str__(self) -> str:  # no "line 1 column 1": the depth is the whole story
        return self.msg


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads`, refusing nesting deeper than `max_depth` with TooDeep."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(max_depth) from None
    if deeper_than(value, max_depth):
        raise TooDeep(max_depth)
    return value


def deeper_than(value: Any, limit: int) -> bool:
    """Whether lists and objects nest more than `limit` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False
