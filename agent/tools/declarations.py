"""What the model sees of the servers' tools: a public name and a function declaration each.

Public names are `<server>__<tool>` sanitized to the OpenAI pattern and made unique with a
deterministic hash suffix where two would collide, so no server can shadow another
server's tool or the agent's own. A declaration carries the server's description and
schema cut to what one server may put into every model request. Apart from the registry
because both are pure functions of the listed tools: the registry calls them once per
change of the tool set.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from agent.tools.toolspec import ToolSpec

NAME_LIMIT = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
DESCRIPTION_LIMIT = 2000
# What one server may put into every model request through a tool's input schema.
SCHEMA_DESCRIPTION_LIMIT = 500
SCHEMA_DEPTH = 32
_LITERAL_KEYWORDS = frozenset({"default", "const", "enum", "examples"})  # values, not schemas
SCHEMA_LIMIT = 20_000  # characters of the whole schema


def _digest(server: str, tool: str) -> str:
    return hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]


def assign_names(
    pairs: Iterable[tuple[str, str]], reserved: Iterable[str] = ()
) -> dict[str, tuple[str, str]]:
    """Map public names to (server, tool), valid and unique, deterministic for the input.

    A clean, short name that no other pair would also produce, and that is not reserved,
    is used as is; a name that only needed its characters replaced (a server called "Azure
    MCP Server") is used sanitized when no other pair sanitizes to it; every other name is
    sanitized, cut and given a suffix derived from the exact (server, tool) pair. So
    servers `evil` (tool `files__delete`) and `evil__files` (tool `delete`) both get
    suffixed names: neither takes the other's, whatever the config order. The result
    depends on the set of pairs only (it keeps the input's order).
    """
    pairs = list(pairs)
    raw_counts = Counter(f"{server}__{tool}" for server, tool in set(pairs))
    clean_counts = Counter(_INVALID.sub("_", f"{s}__{t}") for s, t in set(pairs))
    taken = set(reserved)
    chosen: dict[tuple[str, str], str] = {}
    for server, tool in sorted(set(pairs)):
        raw = f"{server}__{tool}"
        unique = raw_counts[raw] == 1 and raw not in taken
        if unique and not _INVALID.search(raw) and len(raw) <= NAME_LIMIT:
            chosen[(server, tool)] = raw
            taken.add(raw)
    for server, tool in sorted(set(pairs) - set(chosen)):
        clean = _INVALID.sub("_", f"{server}__{tool}")
        if clean_counts[clean] == 1 and clean not in taken and len(clean) <= NAME_LIMIT:
            chosen[(server, tool)] = clean  # "Azure MCP Server" -> Azure_MCP_Server__...
            taken.add(clean)
            continue
        suffix = _digest(server, tool)
        name = f"{clean[: NAME_LIMIT - len(suffix) - 1]}_{suffix}"
        counter = 1
        while name in taken:
            extra = f"{suffix}{counter}"
            name = f"{clean[: NAME_LIMIT - len(extra) - 1]}_{extra}"
            counter += 1
        taken.add(name)
        chosen[(server, tool)] = name
    return {chosen[pair]: pair for pair in pairs}


def openai_tool(public_name: str, spec: ToolSpec) -> dict[str, Any]:
    """The function declaration the model sees; the description says where it came from."""
    # A title is for people (/tools shows it); the model reads it only if nothing else.
    text = (spec.description or "").strip() or (spec.title or "")
    if len(text) > DESCRIPTION_LIMIT:
        text = text[:DESCRIPTION_LIMIT] + " [...]"
    schema = _tame_schema(spec.schema_for_model)
    if (size := len(json.dumps(schema))) > SCHEMA_LIMIT:
        text += f" [its input schema ({size} characters) was too large to send]"
        schema = {"type": "object", "additionalProperties": True}
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return {
        "type": "function",
        "function": {
            "name": public_name,
            # Short: it rides on every tool of every request; the system prompt says once
            # what the mark means (agent.common.memory.UNTRUSTED_STATEMENT).
            "description": f"[external: {spec.server}] {text}",
            "parameters": schema,
        },
    }


def _tame_schema(node: Any, depth: int = 0, literal: bool = False) -> Any:
    """A server's input schema as the model may see it: every description cut to
    SCHEMA_DESCRIPTION_LIMIT (they rode past the tool description's own limit), and
    nesting cut at SCHEMA_DEPTH (a thousand-deep schema breaks JSON encoders).

    Generated `title`s ("Path", "read_fileArguments") are left out: they repeat the names,
    and on every request (a sixth of the bundled server's declarations) a local model
    pays for them in prompt processing."""
    if isinstance(node, dict):
        if depth >= SCHEMA_DEPTH:
            return {}
        tamed = {
            k: _tame_schema(v, depth + 1, literal or k in _LITERAL_KEYWORDS)
            for k, v in node.items()
            if literal or not (k == "title" and isinstance(v, str))
        }
        description = tamed.get("description")
        if isinstance(description, str) and len(description) > SCHEMA_DESCRIPTION_LIMIT:
            tamed["description"] = description[:SCHEMA_DESCRIPTION_LIMIT] + " [...]"
        return tamed
    if isinstance(node, list):
        return [] if depth >= SCHEMA_DEPTH else [_tame_schema(v, depth + 1, literal) for v in node]
    return node
