"""CallToolResult -> what the model observes.

Every content block is kept in some form; images and audio become short placeholders in
the text (and images are attached separately for vision models). The text is cut to
`max_chars` and wrapped in an envelope that marks it as untrusted data from a named server.

The envelope has a begin and an end line carrying a random id made per call: text inside
cannot guess it, so it cannot fake the end of its own envelope and speak as if from outside;
any envelope tag inside the content is escaped besides (`&lt;/untrusted-data`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types

from agent.text import valid_unicode
from agent.tools.uimeta import is_app_page


@dataclass(frozen=True)
class Image:
    mime_type: str
    data: str  # base64


@dataclass(frozen=True)
class Observation:
    """One tool result, ready for memory and for display."""

    text: str
    is_error: bool = False
    images: tuple[Image, ...] = field(default=())
    truncated_chars: int = 0
    structured: Any = None  # the server's structuredContent, whole (for JSON and transcript)
    whole: str | None = field(default=None, repr=False)  # the text before it was cut
    result: types.CallToolResult | None = None  # as the server sent it (for an app's page)


_TAG = "untrusted-data"
_TAG_IN_CONTENT = re.compile(r"(?i)<(?=\s*/?\s*untrusted-data)")
_ENVELOPE = re.compile(
    r'<untrusted-data server="(?:[^"\\\n]|\\.)*" id="(?P<id>[0-9a-f]{8})">[^\n]*\n'
    r'(?P<body>.*)\n</untrusted-data id="(?P=id)">(?P<tail>\n.*)?$',
    re.DOTALL,
)


def envelope(server: str, body: str) -> str:
    """`body` marked as untrusted data from `server`, between lines with a fresh id.

    About 20 tokens in all: the system prompt says once what the tags mean (see
    agent.memory.UNTRUSTED_STATEMENT), so each result carries only the tags.
    """
    nonce = secrets.token_hex(4)
    body = _TAG_IN_CONTENT.sub("&lt;", body)
    name = json.dumps(server, ensure_ascii=False)
    return f'<{_TAG} server={name} id="{nonce}">\n{body}\n</{_TAG} id="{nonce}">'


def strip_marker(output: str) -> str:
    """The content without its envelope, for people and scripts; the envelope is for the model.
    What follows the envelope (notes of the user's hooks) is kept."""
    head, tag, rest = output.partition(f'<{_TAG} server="')
    match = _ENVELOPE.match(tag + rest) if tag else None
    return head + match.group("body") + (match.group("tail") or "") if match else output


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def _human_size(n: int) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024 or unit == "MB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _resource_text(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    mime = resource.mime_type or "unknown type"
    if is_app_page(resource):  # an MCP App's page: hundreds of KB of script, for a host
        return f"[app page {resource.uri} ({mime}), not shown to the model]"
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {resource.uri} ({mime})]\n{resource.text}"
    size = _human_size(_decoded_size(resource.blob))
    return f"[binary resource {resource.uri} ({mime}, {size})]"


def block_text(block: types.ContentBlock) -> tuple[str, Image | None]:
    """Text for one content block, plus the image to attach when there is one."""
    match block:
        case types.TextContent():
            return block.text, None
        case types.ImageContent():
            size = _human_size(_decoded_size(block.data))
            return f"[image {block.mime_type}, {size}]", Image(block.mime_type, block.data)
        case types.AudioContent():
            size = _human_size(_decoded_size(block.data))
            return f"[audio {block.mime_type}, {size}]", None
        case types.ResourceLink():
            mime = block.mime_type or "unknown type"
            desc = f": {block.description}" if block.description else ""
            return f"[resource link {block.uri} ({mime}) {block.name}{desc}]", None
        case types.EmbeddedResource():
            return _resource_text(block.resource), None
    return f"[unsupported content {getattr(block, 'type', type(block).__name__)}]", None


def _structured_text(structured: Any) -> str:
    return "[structured content]\n" + json.dumps(structured, ensure_ascii=False, default=str)


def truncate(text: str, max_chars: int) -> tuple[str, int]:
    """Keep the head and tail, say how much of the middle was cut."""
    if len(text) <= max_chars:
        return text, 0
    cut = len(text) - max_chars
    head = max_chars * 3 // 4
    tail = max_chars - head
    note = f"\n[... {cut} characters cut (output was {len(text)} characters) ...]\n"
    return text[:head] + note + (text[-tail:] if tail else ""), cut


def to_observation(result: types.CallToolResult, server: str, max_chars: int) -> Observation:
    texts: list[str] = []
    images: list[Image] = []
    for block in result.content:
        text, image = block_text(block)
        texts.append(text)
        if image is not None:
            images.append(image)
    # One copy for the model: servers that follow the spec put the same data in a text
    # block and in structuredContent (a 2 MB file would be sent twice). The text wins; the
    # structured data is sent only when there is no text. JSON output and the transcript
    # keep both (Observation.structured).
    structured = result.structured_content
    if structured is not None and not any(isinstance(b, types.TextContent) for b in result.content):
        texts.append(_structured_text(structured))
    body = valid_unicode("\n".join(texts)) if texts else "(no output)"
    whole = body
    body, cut = truncate(body, max_chars)
    prefix = "The tool reported an error:\n" if result.is_error else ""
    return Observation(
        text=prefix + envelope(server, body),
        is_error=bool(result.is_error),
        images=tuple(images),
        truncated_chars=cut,
        structured=structured,
        whole=whole if cut else None,
        result=result,
    )


def error_observation(server: str | None, message: str) -> Observation:
    """A failure around the tool (timeout, dead server, bad arguments).

    Our own messages need no envelope; text that may echo a server does.
    """
    text = f"Error: {message}"
    return Observation(text=envelope(server, text) if server else text, is_error=True)
