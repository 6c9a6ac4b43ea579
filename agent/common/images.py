"""Images from tools: what reaches the model, what it costs, where the bytes are kept.

A server can return any number of images of any size, and every request re-sends the
history. Unbounded, one 20 MB screenshot returned three times made requests of 27, 55 and
83 MB and an 84 MB transcript. So:

- **Per image**: at most `MAX_IMAGE_BYTES` (decoded) goes to the model. No image library is
  a dependency, so a larger image is not downscaled but left out, with a placeholder that
  says so (the file is still saved for the user).
- **Per tool result**: at most `MAX_IMAGES_PER_RESULT` go to the model; one line says how
  many more there were.
- **Per request**: the history keeps image data for the newest `MAX_REQUEST_IMAGES` images,
  `MAX_REQUEST_IMAGE_BYTES` in all; older ones become a text note (`bound_images`), so no
  request carries more, however long the session.
- **Cost**: an image part is counted as the tokens an OpenAI-style endpoint charges for its
  size (read from the PNG / JPEG / GIF / WebP header), so trimming weighs it honestly.
- **Transcript and user**: the bytes are written once to the session's folder
  (`<state>/sessions/<id>/images/<hash>.<ext>`, content-addressed, 0600); the transcript
  records the file name, not the data, and the user is shown the path.

Standard library (and agent.common.private) only: memory, transcript and results all use it.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import math
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.common.private import private_folder

MAX_IMAGE_BYTES = 4 * 1024 * 1024  # one image, decoded
MAX_IMAGES_PER_RESULT = 8
MAX_REQUEST_IMAGES = 20
MAX_REQUEST_IMAGE_BYTES = 8 * 1024 * 1024  # all images of one request, decoded
MAX_SAVED_PER_RESULT = 100  # images of one result written to the session's folder
# OpenAI's high-detail rule: fit 2048 x 2048, shortest side to 768, 170 per 512 px tile
# plus 85. An image whose size cannot be read is counted at the rule's maximum.
TILE_TOKENS, BASE_TOKENS, MAX_IMAGE_TOKENS = 170, 85, 85 + 170 * 8
_HEAD_CHARS = 256 * 1024  # base64 characters decoded to find an image's size
_EXTENSIONS = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "image/svg+xml": "svg",
    "image/bmp": "bmp",
}
NOT_RESENT = (
    "[image not sent again: the model gets the newest {count} images, "
    "{megabytes} MB in all; it saw this one before]"
)


def decoded_size(data: str) -> int:
    """Bytes a base64 string decodes to, by arithmetic (no 20 MB decode to learn a size)."""
    n = len(data.rstrip("="))
    return n * 3 // 4


def human_size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / (1024 * 1024):.1f} MB"


def dimensions(data: str) -> tuple[int, int] | None:
    """(width, height) from the image header, for PNG, GIF, JPEG and WebP."""
    head_chars = min(len(data), _HEAD_CHARS) // 4 * 4
    try:
        head = base64.b64decode(data[:head_chars], validate=False)
    except (binascii.Error, ValueError):
        return None
    try:
        if head.startswith(b"\x89PNG\r\n\x1a\n") and head[12:16] == b"IHDR":
            return struct.unpack(">II", head[16:24])
        if head[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", head[6:10])
        if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
            return _webp_size(head)
        if head[:2] == b"\xff\xd8":
            return _jpeg_size(head)
    except struct.error:
        return None
    return None


def _webp_size(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8X":
        w = int.from_bytes(head[24:27], "little") + 1
        return w, int.from_bytes(head[27:30], "little") + 1
    if chunk == b"VP8L":
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        w, h = struct.unpack("<HH", head[26:30])
        return w & 0x3FFF, h & 0x3FFF
    return None


def _jpeg_size(head: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(head):
        if head[at] != 0xFF:
            return None
        marker = head[at + 1]
        length = struct.unpack(">H", head[at + 2 : at + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE):
            h, w = struct.unpack(">HH", head[at + 5 : at + 9])
            return w, h
        at += 2 + length
    return None


def image_tokens(data: str) -> int:
    """What an OpenAI-style endpoint charges for this image at high detail."""
    size = dimensions(data)
    if size is None or not all(size):
        return MAX_IMAGE_TOKENS
    fit = min(1.0, 2048 / max(size))
    w, h = size[0] * fit, size[1] * fit
    shrink = min(1.0, 768 / min(w, h))
    w, h = w * shrink, h * shrink
    return BASE_TOKENS + TILE_TOKENS * math.ceil(w / 512) * math.ceil(h / 512)


# -- image parts of chat messages


def _split_data_url(url: str) -> tuple[str, str] | None:
    """(mime, base64 data) of a data URL, or None."""
    if not url.startswith("data:"):
        return None
    head, _, data = url.partition(",")
    mime = head[5:].split(";", 1)[0]
    return mime, data


def part_data(part: Any) -> tuple[str, str] | None:
    """(mime, base64) of an `image_url` part with a data URL, else None."""
    if not isinstance(part, dict) or part.get("type") != "image_url":
        return None
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, dict) else None
    return _split_data_url(url) if isinstance(url, str) else None


def part_tokens(part: Any) -> int:
    found = part_data(part)
    return image_tokens(found[1]) if found else MAX_IMAGE_TOKENS


class ImageBudget:
    """What one request may still carry: the newest images are counted first, so the
    budget spent along a newest-first walk keeps the newest."""

    def __init__(self, count: int = MAX_REQUEST_IMAGES, size: int = MAX_REQUEST_IMAGE_BYTES):
        self.max_count, self.max_bytes = count, size
        self.count = self.total = 0

    def fits(self, size: int) -> bool:
        return self.count < self.max_count and self.total + size <= self.max_bytes

    def take(self, size: int) -> None:
        self.count, self.total = self.count + 1, self.total + size

    def note(self) -> dict[str, str]:
        """The text part that stands where an image is left out."""
        megabytes = f"{self.max_bytes / (1024 * 1024):g}"
        return {
            "type": "text",
            "text": NOT_RESENT.format(count=self.max_count, megabytes=megabytes),
        }


def rewrite_newest_first(
    messages: list[dict[str, Any]], rewrite: Callable[[Any], Any | None]
) -> list[dict[str, Any]]:
    """Every part of every list-content message, newest first, through `rewrite` (a new
    part, or None to keep it). Messages with no part changed are the same objects."""
    out = list(messages)
    for index in range(len(out) - 1, -1, -1):
        content = out[index].get("content")
        if not isinstance(content, list):
            continue
        parts, changed = list(content), False
        for at in range(len(parts) - 1, -1, -1):
            if (new := rewrite(parts[at])) is not None:
                parts[at], changed = new, True
        if changed:
            out[index] = {**out[index], "content": parts}
    return out


def bound_images(
    messages: list[dict[str, Any]],
    max_count: int = MAX_REQUEST_IMAGES,
    max_bytes: int = MAX_REQUEST_IMAGE_BYTES,
) -> list[dict[str, Any]]:
    """The messages with image data kept for the newest images within the bounds only;
    older image parts become a short text part. Unchanged messages are the same objects."""
    budget = ImageBudget(max_count, max_bytes)

    def over_budget(part: Any) -> dict[str, str] | None:
        found = part_data(part)
        if found is None:
            return None
        size = decoded_size(found[1])
        if budget.fits(size):
            budget.take(size)
            return None
        return budget.note()

    return rewrite_newest_first(messages, over_budget)


# -- the files


@dataclass(frozen=True)
class SavedImage:
    """An image a tool returned, as the user and `--output json` see it."""

    mime_type: str
    bytes: int
    path: str | None  # None: not saved (see `note`)
    note: str = ""


class ImageStore:
    """The session's image folder; files are named by their content's hash, so the same
    image returned three times is written once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path_of(self, name: str) -> Path:
        return self.folder / Path(name).name  # a name from a transcript: never a path

    def save(self, mime_type: str, data: str) -> SavedImage:
        """Write the image (base64 `data`); a failure is a note, never an exception."""
        try:
            raw = base64.b64decode(data, validate=False)
        except (binascii.Error, ValueError):
            return SavedImage(mime_type, decoded_size(data), None, "not valid base64")
        ext = _EXTENSIONS.get(mime_type.lower(), "bin")
        path = self.folder / f"{hashlib.sha256(raw).hexdigest()[:20]}.{ext}"
        try:
            if not path.exists():
                _write_private(path, raw)
        except OSError as exc:
            return SavedImage(mime_type, len(raw), None, f"not saved: {exc.strerror}")
        return SavedImage(mime_type, len(raw), str(path))

    def load(self, name: str) -> str | None:
        """The base64 data of a saved image, or None if it is gone."""
        try:
            return base64.b64encode(self.path_of(name).read_bytes()).decode("ascii")
        except OSError:
            return None


def _write_private(path: Path, raw: bytes) -> None:
    private_folder(path.parent)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
