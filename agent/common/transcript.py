"""Session transcripts: append-only JSONL, one line per memory change, flushed each time.

A crash (even SIGKILL) loses at most the step in flight. On resume a corrupted last line
(power cut mid-write) is skipped with a warning and everything before it is kept; the first
write after resume cuts that partial line off, so the next record starts on a fresh line
and is not lost to a merged, unreadable line on the resume after.
Every record is redacted before it is written: a transcript outlives the run and is easy
to share, so keys and bearer tokens never reach it (the live memory is not changed).
Image data never goes into a record: the bytes are files in the session's folder
(`<id>/images/`, agent.common.images) and the record names the file; a resume reads back only the
newest images a request may carry.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from agent.common import json_limits
from agent.common.errors import ConfigError
from agent.common.images import (
    ImageBudget,
    ImageStore,
    human_size,
    part_data,
    rewrite_newest_first,
)
from agent.common.memory import Message, estimate_tokens
from agent.common.private import private_folder
from agent.common.redact import PATTERNS_ONLY, Redactor
from agent.common.text import valid_unicode

_CHUNK = 64 * 1024
IMAGE_FILE = "image_file"  # a transcript's image part: the data is a file beside it


def sessions_dir(state_dir: Path) -> Path:
    return state_dir / "sessions"


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


@dataclass
class Transcript:
    """An open session file; `append` is the memory's sink."""

    path: Path
    redact: Redactor = field(default=PATTERNS_ONLY, repr=False)
    _fh: IO[str] | None = field(default=None, repr=False)

    @property
    def session_id(self) -> str:
        return self.path.stem

    @property
    def images(self) -> ImageStore:
        """The session's image folder, `<sessions>/<id>/images/`."""
        return ImageStore(self.path.with_suffix("") / "images")

    @classmethod
    def create(
        cls, state_dir: Path, meta: dict[str, Any], redactor: Redactor = PATTERNS_ONLY
    ) -> Transcript:
        folder = sessions_dir(state_dir)
        private_folder(folder)
        transcript = cls(folder / f"{new_session_id()}.jsonl", redactor)
        transcript._write({"type": "meta", "created": time.time(), **meta})
        return transcript

    def _write(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            # Never through a link planted in its place (_session_files passes none either).
            flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
            fd = os.open(self.path, flags, 0o600)
            _end_on_fresh_line(fd)
            self._fh = os.fdopen(fd, "a", encoding="utf-8")
        line = json.dumps(self.redact.deep(record), ensure_ascii=False)
        self._fh.write(valid_unicode(line) + "\n")  # a stray surrogate must not lose the line
        self._fh.flush()

    def append(self, message: Message) -> None:
        self._write({"type": "message", "message": self._image_files(message)})

    def _image_files(self, message: Message) -> Message:
        """The message with each image's data written to a file and named instead."""
        content = message.get("content")
        if not isinstance(content, list) or not any(part_data(p) for p in content):
            return message
        parts: list[Any] = []
        for part in content:
            found = part_data(part)
            if found is None:
                parts.append(part)
                continue
            saved = self.images.save(*found)
            if saved.path is None:
                note = f"[image {saved.mime_type}, {human_size(saved.bytes)}: {saved.note}]"
                parts.append({"type": "text", "text": note})
            else:
                name = Path(saved.path).name
                parts.append({"type": IMAGE_FILE, "mime_type": saved.mime_type, "file": name})
        return {**message, "content": parts}

    def mark(self, kind: str, **data: Any) -> None:
        """Non-message records: a cleared memory, a cancelled or finished run."""
        self._write({"type": kind, **data})

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def _last_line_start(fd: int, size: int) -> int:
    """Offset just past the last newline (0 if none), read backwards in chunks."""
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        newline = os.pread(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _end_on_fresh_line(fd: int) -> None:
    """Make an appended record start a line of its own.

    A power cut can leave the file ending mid-record. Appending straight after it would
    glue the next record onto that line and make both unreadable on the next resume. A
    tail that is a whole record missing only its newline is kept (load read it); any
    other partial line was skipped by load with a warning, so it is cut off.
    """
    size = os.lseek(fd, 0, os.SEEK_END)
    start = _last_line_start(fd, size)
    if start == size:
        return
    try:
        complete = isinstance(json.loads(os.pread(fd, size - start, start)), dict)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError alike
        complete = False
    if complete:
        os.write(fd, b"\n")
    else:
        os.ftruncate(fd, start)


@dataclass(frozen=True)
class Loaded:
    transcript: Transcript
    messages: list[Message]
    warnings: list[str]


def find_session(state_dir: Path, session: str, workspace: Path | None = None) -> Path:
    """`latest` (the newest session of `workspace`, the folder it was started in; of any
    folder when None) or an id (or a unique prefix of one), whatever its folder."""
    folder = sessions_dir(state_dir)
    files = _session_files(folder)
    if not files:
        raise ConfigError(f"--resume: no saved sessions in {folder}")
    if session in ("latest", ""):
        if workspace is None:
            return files[-1]
        here = saved_sessions(state_dir, workspace, limit=1)
        if not here:
            raise ConfigError(
                f"--resume: no saved session was started in this folder ({workspace}); "
                f"'run_mcp.py --resume --all' lists every folder's ({len(files)} saved), "
                "--resume ID continues one"
            )
        return here[0].path
    # A serve `session_id` is the transcript's id, a dot and a secret (never on disk):
    # the part before the dot names the file.
    session = session.split(".", 1)[0]
    matches = [f for f in files if f.stem.startswith(session)]
    if len(matches) != 1:
        what = "no session matches" if not matches else f"{len(matches)} sessions match"
        recent = "; ".join(
            f"{sid} ({first})" if first else sid for sid, first in list_sessions(state_dir, 3)
        )
        raise ConfigError(f"--resume {session}: {what} in {folder}; latest: {recent}")
    return matches[0]


def _session_files(folder: Path) -> list[Path]:
    """The saved sessions, oldest first: regular files of this user's, as the agent writes
    them; a link planted among them is not one (loading it would read, and the next
    append write, somewhere else)."""

    def own(path: Path) -> bool:
        try:
            found = path.lstat()
        except OSError:
            return False
        return stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid()

    return sorted(filter(own, folder.glob("*.jsonl"))) if folder.is_dir() else []


@dataclass(frozen=True)
class SavedSession:
    """A saved session as a list shows it: read from the head of its file only."""

    path: Path
    workspace: str | None  # the folder it was started in (None: saved before it was recorded)
    first: str  # its first request, one line

    @property
    def session_id(self) -> str:
        return self.path.stem

    @property
    def started(self) -> str:
        """`2026-11-27 03:10` from the id (`20261127-031012-ab12`)."""
        sid = self.session_id
        if len(sid) < 13 or not sid[:8].isdigit():
            return ""
        return f"{sid[:4]}-{sid[4:6]}-{sid[6:8]} {sid[9:11]}:{sid[11:13]}"


def saved_sessions(
    state_dir: Path, workspace: Path | None = None, limit: int = 20, keep: str | None = None
) -> list[SavedSession]:
    """The newest saved sessions started in `workspace` (every folder's when None), newest
    first, leaving out those nothing was asked in (a REPL opened and left) but `keep` (the
    session running now). Sessions saved before transcripts recorded their folder belong
    to none: they are listed only for every folder (`--resume ID` continues any session)."""
    folder = sessions_dir(state_dir)
    want = str(workspace) if workspace is not None else None
    found: list[SavedSession] = []
    for path in reversed(_session_files(folder)):
        if len(found) >= limit:
            break
        cwd = _started_in(path)
        if want is not None and cwd != want:
            continue
        first = _first_request(path).strip()
        if first or path.stem == keep:
            line = first.splitlines()[0] if first else ""
            found.append(SavedSession(path, cwd, line if len(line) <= 60 else line[:59] + "…"))
    return found


RESUME_TOKENS = 256_000  # history read back at most (estimated): twice a large window
_RESUME_CHUNK = 1024 * 1024


def load(path: Path, redactor: Redactor = PATTERNS_ONLY, max_tokens: int = RESUME_TOKENS) -> Loaded:
    """Rebuild the memory of a session; skip lines that cannot be read, with a warning.

    Read from the end: a request sends the newest messages that fit the context window, so
    resuming costs that, not the file's size (a 1 GB transcript, 210,000 messages, took
    19 s and 2.3 GB read whole). Reading stops at a `clear` (a /clear or a compaction:
    nothing above it is the session's any more), or once `max_tokens` of history are
    read; the kept history then starts at a user message, never at a dangling result.
    """
    messages: list[Message] = []  # newest first
    warnings: list[str] = []
    tokens = back = 0
    for line in _lines_from_end(path):
        if not line.strip():
            continue
        back += 1
        where = "last line" if back == 1 else f"line {back} from the end"
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("a record is an object")
        except (ValueError, RecursionError):  # RecursionError: nested too deep to read
            warnings.append(f"{path.name}: {where} is corrupted and was skipped")
            continue
        if record.get("type") == "clear":
            break
        if record.get("type") == "message" and isinstance(record.get("message"), dict):
            if not _well_formed(record["message"]):
                warnings.append(f"{path.name}: {where} is not a message the agent writes: skipped")
                continue
            message = dict(record["message"])
            message.pop("structured_content", None)  # kept for the record, not for the model
            messages.append(message)
            tokens += estimate_tokens(message)
            if tokens > max_tokens and message.get("role") == "user":
                break
    messages.reverse()
    if tokens > max_tokens:  # cut: start at a user message (it ends the loop when found)
        while messages and messages[0].get("role") != "user":
            messages.pop(0)
    warnings.reverse()
    transcript = Transcript(path, redactor)
    return Loaded(transcript, read_back_images(messages, transcript.images), warnings)


def _well_formed(message: dict[str, Any]) -> bool:
    """A message of a role the agent writes, with what that role needs: a forged `system`
    (or any other) role must not reach the model beside the real system prompt, and a
    malformed one must not end the resume in an exception later."""
    role = message.get("role")
    if role == "tool":
        return isinstance(message.get("tool_call_id"), str)
    if role == "user":
        return isinstance(message.get("content"), str | list)
    if role != "assistant":
        return False
    calls = message.get("tool_calls") or []
    return isinstance(calls, list) and all(
        isinstance(c, dict)
        and isinstance(c.get("id"), str)
        and isinstance(c.get("function"), dict)
        and isinstance(c["function"].get("name"), str)
        and isinstance(c["function"].get("arguments", ""), str)
        for c in calls
    )


def _lines_from_end(path: Path) -> Iterator[str]:
    """The file's lines, last first, read backwards a megabyte at a time."""
    with path.open("rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        tail = b""  # the start of a line whose beginning lies in an earlier chunk
        while end > 0:
            start = max(0, end - _RESUME_CHUNK)
            fh.seek(start)
            block = fh.read(end - start) + tail
            end = start
            lines = block.split(b"\n")
            tail = lines.pop(0) if start > 0 else b""
            for raw in reversed(lines):
                yield raw.decode("utf-8", errors="replace")
            if start == 0:
                break


def read_back_images(messages: list[Message], store: ImageStore) -> list[Message]:
    """Image files back into data parts, newest first, as many as one request may carry
    (agent.common.images); older ones, and files that are gone, become a note."""
    budget = ImageBudget()

    def read_back(part: Any) -> dict[str, Any] | None:
        if not (isinstance(part, dict) and part.get("type") == IMAGE_FILE):
            return None
        mime, name = str(part.get("mime_type")), str(part.get("file"))
        size = _file_size(store.path_of(name))
        data = store.load(name) if budget.fits(size) else None
        if data is None:
            return budget.note()
        budget.take(size)
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}

    return rewrite_newest_first(messages, read_back)


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def list_sessions(state_dir: Path, limit: int = 20) -> list[tuple[str, str]]:
    """(id, first user line) for the newest sessions."""
    folder = sessions_dir(state_dir)
    out: list[tuple[str, str]] = []
    for path in _session_files(folder)[::-1][:limit]:
        first = _first_request(path)
        out.append((path.stem, str(first).splitlines()[0][:60] if first else ""))
    return out


def _first_request(path: Path, limit: int = 200) -> str:
    """The first user message of a session, from the head of its file (never all of it)."""
    with contextlib.suppress(OSError), path.open(encoding="utf-8", errors="replace") as fh:
        for _, line in zip(range(limit), fh, strict=False):
            with contextlib.suppress(ValueError, AttributeError):
                message = json_limits.loads(line).get("message") or {}
                if message.get("role") == "user" and isinstance(message.get("content"), str):
                    return str(message["content"])
    return ""


def _started_in(path: Path) -> str | None:
    """The folder a session was started in, from its first line (the `meta` record);
    None for a session saved before transcripts recorded it."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        with path.open(encoding="utf-8", errors="replace") as fh:
            record = json.loads(fh.readline(64 * 1024))
        cwd = record.get("cwd") if record.get("type") == "meta" else None
        return cwd if isinstance(cwd, str) else None
    return None


def save_export(text: str, state_dir: Path, session_id: str, name: str = "") -> Path:
    """Write an export (/save) readable by its owner only: a conversation holds what the
    tools read. With no name it goes to `<state>/exports/`, not the working directory,
    where it would sit in a checkout one `git add .` away from being published."""
    if name:
        path = Path(name).expanduser()
    else:
        folder = state_dir / "exports"
        private_folder(folder)
        path = folder / f"{session_id}.md"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fd, 0o600)  # a file that existed keeps its old mode otherwise
        fh.write(valid_unicode(text))
    return path


def to_markdown(messages: list[Message]) -> str:
    """A readable export for /save."""
    parts = ["# Conversation\n"]
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if isinstance(content, list):  # images after tool results: their text, no data
            content = "\n".join(
                p.get("text", "") if p.get("type") == "text" else "[image]"
                for p in content
                if isinstance(p, dict)
            )
        if role == "user":
            parts.append(f"## You\n\n{content}\n")
        elif role == "assistant":
            if content:
                parts.append(f"## Assistant\n\n{content}\n")
            for call in message.get("tool_calls") or []:
                fn = call["function"]
                parts.append(f"**Tool call** `{fn['name']}`\n\n```json\n{fn['arguments']}\n```\n")
        elif role == "tool":
            parts.append(f"**Result** (`{message.get('tool_call_id')}`)\n\n```\n{content}\n```\n")
    return "\n".join(parts)
