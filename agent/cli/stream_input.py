"""`--input-format stream-json`: stdin as JSON lines, read off the event loop.

Each line is Claude Code's user message, `{"type": "user", "message": {"role": "user",
"content": TEXT or [{"type": "text", "text": ...}, ...]}}`, or a control request,
`{"type": "control_request", "request_id": ID, "request": {"subtype": "interrupt"}}`.
The lines come from another program and are untrusted: each is read with a size limit in
a thread of its own (a line that never ends cannot hold the event loop or memory), and a
blank, oversized, non-UTF-8, malformed, too deeply nested or unknown one is an
`InputError` the front end reports as an `error` line; the session goes on.
"""

from __future__ import annotations

import contextlib
import json
import threading
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio
from anyio import from_thread, lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from agent.common.json_limits import TooDeep
from agent.common.json_limits import loads as load_json_line

MAX_LINE_BYTES = 8 * 1024 * 1024  # one message; a longer line is skipped with an error
QUEUED_LINES = 64  # read ahead of the turns; past it the reader waits (the pipe fills)


@dataclass(frozen=True)
class UserTurn:
    text: str
    line: int


@dataclass(frozen=True)
class Interrupt:
    request_id: str | None
    line: int


@dataclass(frozen=True)
class InputError:
    message: str
    line: int


InputLine = UserTurn | Interrupt | InputError


def parse_line(raw: bytes, number: int) -> InputLine:
    """One input line, decided once: a turn, an interrupt, or what is wrong with it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return InputError(f"line {number} is not UTF-8 (byte {exc.start})", number)
    if not text.strip():
        return InputError(f"line {number} is blank: send one JSON object per line", number)
    try:
        data = load_json_line(text)
    except TooDeep as exc:
        return InputError(f"line {number}: {exc}", number)
    except json.JSONDecodeError as exc:
        return InputError(f"line {number} is not JSON: {exc.msg} at column {exc.colno}", number)
    if not isinstance(data, dict):
        return InputError(f"line {number}: expected a JSON object, got {_kind(data)}", number)
    kind = data.get("type")
    if kind == "user":
        return _user_turn(data.get("message"), number)
    if kind == "control_request":
        request = data.get("request")
        subtype = request.get("subtype") if isinstance(request, dict) else None
        request_id = data.get("request_id")
        if subtype != "interrupt":
            return InputError(
                f"line {number}: unsupported control request {subtype!r} (only 'interrupt')",
                number,
            )
        return Interrupt(request_id if isinstance(request_id, str) else None, number)
    return InputError(
        f"line {number}: unknown type {kind!r}: expected 'user' or 'control_request'", number
    )


def _user_turn(message: Any, number: int) -> InputLine:
    where = f"line {number}"
    if not isinstance(message, dict) or message.get("role") != "user":
        return InputError(f'{where}: "message" must be {{"role": "user", "content": ...}}', number)
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else _kind(block)
            if kind != "text" or not isinstance(block.get("text"), str):
                return InputError(
                    f"{where}: content block of type {kind!r}: only text blocks are supported",
                    number,
                )
            parts.append(block["text"])
        text = "\n".join(parts)
    else:
        return InputError(f"{where}: content must be a string or a list of text blocks", number)
    if not text.strip():
        return InputError(f"{where}: the message is empty", number)
    return UserTurn(text, number)


def _kind(value: Any) -> str:
    return type(value).__name__ if not isinstance(value, dict) else "object"


def read_lines(stream: BinaryIO, send: MemoryObjectSendStream[InputLine]) -> None:
    """Start a daemon thread that parses `stream`'s lines into `send` (closed at the end
    of input). A thread of its own, not anyio's pool: a reader blocked on an open stdin
    must not keep the process from ending once the session is over."""
    token = lowlevel.current_token()

    def deliver(item: InputLine) -> bool:
        try:
            from_thread.run(send.send, item, token=token)
        except (RuntimeError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False  # the session is over
        return True

    def run() -> None:
        number = 0
        try:
            while True:
                raw = stream.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    break
                number += 1
                if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    _skip_rest(stream)
                    item: InputLine = InputError(
                        f"line {number} is longer than {MAX_LINE_BYTES // 2**20} MiB: skipped",
                        number,
                    )
                else:
                    item = parse_line(raw.rstrip(b"\r\n"), number)
                if not deliver(item):
                    return
        except (OSError, ValueError):
            pass  # stdin closed under us: the end of input
        finally:
            with contextlib.suppress(RuntimeError):
                from_thread.run_sync(send.close, token=token)

    threading.Thread(target=run, name="stream-json input", daemon=True).start()


def _skip_rest(stream: BinaryIO) -> None:
    """Discard the rest of an oversized line, in pieces (never held whole)."""
    while True:
        piece = stream.readline(1024 * 1024)
        if not piece or piece.endswith(b"\n"):
            return
