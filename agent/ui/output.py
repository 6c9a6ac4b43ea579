"""What a single-shot run prints on stdout, and the exit code it ends with.

stdout holds only the answer (text) or one JSON object (`--output json`); the trace goes
to stderr through the renderer. The answer leaves once, as soon as the run ends and
before the servers close, so closing them is not the caller's wait.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.common.redact import Redactor
from agent.common.text import valid_unicode
from agent.loop.events import (
    Event,
    PlanUpdated,
    RunFinished,
    StepStarted,
    TaskUpdate,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from agent.tools.registry import ToolRegistry
from agent.tools.results import strip_marker, without_envelope_tags
from agent.ui.render import EventRenderer
from agent.ui.safe import SafeConsole, json_text, markdown, terminal

# A run's status -> its exit code (2, usage and config errors, is decided in agent.cli.main).
RESULT_KEYS = ("answer", "status", "steps", "tool_calls", "usage", "error", "servers", "plan")
EXIT_CODES = {"answered": 0, "error": 1, "max_steps": 3, "refused": 4, "cancelled": 130}
CUT_SHORT = "cancelled by the user before it finished"


@dataclass
class RunRecord:
    """What a single-shot run reports in --output json, even when it is cut short."""

    finished: RunFinished | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    servers: list[dict[str, Any]] = field(default_factory=list)
    plan: list[dict[str, str]] | None = None  # the last plan the model set this run
    _slots: dict[str, int] = field(default_factory=dict)
    _started: dict[str, float] = field(default_factory=dict)  # unfinished calls: start time
    _tasks: dict[str, dict[str, str]] = field(default_factory=dict)  # calls run as tasks

    def add(self, event: Event) -> None:
        """Only the events the JSON record holds; the renderer shows every kind."""
        match event:
            case StepStarted():
                self.steps = event.step
            case ToolCallStarted():  # a slot in call order; filled when it ends
                self._slots[event.call_id] = len(self.tool_calls)
                self._started[event.call_id] = time.perf_counter()
                self.tool_calls.append(self._entry(event, CUT_SHORT, True, 0.0))
            case ToolCallFinished():
                self._finish(event)
            case TaskUpdate():  # the call runs as a task: its id, last status
                self._tasks[event.call_id] = {"id": event.task_id, "status": event.status}
                if (slot := self._slots.get(event.call_id)) is not None:
                    self.tool_calls[slot]["task"] = self._tasks[event.call_id]
            case PlanUpdated():
                self.plan = plan_json(event)
            case RunFinished():
                self.finished = event
            case _:
                pass

    def _finish(self, event: ToolCallFinished) -> None:
        slot = self._slots.pop(event.call_id, None)
        self._started.pop(event.call_id, None)
        if slot is None:
            slot = len(self.tool_calls)
            self.tool_calls.append({})
        output = strip_marker(event.output)
        self.tool_calls[slot] = self._entry(event, output, event.is_error, event.duration_ms)
        if event.structured is not None:  # the model may have had the text only
            self.tool_calls[slot]["structured_content"] = event.structured
        if event.images:
            self.tool_calls[slot]["images"] = [
                {"mime": i.mime_type, "bytes": i.bytes, "path": i.path} for i in event.images
            ]
        if (task := self._tasks.pop(event.call_id, None)) is not None:
            self.tool_calls[slot]["task"] = task

    @staticmethod
    def _entry(
        event: ToolCallStarted | ToolCallFinished, output: str, is_error: bool, ms: float
    ) -> dict[str, Any]:
        return {
            "server": event.server or None,
            "tool": event.tool,
            "name": event.name,
            "arguments": event.arguments,
            "is_error": is_error,
            "output": output,
            "duration_ms": round(ms, 1),
        }

    def to_json(
        self, usage_so_far: Usage | None = None, session: Usage | None = None
    ) -> dict[str, Any]:
        """`usage_so_far` (the agent's count) stands in when the run was cut short;
        `session`: the session's usage (the turn's is the run's)."""
        done = self.finished or RunFinished(
            "cancelled", None, self.steps, usage_so_far or Usage(), "interrupted"
        )
        for call_id, at in self._started.items():  # cut short: how long it ran
            self.tool_calls[self._slots[call_id]]["duration_ms"] = round(
                (time.perf_counter() - at) * 1000, 1
            )
        return {
            "answer": done.answer,
            "status": done.status,
            "steps": done.steps,
            "tool_calls": self.tool_calls,
            "usage": {
                **usage_json(done.usage),
                **({"session": usage_json(session)} if session is not None else {}),
            },
            "error": done.error,
            "servers": self.servers,
            "plan": self.plan,
        }


def plan_json(event: PlanUpdated) -> list[dict[str, str]]:
    """A plan as programs read it: Codex's `[{"step", "status"}]`, in order."""
    return [{"step": s.step, "status": s.status} for s in event.plan]


def usage_json(usage: Usage) -> dict[str, Any]:
    """Token counts (null: the server reported none, as many local servers do) and the
    cost in US dollars, or "unknown" (no price for the model, or no counts): never 0."""
    known = usage.known
    return {
        "prompt_tokens": usage.prompt_tokens if known else None,
        "completion_tokens": usage.completion_tokens if known else None,
        "cached_tokens": usage.cached_tokens if known else None,
        "cost_usd": round(usage.cost_usd, 6) if usage.cost_known else "unknown",
    }


def server_states(registry: ToolRegistry) -> list[dict[str, Any]]:
    """Each server's state for --output json (a script can tell which one failed)."""
    return [{"name": s.name, "state": s.state, "error": s.error} for s in registry.statuses()]


def print_answer(answer: str, redact: Callable[[str], str]) -> None:
    """The one writer of an answer to stdout (a single-shot run's, and each of a piped
    REPL's): masked by the session's redactor; rendered on a terminal; as written (no
    wrapping, no markup) into pipes and files, but with control and invisible characters
    shown (`| cat` must not retitle the terminal)."""
    answer = without_envelope_tags(redact(answer))
    if sys.stdout.isatty():
        SafeConsole(redact=redact).print(markdown(answer))
    else:
        terminal(answer, end="" if answer.endswith("\n") else "\n", redact=redact)


class SingleShotOutput:
    """One run's events: traced on stderr by the renderer, recorded, and reported on
    stdout once (`report`) as the answer text or the JSON object."""

    def __init__(
        self, renderer: EventRenderer, redact: Redactor, output: Literal["text", "json"]
    ) -> None:
        self.renderer = renderer
        self.redact = redact
        self.output = output
        self.record = RunRecord()
        self._reported = False

    def add(self, event: Event) -> None:
        self.record.add(event)
        self.renderer.handle(event)

    def report(self, so_far: Usage | None = None, session: Usage | None = None) -> None:
        """The answer (or the JSON object) out and flushed; later calls do nothing.
        `so_far` / `session`: the agent's counts, for a run cut short (JSON only)."""
        if self._reported:
            return
        self._reported = True
        self.renderer.close()
        finished = self.record.finished
        if self.output == "json":
            line = json.dumps(
                self.redact.deep(self.record.to_json(so_far, session)), ensure_ascii=False
            )
            # Machine output: already redacted and escaped; byte-exact JSON, not cleaned.
            terminal(json_text(valid_unicode(line)), redact=str)
        elif finished is not None and finished.answer is not None:
            print_answer(finished.answer, self.redact)

    @property
    def exit_code(self) -> int:
        """The documented code of how the run ended (it has ended: RunFinished was seen)."""
        done = self.record.finished
        assert done is not None
        return EXIT_CODES[done.status]
