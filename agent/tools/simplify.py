"""Tool schemas an endpoint refused, simplified.

Providers reject different parts of JSON Schema (`anyOf` with null, `format`, very deep
nesting, `additionalProperties` in strict mode, `$schema`...). When an endpoint answers 400
naming one tool's schema, the loop sends that tool again with a plain schema — types,
properties, items, required, enum and descriptions only — and keeps doing so for the session.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

MAX_DEPTH = 6
SCHEMA_WORDS = ("schema", "parameters", "function", "tool", "property", "properties")


def refused_tool(detail: str, names: Sequence[str]) -> str | None:
    """The tool whose schema an error message names: by name (the longest that appears), or
    by its position (`tools[3]`, `function_declarations[3]`); None if none is named."""
    lowered = detail.lower()
    if not any(word in lowered for word in SCHEMA_WORDS):
        return None
    named = [n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", detail)]
    if named:
        return max(named, key=len)
    if match := re.search(r"(?:tools|function_declarations)\[(\d+)\]", detail):
        index = int(match.group(1))
        return names[index] if index < len(names) else None
    return None


def simplified(schema: Any, depth: int = 0) -> Any:
    """`schema` with only what every provider accepts; a union becomes its first non-null
    branch, a list of types its first non-null type, and nesting stops at MAX_DEPTH."""
    if not isinstance(schema, dict):
        return {}
    for union in ("anyOf", "oneOf", "allOf"):
        branches = [b for b in schema.get(union) or () if isinstance(b, dict)]
        real = [b for b in branches if b.get("type") != "null"]
        if real:
            merged = {**{k: v for k, v in schema.items() if k != union}, **real[0]}
            return simplified(merged, depth)
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((t for t in kind if t != "null"), "string")
    if isinstance(kind, str):
        out["type"] = kind
    if isinstance(schema.get("description"), str):
        out["description"] = schema["description"]
    if isinstance(schema.get("enum"), list):
        out["enum"] = [v for v in schema["enum"] if v is not None]
    if depth >= MAX_DEPTH:
        return out or {"type": "string"}
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {
            str(k): simplified(v, depth + 1) for k, v in schema["properties"].items()
        }
        out.setdefault("type", "object")
        required = [r for r in schema.get("required") or () if r in out["properties"]]
        if required:
            out["required"] = required
    if isinstance(schema.get("items"), dict):
        out["items"] = simplified(schema["items"], depth + 1)
    elif out.get("type") == "array":
        out["items"] = {"type": "string"}
    return out or {"type": "string"}


def with_simplified(declaration: dict[str, Any]) -> dict[str, Any]:
    """A tool declaration with its parameters simplified (an object at the top)."""
    function = declaration["function"]
    parameters = simplified(function.get("parameters") or {})
    if parameters.get("type") != "object":
        parameters = {"type": "object", "properties": {}}
    parameters.setdefault("properties", {})
    return {**declaration, "function": {**function, "parameters": parameters}}
