"""`--output stream-json`: what a program reading stdout sees, one JSON object a line.

The loop's events become lines as they happen (`event_line`); `StreamJsonOutput` adds the
`init` line, a `result` line per turn (every field of `--output json`) and the `error` and
`control_response` lines of `--input-format stream-json`. Every line passes the session's
redactor and leaves as escaped JSON (no control character reaches a terminal), through
the one writer. `FIELDS` is the documented schema (docs/programs.md): each type's keys,
always all of them, in this order; tests hold every line to it.

A reader that closes the pipe ends the run: the first failed write raises StdoutClosed
(once), stdout is pointed at /dev/null so nothing later fails on it, and the front end
stops the turn and closes the session as after Ctrl-C.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO, assert_never

from agent.common.redact import Redactor
from agent.common.text import valid_unicode
from agent.loop.events import (
    AssistantMessage,
    Event,
    ModelRetry,
    Notice,
    PlanUpdated,
    RunFinished,
    RunStarted,
    StepStarted,
    SubagentEvent,
    TaskUpdate,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    Usage,
)
from agent.tools.results import strip_marker
from agent.ui.output import EXIT_CODES, RESULT_KEYS, RunRecord, plan_json
from agent.ui.render import EventRenderer
from agent.ui.safe import json_text, terminal

FIELDS: dict[str, tuple[str, ...]] = {
    "init": ("type", "session_id", "model", "cwd", "approval", "servers", "tools"),
    "message": ("type", "role", "text", "delta", "tool_calls"),
    "tool_use": ("type", "id", "server", "tool", "name", "arguments"),
    "tool_progress": ("type", "id", "progress", "total", "message", "task"),
    "tool_result": (
        "type",
        "id",
        "server",
        "tool",
        "name",
        "is_error",
        "denied",
        "output",
        "structured_content",
        "duration_ms",
    ),
    "plan": ("type", "id", "plan", "explanation"),
    "notice": ("type", "level", "message"),
    "retry": ("type", "attempt", "delay", "reason", "discarded_text"),
    "result": ("type", "session_id", *RESULT_KEYS),
    "error": ("type", "error", "line"),
    "control_response": ("type", "response"),
}


class StdoutClosed(Exception):
    """The program reading stdout closed it: the run ends (see the module docstring)."""


def event_line(event: Event) -> dict[str, Any] | None:
    """The line an event becomes, or None for those no line stands for (a run's start and
    steps; its end is the `result` line, written with the whole record)."""
    match event:
        case RunStarted() | StepStarted() | RunFinished():
            return None
        case TextDelta():
            return _line("message", role="assistant", text=event.text, delta=True, tool_calls=[])
        case AssistantMessage():
            calls = list(event.tool_calls)
            return _line(
                "message", role="assistant", text=event.content, delta=False, tool_calls=calls
            )
        case ToolCallStarted():
            return _line(
                "tool_use",
                id=event.call_id,
                server=event.server or None,
                tool=event.tool,
                name=event.name,
                arguments=event.arguments,
            )
        case ToolProgress():
            return _line(
                "tool_progress",
                id=event.call_id,
                progress=event.progress,
                total=event.total,
                message=event.message,
                task=None,
            )
        case TaskUpdate():
            return _line(
                "tool_progress",
                id=event.call_id,
                progress=None,
                total=None,
                message=event.message,
                task={"id": event.task_id, "status": event.status},
            )
        case ToolCallFinished():
            return _line(
                "tool_result",
                id=event.call_id,
                server=event.server or None,
                tool=event.tool,
                name=event.name,
                is_error=event.is_error,
                denied=event.denied,
                output=strip_marker(event.output),
                structured_content=event.structured,
                duration_ms=round(event.duration_ms, 1),
            )
        case PlanUpdated():
            return _line(
                "plan", id=event.call_id, plan=plan_json(event), explanation=event.explanation
            )
        case Notice():
            return _line("notice", level=event.level, message=event.message)
        case ModelRetry():
            return _line(
                "retry",
                attempt=event.attempt,
                delay=event.delay,
                reason=event.reason,
                discarded_text=event.discarded_text,
            )
        case SubagentEvent():
            return subagent_line(event)
        case _:
            assert_never(event)


def subagent_line(event: SubagentEvent) -> dict[str, Any] | None:
    """A sub-agent's event as the line it would be in its own stream, marked with the
    parent's `task` call, as Claude Code marks them: `parent_tool_use_id`, the last key."""
    line = event_line(event.event)
    if line is None or isinstance(event.event, TextDelta):  # its message line has the text
        return None
    return {**line, "parent_tool_use_id": event.parent_call_id}


def _line(kind: str, **fields: Any) -> dict[str, Any]:
    line = {"type": kind, **fields}
    assert tuple(line) == FIELDS[kind], (kind, tuple(line))  # the documented order
    return line


