"""Rich rendering of the loop's events.

Untrusted text (tool output, arguments, server names, model text in traces) is always
wrapped in `Text` objects, never parsed as markup. The model's answer is rendered as
Markdown, which rich renders structurally (markup in it stays literal).
"""

from __future__ import annotations

import json
import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from agent.events import (
    AssistantMessage,
    Event,
    ModelRetry,
    Notice,
    RunFinished,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
)
from agent.tools.results import strip_marker

QUIET, NORMAL, VERBOSE = 0, 1, 2
SUMMARY_LINES = 3
ARGS_PREVIEW = 200


def compact_json(value: Any, limit: int = ARGS_PREVIEW) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary(output: str, lines: int = SUMMARY_LINES) -> tuple[str, int]:
    body = strip_marker(output).strip("\n")
    all_lines = body.splitlines() or [""]
    shown = [line if len(line) <= 200 else line[:199] + "…" for line in all_lines[:lines]]
    return "\n".join(shown), max(0, len(all_lines) - lines)


class EventRenderer:
    """Turns events into terminal output. `stream_answer` shows the answer as it streams."""

    def __init__(self, console: Console, *, verbosity: int = NORMAL, stream_answer: bool) -> None:
        self.console = console
        self.verbosity = verbosity
        self.stream_answer = stream_answer
        self._buffer = ""
        self._live: Live | None = None
        self._progress_shown: dict[str, float] = {}

    def handle(self, event: Event) -> None:
        method = getattr(self, f"_on_{event.kind}", None)
        if method is not None:
            method(event)

    def close(self) -> None:
        self._end_stream()

    # -- answer streaming -------------------------------------------------------------

    def _on_text_delta(self, event: TextDelta) -> None:
        if not self.stream_answer:
            return
        self._buffer += event.text
        if self._live is None:
            self._live = Live(
                console=self.console,
                refresh_per_second=8,
                transient=False,
                vertical_overflow="visible",
            )
            self._live.start()
        self._live.update(Markdown(self._buffer))

    def _end_stream(self) -> None:
        if self._live is not None:
            self._live.update(Markdown(self._buffer))
            self._live.stop()
            self._live = None
        self._buffer = ""

    def _on_assistant_message(self, event: AssistantMessage) -> None:
        self._end_stream()

    def _on_model_retry(self, event: ModelRetry) -> None:
        if event.discarded_text:
            self._end_stream()
        if self.verbosity >= NORMAL:
            line = Text(
                f"model request failed ({event.reason}); retry {event.attempt} "
                f"in {event.delay:.1f} s",
                style="yellow",
            )
            self.console.print(line)

    # -- steps and tools --------------------------------------------------------------

    def _on_step_started(self, event: StepStarted) -> None:
        if self.verbosity >= VERBOSE:
            self.console.print(Text(f"step {event.step}/{event.max_steps}", style="dim"))

    def _on_tool_call_started(self, event: ToolCallStarted) -> None:
        self._end_stream()
        if self.verbosity < NORMAL:
            return
        line = Text("▸ ", style="cyan")
        if event.server:
            line.append(event.server, style="bold cyan")
            line.append(" › ")
        line.append(event.tool, style="bold")
        line.append(" ")
        line.append(compact_json(event.arguments), style="dim")
        self.console.print(line)

    def _on_tool_progress(self, event: ToolProgress) -> None:
        now = time.monotonic()
        if self.verbosity < NORMAL or now - self._progress_shown.get(event.call_id, 0) < 0.5:
            return
        self._progress_shown[event.call_id] = now
        total = f"/{event.total:g}" if event.total else ""
        msg = f" {event.message}" if event.message else ""
        self.console.print(Text(f"  … {event.progress:g}{total}{msg}", style="dim"))

    def _on_tool_call_finished(self, event: ToolCallFinished) -> None:
        if self.verbosity < NORMAL:
            return
        style = "red" if event.is_error else "green"
        mark = "✗" if event.is_error else "✓"
        if event.denied:
            mark, style = "⊘ denied", "yellow"
        head = Text(f"  {mark} ", style=style)
        head.append(event.tool, style="bold")
        head.append(f" {event.duration_ms:.0f} ms", style="dim")
        self.console.print(head)
        if self.verbosity >= VERBOSE:
            self.console.print(Text(strip_marker(event.output)), soft_wrap=True)
            return
        shown, more = summary(event.output)
        body = Text(_indent(shown), style="red" if event.is_error else "dim")
        if more:
            body.append(f"\n    … {more} more lines", style="dim italic")
        self.console.print(body)

    def _on_notice(self, event: Notice) -> None:
        if self.verbosity >= NORMAL or event.level == "warning":
            style = "yellow" if event.level == "warning" else "dim"
            self.console.print(Text(event.message, style=style))

    def _on_run_finished(self, event: RunFinished) -> None:
        self._end_stream()
        if event.status == "error" and event.error:
            self.console.print(Text(f"error: {event.error}", style="bold red"))
        elif event.status == "max_steps":
            self.console.print(Text(f"stopped: {event.error}", style="yellow"))


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
