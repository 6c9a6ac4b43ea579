"""Big tool results stay out of the window: the whole text is kept in the session's folder,
the model gets head, tail and a handle, and pages through it (or searches it) with the
agent's own tool `read_result`.

One file per result (`<session>.results/rN.txt`, private like the transcript); the store
knows which server each came from, so every page goes back in that server's envelope.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.tools.results import Observation, envelope, error_observation

READ_RESULT = "read_result"
DEFAULT_PAGE = 4000  # characters a read returns unless `limit` says otherwise
MAX_MATCHES = 50  # lines a pattern search returns
MATCH_LINE = 300  # characters of one matching line


@dataclass(frozen=True)
class _Kept:
    path: Path
    server: str
    size: int


class ResultStore:
    """The session's kept results, numbered r1, r2, … in the order they were kept."""

    def __init__(self, folder: Path, redact: Callable[[str], str] = lambda text: text) -> None:
        self.folder = folder
        self.redact = redact  # what is saved passes the redactor, like the transcript
        self._kept: dict[str, _Kept] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def keep(self, server: str, text: str) -> str:
        """Save `text`; return its handle."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle = f"r{len(self._kept) + 1}"
        while (self.folder / f"{handle}.txt").exists():  # a resumed session's earlier ones
            handle = f"r{int(handle[1:]) + 1}"
        path = self.folder / f"{handle}.txt"
        text = self.redact(text)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        self._kept[handle] = _Kept(path, server, len(text))
        return handle

    def shortened(self, server: str, observation: Observation) -> Observation:
        """A cut observation with the handle to its whole text (kept now)."""
        if observation.whole is None:
            return observation
        handle = self.keep(server, observation.whole)
        size = len(observation.whole)
        note = (
            f"[Output cut to its head and tail. The whole {size:,} characters are kept as "
            f'result "{handle}": call {READ_RESULT} with {{"id": "{handle}", "offset": N, '
            '"limit": N} to read a part, or {"id": ..., "pattern": "regex"} to find lines.]\n'
        )
        return replace(observation, text=note + observation.text, whole=None)

    def read(self, arguments: dict[str, Any]) -> Observation:
        """Run `read_result`: a page of a kept result, or its lines matching `pattern`."""
        handle = arguments.get("id")
        kept = self._kept.get(handle) if isinstance(handle, str) else None
        if kept is None and isinstance(handle, str) and re.fullmatch(r"r\d{1,9}", handle):
            path = self.folder / f"{handle}.txt"  # kept before this session was resumed
            if path.is_file():
                kept = self._kept[handle] = _Kept(path, "kept result", path.stat().st_size)
        if kept is None or not isinstance(handle, str):
            known = ", ".join(self._kept) or "none yet"
            return error_observation(None, f"{READ_RESULT}: no result {handle!r} (kept: {known})")
        offset, limit = arguments.get("offset", 0), arguments.get("limit", DEFAULT_PAGE)
        for name, value in (("offset", offset), ("limit", limit)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return error_observation(None, f"{READ_RESULT}: `{name}` must be an integer >= 0")
        limit = min(limit or DEFAULT_PAGE, DEFAULT_PAGE * 5)
        text = kept.path.read_text(encoding="utf-8")
        pattern = arguments.get("pattern")
        if pattern is not None:
            return self._search(handle, kept, text, pattern, offset, limit)
        part = text[offset : offset + limit]
        end = offset + len(part)
        head = f"[result {handle}: characters {offset:,}-{end:,} of {kept.size:,}]\n"
        return Observation(text=head + envelope(kept.server, part))

    def _search(
        self, handle: str, kept: _Kept, text: str, pattern: Any, offset: int, limit: int
    ) -> Observation:
        if not isinstance(pattern, str) or not pattern:
            return error_observation(None, f"{READ_RESULT}: `pattern` must be a non-empty string")
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            return error_observation(None, f"{READ_RESULT}: `pattern` is not a regex ({exc})")
        lines: list[str] = []
        at = total = 0
        for line in text.splitlines(keepends=True):
            if at >= offset and regex.search(line):
                total += 1
                if len(lines) < MAX_MATCHES:
                    lines.append(f"{at}: {line.rstrip()[:MATCH_LINE]}")
            at += len(line)
        body = "\n".join(lines)[:limit] or "(no line matches)"
        head = (
            f"[result {handle}: {total} lines match {json.dumps(pattern)} from character "
            f"{offset:,}; each line starts with its character offset]\n"
        )
        return Observation(text=head + envelope(kept.server, body))


READ_RESULT_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": READ_RESULT,
        "description": (
            "Read part of a tool result that was too long to show whole (its id was given "
            "with the cut output), or find its lines matching a regex."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": 'The result\'s id, e.g. "r1".'},
                "offset": {"type": "integer", "description": "First character (default 0)."},
                "limit": {
                    "type": "integer",
                    "description": f"Characters to read (default {DEFAULT_PAGE}).",
                },
                "pattern": {"type": "string", "description": "A regex: return matching lines."},
            },
            "required": ["id"],
        },
    },
}
