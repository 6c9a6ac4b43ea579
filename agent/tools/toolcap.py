"""Cut a huge tools/list reply to its first tools without building the rest.

`json.loads` of a 50,000-tool page builds every tool as Python objects (~100 MB) only to
throw almost all of them away. Here the message is walked with the C decoder one value at
a time: the tools past the limit are decoded and dropped one by one, so memory stays at
the line itself plus the tools kept.
"""

from __future__ import annotations

import json
import re
from typing import Any

_DECODE = json.JSONDecoder().raw_decode
_SPACE = re.compile(r"[ \t\n\r]*")
PATH = ("result", "tools")


def cut_tool_list(line: str, limit: int) -> tuple[dict[str, Any], int] | None:
    """(the message with result.tools cut to `limit`, how many tools it held), or None
    when the line is not a JSON object of that shape (the caller lets the SDK judge it)."""
    try:
        message, end, held = _object(line, _skip(line, 0), PATH, limit)
    except (ValueError, IndexError, TypeError):
        return None
    if held < 0 or _skip(line, end) != len(line):
        return None
    return message, held


def _skip(text: str, index: int) -> int:
    match = _SPACE.match(text, index)
    assert match is not None
    return match.end()


def _object(
    text: str, index: int, path: tuple[str, ...], limit: int
) -> tuple[dict[str, Any], int, int]:
    """Decode the object at `index`; the array at `path` inside it keeps `limit` items.
    Returns (object, end, items the array held, or -1 when the path was not there)."""
    if text[index] != "{":
        raise ValueError("not an object")
    result: dict[str, Any] = {}
    held, index = -1, _skip(text, index + 1)
    while text[index] != "}":
        key, index = _DECODE(text, index)
        index = _skip(text, index)
        if text[index] != ":" or not isinstance(key, str):
            raise ValueError("bad key")
        index = _skip(text, index + 1)
        value: Any
        if key == path[0] and len(path) == 1 and text[index] == "[":
            value, index, held = _capped_array(text, index, limit)
        elif key == path[0] and len(path) > 1 and text[index] == "{":
            value, index, held = _object(text, index, path[1:], limit)
        else:
            value, index = _DECODE(text, index)
        result[key] = value
        index = _skip(text, index)
        if text[index] == ",":
            index = _skip(text, index + 1)
        elif text[index] != "}":
            raise ValueError("expected , or }")
    return result, index + 1, held


def _capped_array(text: str, index: int, limit: int) -> tuple[list[Any], int, int]:
    kept: list[Any] = []
    count, index = 0, _skip(text, index + 1)
    while text[index] != "]":
        value, index = _DECODE(text, index)
        count += 1
        if count <= limit:
            kept.append(value)
        index = _skip(text, index)
        if text[index] == ",":
            index = _skip(text, index + 1)
        elif text[index] != "]":
            raise ValueError("expected , or ]")
    return kept, index + 1, count
