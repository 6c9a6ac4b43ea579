"""The part of YAML that Goose's `config.yaml` is written in, read without a YAML library.

Goose writes its file with serde_yaml: block mappings, block lists (indented or at the
key's own column), flow lists (`args: ["-y", "pkg"]`), quoted and plain scalars, `#`
comments. That is what is read here; anchors, tags, block scalars (`|`, `>`) and
multi-document files are refused with the line that holds them, so nothing is guessed.
A YAML dependency for one client's file would be the agent's largest for the smallest use.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.common.errors import ConfigError

MAX_DEPTH = 64  # nested mappings and lists; Goose's file is ~5 deep
_INT = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?$")


def loads(text: str, where: str) -> Any:
    """A YAML document as Python values, or a ConfigError naming the line."""
    lines: list[tuple[int, int, str]] = []  # (line number, indent, content)
    for number, raw in enumerate(text.splitlines(), 1):
        content = _strip_comment(raw).rstrip()
        if not content.strip() or content.strip() in ("---", "..."):
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise ConfigError(f"{where}: line {number}: a tab in the indentation")
        lines.append((number, len(content) - len(content.lstrip()), content.strip()))
    if not lines:
        return {}
    value, end = _block(lines, 0, lines[0][1], where, 1)
    if end < len(lines):
        raise ConfigError(f"{where}: line {lines[end][0]}: unexpected indentation")
    return value


def _strip_comment(line: str) -> str:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index]
    return line


def _deeper(depth: int, number: int, where: str) -> None:
    """Each level is a call: past MAX_DEPTH, one line rather than a RecursionError."""
    if depth > MAX_DEPTH:
        raise ConfigError(f"{where}: line {number}: nested deeper than {MAX_DEPTH} levels")


def _block(
    lines: list[tuple[int, int, str]], start: int, indent: int, where: str, depth: int
) -> Any:
    """The mapping or list whose lines begin at `start` with `indent`; (value, next index)."""
    _deeper(depth, lines[start][0], where)
    if lines[start][2].startswith("- ") or lines[start][2] == "-":
        return _list(lines, start, indent, where, depth)
    result: dict[str, Any] = {}
    index = start
    while index < len(lines) and lines[index][1] == indent:
        number, _, content = lines[index]
        if content.startswith("- "):
            break
        key, value = _key_value(content, number, where)
        index += 1
        if value:
            result[key] = _scalar(value, number, where, depth)
            continue
        child_list = index < len(lines) and lines[index][2].startswith("-")
        if index < len(lines) and (
            lines[index][1] > indent or (child_list and lines[index][1] == indent)
        ):
            result[key], index = _block(lines, index, lines[index][1], where, depth + 1)
        else:
            result[key] = None
    return result, index


def _list(
    lines: list[tuple[int, int, str]], start: int, indent: int, where: str, depth: int
) -> Any:
    items: list[Any] = []
    index = start
    while index < len(lines) and lines[index][1] == indent and lines[index][2].startswith("-"):
        number, _, content = lines[index]
        rest = content[1:].strip()
        index += 1
        if not rest:
            if index < len(lines) and lines[index][1] > indent:
                item, index = _block(lines, index, lines[index][1], where, depth + 1)
                items.append(item)
            else:
                items.append(None)
        elif _is_pair(rest):  # `- key: value` opens a mapping at the column of `key`
            column = indent + (len(content) - len(rest))
            lines[index - 1] = (number, column, rest)  # read again as that mapping's first
            item, index = _block(lines, index - 1, column, where, depth + 1)
            items.append(item)
        else:
            items.append(_scalar(rest, number, where, depth))
    return items, index


def _is_pair(text: str) -> bool:
    if text[:1] in "'\"[{":
        return False
    key, colon, rest = text.partition(":")
    return bool(colon) and bool(key.strip()) and (not rest or rest.startswith(" "))


def _key_value(content: str, number: int, where: str) -> tuple[str, str]:
    if content[:1] in "'\"":
        quote = content[0]
        end = content.find(quote, 1)
        if end < 0 or content[end + 1 : end + 2] != ":":
            raise ConfigError(f"{where}: line {number}: expected 'key: value'")
        return content[1:end], content[end + 2 :].strip()
    key, colon, rest = content.partition(":")
    if not colon or (rest and not rest.startswith(" ")):
        raise ConfigError(f"{where}: line {number}: expected 'key: value'")
    return key.strip(), rest.strip()


def _scalar(text: str, number: int, where: str, depth: int) -> Any:
    if text[:1] in "&*!|>":
        raise ConfigError(
            f"{where}: line {number}: YAML {text[0]!r} (anchors, tags, block text) is not read"
        )
    if text.startswith("[") or text.startswith("{"):
        return _flow(text, number, where, depth + 1)
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            raise ConfigError(f"{where}: line {number}: unterminated string") from None
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise ConfigError(f"{where}: line {number}: unterminated string")
        return text[1:-1].replace("''", "'")
    lowered = text.lower()
    if lowered in ("null", "~"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


def _flow(text: str, number: int, where: str, depth: int) -> Any:
    """`[a, "b"]` and `{k: v}` on one line: items split at top-level commas."""
    _deeper(depth, number, where)
    close = "]" if text[0] == "[" else "}"
    if not text.endswith(close):
        raise ConfigError(f"{where}: line {number}: a flow {text[0]} that spans lines is not read")
    body = text[1:-1].strip()
    parts = _split_top(body) if body else []
    if close == "]":
        return [_scalar(p.strip(), number, where, depth) for p in parts if p.strip()]
    pairs = [_key_value(p.strip(), number, where) for p in parts if p.strip()]
    return {k: _scalar(v, number, where, depth) for k, v in pairs}


def _split_top(body: str) -> list[str]:
    parts, depth, quote, current = [], 0, "", ""
    for char in body:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        current += char
    parts.append(current)
    return parts
