"""Elicitation forms asked in the terminal, field by field, answers typed and checked.

MCP elicitation schemas are flat: strings (with format and length), numbers (with bounds),
booleans, and enums given as `enum` (+ `enumNames`) or `oneOf` consts with titles. Users
may answer an enum by its value or its title.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import date, datetime
from typing import Any, NoReturn
from urllib.parse import urlparse

from rich.console import Console
from rich.text import Text

from agent.tools.server_requests import ElicitAnswer

Question = Callable[..., Awaitable[str | None]]  # (prompt, default=...) -> answer, None: quit
_CANCEL, _SKIP = object(), object()


async def ask_form(console: Console, question: Question, schema: dict[str, Any]) -> ElicitAnswer:
    """Ask whether to answer, then each field of the form; Ctrl-C or Ctrl-D cancels."""
    answer = await question("Answer it? [y]es / [n]o (decline) / [c]ancel: ")
    if answer is None or answer.lower() in ("c", "cancel"):
        return ElicitAnswer("cancel")
    if answer.lower() not in ("y", "yes"):
        return ElicitAnswer("decline")
    required = set(schema.get("required", []))
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        field = prop if isinstance(prop, dict) else {}
        value = await _ask_field(console, question, name, field, name in required)
        if value is _CANCEL:
            return ElicitAnswer("cancel")
        if value is not _SKIP:
            content[name] = value
    return ElicitAnswer("accept", content)


async def _ask_field(
    console: Console, question: Question, name: str, prop: dict[str, Any], required: bool
) -> Any:
    kind = prop.get("type", "string")
    choices = enum_choices(prop.get("items", {}) if kind == "array" else prop)
    label = prop.get("title") or name
    if prop.get("description"):
        console.print(Text(f"  {prop['description']}", style="dim"))
    default = "" if prop.get("default") is None else field_text(prop["default"])
    mark = "*" if required else ""
    while True:
        raw = await question(
            f"  {label}{mark} ({field_hint(prop, kind, choices)}): ", default=default
        )
        if raw is None:
            return _CANCEL
        if raw == "":
            if required:
                console.print(Text("  required", style="yellow"))
                continue
            return _SKIP
        try:
            return field_value(raw, prop, kind, choices)
        except ValueError as exc:
            console.print(Text(f"  {exc}", style="yellow"))


def enum_choices(schema: dict[str, Any]) -> dict[str, str]:
    """Allowed values of an enum field and their titles: `enum` (+ legacy `enumNames`), or
    the consts of `oneOf` / `anyOf` with their `title`s."""
    if "enum" in schema:
        names = schema.get("enumNames") or []
        values = [str(v) for v in schema["enum"]]
        return {v: str(names[i]) if i < len(names) else v for i, v in enumerate(values)}
    options = schema.get("oneOf") or schema.get("anyOf") or []
    return {
        str(o["const"]): str(o.get("title") or o["const"])
        for o in options
        if isinstance(o, dict) and "const" in o
    }


def field_hint(prop: dict[str, Any], kind: str, choices: dict[str, str]) -> str:
    if choices:
        shown = ", ".join(v if t == v else f"{v}={t}" for v, t in choices.items())
        return f"comma-separated: {shown}" if kind == "array" else shown
    if kind == "array":
        return "comma-separated"
    return str(prop.get("format") or kind)


def field_value(raw: str, prop: dict[str, Any], kind: str, choices: dict[str, str]) -> Any:
    """The typed, checked value of an answer, or ValueError saying what is expected."""
    value = parse_field(raw, kind)
    if choices:
        by_title = {t.lower(): v for v, t in choices.items()} | {v.lower(): v for v in choices}
        picked = [by_title.get(str(v).lower()) for v in (value if kind == "array" else [value])]
        if None in picked:
            raise ValueError(f"choose from {', '.join(choices)}")
        value = picked if kind == "array" else picked[0]
    _check_limits(value, prop)
    return value


_FORMATS: dict[str, Callable[[str], object]] = {
    "email": lambda v: re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", v) or _raise(),
    "uri": lambda v: (urlparse(v).scheme and urlparse(v).netloc) or _raise(),
    "date": date.fromisoformat,
    "date-time": datetime.fromisoformat,
}


def _raise() -> NoReturn:
    raise ValueError


def _check_limits(value: Any, prop: dict[str, Any]) -> None:
    """The schema's format and bounds (MCP elicitation allows these few)."""
    fmt = prop.get("format")
    if isinstance(value, str) and fmt in _FORMATS:
        try:
            _FORMATS[fmt](value)
        except ValueError:
            raise ValueError(f"enter a valid {fmt}") from None
    if isinstance(value, str):
        if len(value) < prop.get("minLength", 0):
            raise ValueError(f"at least {prop['minLength']} characters")
        if "maxLength" in prop and len(value) > prop["maxLength"]:
            raise ValueError(f"at most {prop['maxLength']} characters")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in prop and value < prop["minimum"]:
            raise ValueError(f"at least {prop['minimum']}")
        if "maximum" in prop and value > prop["maximum"]:
            raise ValueError(f"at most {prop['maximum']}")


def field_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def parse_field(raw: str, kind: str) -> Any:
    """A typed value from what the user typed, or ValueError saying what is expected."""
    if kind == "boolean":
        if raw.lower() in ("y", "yes", "true", "1"):
            return True
        if raw.lower() in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer yes or no")
    if kind == "integer":
        try:
            return int(raw)
        except ValueError:
            raise ValueError("enter a whole number") from None
    if kind == "number":
        try:
            return float(raw)
        except ValueError:
            raise ValueError("enter a number") from None
    if kind == "array":
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw
