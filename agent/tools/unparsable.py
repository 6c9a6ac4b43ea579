"""A server reply the SDK cannot parse still fails the request it answers, at once.

The SDK's stdio and SSE transports hand a line they cannot parse (a lone surrogate escape
from a server that cut an emoji in half, JSON nested thousands deep) to the session as an
exception, and the request it answered waits for its timeout. The raw line is still in
the exception, and the id of a reply sits at the top level of its object, readable with a
tokenizer that never decodes a string nor recurses: that is enough to answer the request
with the parse error instead of silence.
"""

from __future__ import annotations

import re
from typing import Any

from mcp.shared.message import SessionMessage
from mcp_types import PARSE_ERROR, ErrorData, JSONRPCError

from agent.common import json_limits

# A JSON string (escapes kept, not decoded), a structural character, or a bare scalar.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]|[^\s"\[\]{}:,]+')


def reply_error_for(exc: Exception) -> SessionMessage | None:
    """The parse failure `exc` as a JSON-RPC error for the request its line answered, or
    None when the line was no reply (a server request or notification) or has no usable id."""
    found = _raw_and_message(exc)
    if found is None:
        return None
    raw, reason = found
    fields = raw if isinstance(raw, dict) else _top_level_scalars(raw)
    if "method" in fields:
        return None  # a request or notification from the server: nothing of ours waits on it
    request_id = fields.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    error = ErrorData(code=PARSE_ERROR, message=f"the server's reply could not be parsed: {reason}")
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _raw_and_message(exc: Exception) -> tuple[str | dict[str, Any], str] | None:
    """The line (or the parsed object) the SDK failed on, and why, from a pydantic error."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        details = errors()
    except Exception:
        return None
    for detail in details:
        raw = detail.get("input")
        if isinstance(raw, str | dict):
            return raw, str(detail.get("msg") or type(exc).__name__)[:300]
    return None


def _top_level_scalars(raw: str) -> dict[str, Any]:
    """The members of the outer JSON object whose values are scalars, decoded; members
    whose values are objects or arrays are present with None. Tolerates a broken tail."""
    fields: dict[str, Any] = {}
    depth, key, last = 0, None, None
    for match in _TOKEN.finditer(raw):
        token = match.group()
        if token in "{[":
            if depth == 1 and key is not None:
                fields[key], key = None, None
            depth += 1
        elif token in "}]":
            depth -= 1
        elif depth != 1:
            continue
        elif token == ":":
            key = _decode(last)
        elif token == ",":
            key = None
        elif key is not None:
            fields[key], key = _decode(token), None
        else:
            last = token
    return {k: v for k, v in fields.items() if isinstance(k, str)}


def _decode(token: str | None) -> Any:
    if token is None:
        return None
    try:
        return json_limits.loads(token)
    except ValueError:
        return None
