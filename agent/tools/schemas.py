"""Tool input schemas as the model gets them: local `$ref`s inlined, `$defs` dropped.

MCP servers (2025-11-25 onwards: JSON Schema 2020-12) may share definitions through
`$defs` and `$ref`; many model APIs and local models take no references at all. So a
schema is expanded here, before it reaches the model, with the OpenAPI server's resolver
and node budget. A schema that refers to itself (a cycle) or expands past the budget
cannot be given whole: that tool is skipped with a warning naming it, as a malformed
tool is. References elsewhere than `#/...` are left as they are (never fetched).
"""

from __future__ import annotations

from typing import Any

from agent.tools.openapi import SCHEMA_NODES, Budget, SchemaCycle, SchemaTooLarge, resolve_refs

_DEFINITIONS = ("$defs", "definitions")


class UnusableSchema(Exception):
    """The schema cannot be expanded for the model; the message says why."""


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its local references inlined (the same object when it has none)."""
    if not _has_local_ref(schema):
        return schema
    body = {k: v for k, v in schema.items() if k not in _DEFINITIONS}
    try:
        return resolve_refs(body, schema, budget=Budget(SCHEMA_NODES), refuse_cycles=True)
    except SchemaCycle as cycle:
        raise UnusableSchema(f"its inputSchema refers to itself ({cycle})") from None
    except RecursionError:
        raise UnusableSchema("its inputSchema nests too deeply to expand") from None
    except SchemaTooLarge:
        raise UnusableSchema(
            f"its inputSchema's $refs expand to more than {SCHEMA_NODES:,} schema nodes"
        ) from None


def _has_local_ref(node: Any) -> bool:
    """Whether any `$ref` to `#/...` occurs (iteratively: a schema may be deep)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
