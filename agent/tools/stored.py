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
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from agent.tools.results import Observation, envelope, error_observation

READ_RESULT = "read_result"
DEFAULT_PAGE = 4000  # characters a read returns unless `limit` says otherwise
MAX_MATCHES = 50  # lines a pattern search returns
MATCH_LINE = 300  # characters of one matching line
SEARCH_TIMEOUT = 10.0  # seconds a pattern search may run (agent/tools/result_search.py)
OUTPUT_CAP = 1 << 20  # bytes of the worker's output kept
SEARCH_WORKER = str(Path(__file__).with_name("result_search.py"))


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

    async def read(self, arguments: dict[str, Any]) -> Observation:
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
        pattern = arguments.get("pattern")
        if pattern is not None:
            return await self._search(handle, kept, pattern, offset, limit)
        text = kept.path.read_text(encoding="utf-8")
        part = text[offset : offset + limit]
        end = offset + len(part)
        head = f"[result {handle}: characters {offset:,}-{end:,} of {kept.size:,}]\n"
        return Observation(text=head + envelope(kept.server, part))

    async def _search(
        self, handle: str, kept: _Kept, pattern: Any, offset: int, limit: int
    ) -> Observation:
        if not isinstance(pattern, str) or not pattern:
            return error_observation(None, f"{READ_RESULT}: `pattern` must be a non-empty string")
        job = {"path": str(kept.path), "pattern": pattern, "offset": offset}
        job |= {"max_matches": MAX_MATCHES, "line_chars": MATCH_LINE}
        found, finished, exit_code = await _run_worker(job)
        if exit_code == 2:
            return error_observation(None, f"{READ_RESULT}: {found.strip()}")
        lines = found.splitlines()
        total = lines.pop() if finished and lines and lines[-1].startswith("total ") else ""
        body = "\n".join(lines)[:limit] or "(no line matches)"
        if finished:
            count = f"{total.removeprefix('total ')} lines match"
        else:
            count = f"the search stopped after {SEARCH_TIMEOUT:g} s; {len(lines)} lines matched"
            body += (
                "\n[search stopped: the pattern may backtrack badly (nested quantifiers such "
                "as (a+)+); simplify it, or read pages with offset and limit]"
            )
        head = (
            f"[result {handle}: {count} {json.dumps(pattern)} from character "
            f"{offset:,}; each line starts with its character offset]\n"
        )
        return Observation(text=head + envelope(kept.server, body))


async def _run_worker(job: dict[str, Any]) -> tuple[str, bool, int | None]:
    """(what the worker printed, whether it finished, its exit code). Killed at the deadline;
    the event loop stays free meanwhile, so Ctrl-C and signals work during a slow search."""
    command = [sys.executable, "-I", "-S", SEARCH_WORKER, json.dumps(job)]
    chunks: list[bytes] = []
    async with await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as process:
        assert process.stdout is not None
        try:
            with anyio.move_on_after(SEARCH_TIMEOUT) as scope:
                async for chunk in process.stdout:
                    if sum(map(len, chunks)) < OUTPUT_CAP:
                        chunks.append(chunk)
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                with anyio.CancelScope(shield=True):
                    await process.wait()
    text = b"".join(chunks).decode("utf-8", "replace")
    return text, not scope.cancelled_caught, process.returncode


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
