"""CallToolResult -> what the model observes.

Every content block is kept in some form; images and audio become short placeholders in
the text (and images are attached separately for vision models, within the bounds of
agent.common.images: a placeholder says when one is left out, and why). The text is cut to
`max_chars` and wrapped in an envelope that marks it as untrusted data from a named server.

The envelope is a begin and an end line around the text:

    <untrusted-data server="local" id="3f9a1c2e7b4d">
    ...
    </untrusted-data id="3f9a1c2e7b4d">

The id is a hash of the server's name and the text, so the same result is the same bytes in
every run (identical prompts stay identical at temperature 0, and a server's prefix cache
keeps working; issue 33 found a random id per call defeated both), while text inside cannot
know it ahead: it would have to contain its own hash. Any envelope tag inside the content
is escaped besides (`&lt;/untrusted-data`), so a result cannot end its own envelope and
speak as if from outside. The system prompt says what tool results are without naming the
tag: a small model writes back a tag it is told about (issue 33: 4 of 69 replies, twice as
the whole answer), not one it only sees around results; measured with bench/realmodel, a
1.5B model took bracketed plain-text lines for something other than a result and repeated
its call, which it did not do with the tag.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

import mcp.types as types

from agent.common.images import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES_PER_RESULT,
    MAX_SAVED_PER_RESULT,
    ImageStore,
    SavedImage,
    decoded_size,
    human_size,
)
from agent.common.text import valid_unicode
from agent.tools.uimeta import is_app_page


@dataclass(frozen=True)
class Image:
    mime_type: str
    data: str  # base64
    to_model: bool = True  # within the bounds for the model (else saved for the user only)


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
    r'<untrusted-data server="(?:[^"\\\n]|\\.)*" id="(?P<id>[0-9a-f]{8,12})">[^\n]*\n'
    r'(?P<body>.*)\n</untrusted-data id="(?P=id)">(?P<tail>\n.*)?$',
    re.DOTALL,
)
# The tags as a model echoes them into its own words: alone on a line, the line goes.
_ECHOED = re.compile(
    r"(?im)^[ \t]*</?untrusted-data(?:\s[^<>\n]*)?>[ \t]*(?:\n|$)|</?untrusted-data(?:\s[^<>\n]*)?>"
)


def envelope(server: str, body: str) -> str:
    """`body` marked as untrusted data from `server`, between a begin and an end line with
    an id made from both (the same result gives the same bytes; the text cannot know its id).

    About 25 tokens in all: the system prompt says once what tool results are (see
    agent.common.memory.UNTRUSTED_STATEMENT), so each result carries only the tags.
    """
    body = _TAG_IN_CONTENT.sub("&lt;", body)
    name = json.dumps(server, ensure_ascii=False)
    digest = hashlib.sha256(f"{name}\n{body}".encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f'<{_TAG} server={name} id="{digest}">\n{body}\n</{_TAG} id="{digest}">'


def strip_marker(output: str) -> str:
    """The content without its envelope, for people and scripts; the envelope is for the model.
    What follows the envelope (notes of the user's hooks) is kept."""
    head, tag, rest = output.partition(f'<{_TAG} server="')
    match = _ENVELOPE.match(tag + rest) if tag else None
    return head + match.group("body") + (match.group("tail") or "") if match else output


def without_envelope_tags(text: str) -> str:
    """A model's words without the envelope tags it echoed from tool results: they mark data
    for the model, and mean nothing to the person reading the answer (nor are they part of a
    call the model wrote between them)."""
    return _ECHOED.sub("", text) if "untrusted-data" in text.lower() else text


_decoded_size, _human_size = decoded_size, human_size


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


def _bounded_images(
    blocks: list[types.ContentBlock],
) -> tuple[list[str | None], list[Image], str]:
    """A placeholder per image block (None: counted in the last line instead), the images,
    and the line on those left out by count; within agent.common.images' bounds."""
    texts: list[str | None] = []
    images: list[Image] = []
    sent = more = 0
    for block in blocks:
        if not isinstance(block, types.ImageContent):
            continue
        size = decoded_size(block.data)
        to_model = size <= MAX_IMAGE_BYTES and sent < MAX_IMAGES_PER_RESULT
        if len(images) < MAX_SAVED_PER_RESULT:  # the user's copies; beyond, the data goes
            images.append(Image(block.mime_type, block.data, to_model))
        words = f"image {block.mime_type}, {human_size(size)}"
        if to_model:
            sent += 1
            texts.append(f"[{words}]")
        elif size > MAX_IMAGE_BYTES:
            limit = human_size(MAX_IMAGE_BYTES)
            texts.append(f"[{words}: not shown to the model, over its {limit} limit per image]")
        else:
            more += 1
            texts.append(None)
    left_out = (
        f"[{more} more image(s) not shown to the model: it gets at most "
        f"{MAX_IMAGES_PER_RESULT} per tool result]"
        if more
        else ""
    )
    return texts, images, left_out


def to_observation(result: types.CallToolResult, server: str, max_chars: int) -> Observation:
    texts: list[str] = []
    image_texts, images, left_out = _bounded_images(result.content)
    placeholders = iter(image_texts)
    for block in result.content:
        if not isinstance(block, types.ImageContent):
            texts.append(block_text(block)[0])
        elif (placeholder := next(placeholders)) is not None:
            texts.append(placeholder)
    if left_out:
        texts.append(left_out)
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


def save_images(
    store: ImageStore | None, observation: Observation
) -> tuple[Observation, tuple[SavedImage, ...]]:
    """Write a result's images to the session's folder for the user; the observation
    keeps only the data of those that go to the model (a 20 MB image left out is not held
    in memory any longer). Blocking file I/O: run it in a worker thread."""
    if not observation.images:
        return observation, ()
    saved = tuple(store.save(i.mime_type, i.data) for i in observation.images) if store else ()
    kept, sent = [], 0
    for image in observation.images:  # also images that did not come from to_observation
        if image.to_model and decoded_size(image.data) <= MAX_IMAGE_BYTES:
            if sent < MAX_IMAGES_PER_RESULT:
                kept.append(image)
            sent += 1
    return replace(observation, images=tuple(kept)), saved


def error_observation(server: str | None, message: str) -> Observation:
    """A failure around the tool (timeout, dead server, bad arguments).

    Our own messages need no envelope; text that may echo a server does.
    """
    text = f"Error: {message}"
    return Observation(text=envelope(server, text) if server else text, is_error=True)