class StreamJsonWriter:
    """Writes one line per object: redacted, escaped JSON, flushed; StdoutClosed once when
    the reader has gone, nothing after it."""

    def __init__(self, redact: Redactor, stream: TextIO | None = None) -> None:
        self.redact = redact
        self.stream = stream
        self.closed = False

    def write(self, line: dict[str, Any]) -> None:
        if self.closed:
            return
        text = json.dumps(self.redact.deep(line), ensure_ascii=False)
        try:
            # Machine output: redacted and escaped already; byte-exact JSON, not cleaned.
            terminal(json_text(valid_unicode(text)), redact=str, stream=self.stream)
        except (BrokenPipeError, ValueError) as exc:  # ValueError: a closed file object
            self.closed = True
            _silence_stdout()
            raise StdoutClosed("stdout was closed by its reader") from exc


def _silence_stdout() -> None:
    """Later writes (and the flush at exit) go to /dev/null instead of failing again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


class DeltaMasker:
    """Streamed pieces, masked as the text they make up, not one by one: a secret the model
    writes arrives cut into pieces (`sk-e`, `2e-s`, …) that no pattern would match alone.
    Text is sent up to the last whitespace, once the redactor has seen it whole with all
    that came before (a value, or `Bearer` and its token, split across pieces is masked);
    the word being written waits for the next piece or the message's end. Should masking
    ever reach back into text already sent, the pieces stop and the whole message (always
    masked whole) is the reader's text."""

    def __init__(self, redact: Redactor) -> None:
        self.redact = redact
        self.reset()

    def reset(self) -> None:
        self.raw, self.sent, self.cut, self.stuck = "", "", 0, False

    def add(self, piece: str) -> str:
        self.raw += piece
        cut = max(self.raw.rfind(c) for c in " \n\t") + 1
        if cut <= self.cut:
            return ""
        self.cut = cut
        return self._masked(self.raw[:cut])

    def flush(self) -> str:
        """The rest, at the end of the message; then a fresh start."""
        rest = self._masked(self.raw)
        self.reset()
        return rest

    def _masked(self, text: str) -> str:
        masked = self.redact(text)
        if self.stuck or not masked.startswith(self.sent):
            self.stuck = True
            return ""
        new, self.sent = masked[len(self.sent) :], masked
        return new


class StreamJsonOutput:
    """A stream-json session's stdout: the init line, each turn's events as they come
    (also traced on stderr by the renderer), and a result line when each turn ends."""

    def __init__(self, renderer: EventRenderer, writer: StreamJsonWriter, session_id: str) -> None:
        self.renderer = renderer
        self.writer = writer
        self.session_id = session_id
        self.record = RunRecord()
        self.pieces = DeltaMasker(writer.redact)
        self._reported = True  # no turn yet
        self.exit_code = 0  # of the last turn that ended

    def init(
        self,
        *,
        model: str,
        approval: str,
        servers: list[dict[str, Any]],
        tools: list[str],
    ) -> None:
        self.writer.write(
            _line(
                "init",
                session_id=self.session_id,
                model=model,
                cwd=os.getcwd(),
                approval=approval,
                servers=servers,
                tools=tools,
            )
        )

    def start_turn(self, servers: list[dict[str, Any]]) -> None:
        self.record = RunRecord(servers=servers)
        self.pieces.reset()
        self._reported = False

    def add(self, event: Event) -> None:
        self.record.add(event)
        self.renderer.handle(event)
        match event:
            case TextDelta():
                event = TextDelta(self.pieces.add(event.text))
            case AssistantMessage():
                self._piece(self.pieces.flush())
            case ModelRetry() if event.discarded_text:
                self.pieces.reset()
            case _:
                pass
        if isinstance(event, TextDelta):
            self._piece(event.text)
        elif (line := event_line(event)) is not None:
            self.writer.write(line)

    def _piece(self, text: str) -> None:
        if text:
            self.writer.write(event_line(TextDelta(text)) or {})

    def report(self, so_far: Usage | None = None, session: Usage | None = None) -> None:
        """The turn's result line (a turn cut short: status cancelled); later calls until
        the next turn do nothing."""
        if self._reported:
            return
        self._reported = True
        self.renderer.close()
        record = self.record.to_json(so_far, session)
        self.exit_code = EXIT_CODES[record["status"]]
        self.writer.write(_line("result", session_id=self.session_id, **record))

    def result(self, record: dict[str, Any]) -> None:
        """A result line for a run that never began (a required server is unavailable)."""
        self.exit_code = EXIT_CODES[record["status"]]
        self.writer.write(_line("result", session_id=self.session_id, **record))

    def error(self, message: str, line: int | None = None) -> None:
        """An input line that is not a turn or a control request (the session goes on)."""
        self.writer.write(_line("error", error=message, line=line))

    def control_response(self, request_id: str | None, error: str | None = None) -> None:
        """Claude Code's answer to a control request: success, or an error and why."""
        response: dict[str, Any] = {"request_id": request_id}
        response["subtype"] = "error" if error else "success"
        if error:
            response["error"] = error
        self.writer.write(_line("control_response", response=response))
