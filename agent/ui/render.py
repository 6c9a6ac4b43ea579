"""Rich rendering of the loop's events.

Untrusted text (tool output, arguments, server names, model text in traces) is always
wrapped in `Text` objects, never parsed as markup. The model's answer is rendered as
Markdown, which rich renders structurally (markup in it stays literal).
"""

from __future__ import annotations

import contextlib
import json
import mimetypes
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, assert_never

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.segment import Segment
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

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
)
from agent.loop.plan import UPDATE_PLAN
from agent.tools.results import strip_marker
from agent.ui.inline_image import MAX_INLINE_BYTES, InlineImage, Protocol, escape_sequences
from agent.ui.layout import Indented, print_path
from agent.ui.safe import clean, markdown

QUIET, NORMAL, VERBOSE = 0, 1, 2
SUMMARY_LINES = 3
ARGS_PREVIEW = 200
PLAN_MARKS = {
    "pending": ("☐", "default"),
    "in_progress": ("◐", "bold cyan"),
    "completed": ("☑", "green"),
}


def compact_json(value: Any, limit: int = ARGS_PREVIEW) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


IMAGE_PATHS_SHOWN = 5  # saved image paths listed under a tool call; the rest in one line


def summary(output: str, lines: int = SUMMARY_LINES) -> tuple[str, int]:
    body = strip_marker(output).strip("\n")
    all_lines = body.splitlines() or [""]
    shown = [line if len(line) <= 200 else line[:199] + "…" for line in all_lines[:lines]]
    return "\n".join(shown), max(0, len(all_lines) - lines)


@dataclass
class _Running:
    """A tool call in flight, as the activity display shows it."""

    label: Text
    started: float
    progress: float | None = None
    total: float | None = None
    message: str | None = None
    said: list[str] = field(default_factory=list)  # its last progress messages, cleaned


CANCELLED_LINES = 5  # progress messages of a cancelled call shown under it


class _Activity:
    """What is happening right now: a spinner per running tool with elapsed time and progress.

    Rebuilt at each refresh of the Live display (a few times a second), not per event.
    """

    def __init__(self) -> None:
        self.thinking_since: float | None = None
        self.running: dict[str, _Running] = {}
        self.spinner = Spinner("dots", style="cyan")

    def __bool__(self) -> bool:
        return self.thinking_since is not None or bool(self.running)

    def __rich__(self) -> RenderableType:
        now = time.monotonic()
        rows: list[RenderableType] = []
        if self.thinking_since is not None:
            rows.append(self._row(Text("thinking", style="dim"), now - self.thinking_since))
        for item in self.running.values():
            label = item.label.copy()
            if item.message:
                label.append(f"  {item.message}", style="dim")
            row = self._row(label, now - item.started)
            if item.total:
                bar = ProgressBar(total=item.total, completed=item.progress or 0, width=24)
                grid = Table.grid(padding=(0, 1))
                grid.add_row(row, bar, Text(f"{item.progress or 0:g}/{item.total:g}", style="dim"))
                row = grid
            rows.append(row)
        return Group(*rows)

    def _row(self, label: Text, elapsed: float) -> RenderableType:
        grid = Table.grid(padding=(0, 1))
        grid.add_row(self.spinner, label, Text(f"{elapsed:.1f}s", style="dim"))
        return grid


class _Tail:
    """The streaming answer as the live region shows it: its last screenful.

    A live region taller than the terminal cannot be redrawn (what scrolled off stays in
    the scrollback, again at each refresh); the tail always fits, and the whole answer is
    printed once when it ends. Its lines are counted from the cleaned text: an escape shown
    as `\\x1b` is four cells wide, and a miscount would leave a copy on screen at each redraw.
    """

    def __init__(self, renderer: EventRenderer) -> None:
        self.renderer = renderer

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = console.render_lines(markdown(self.renderer.streamed()), options, pad=False)
        for line in lines[-max(3, console.size.height - 2) :]:
            yield from line
            yield Segment.line()


class EventRenderer:
    """Turns events into terminal output. `stream_answer` shows the answer as it streams.

    On a capable terminal the answer streams in a Live region and running tools show a
    spinner with elapsed time; on a pipe or a dumb terminal everything is printed once.
    """

    def __init__(
        self,
        console: Console,
        *,
        verbosity: int = NORMAL,
        stream_answer: bool,
        redact: Callable[[str], str] = str,
        inline_images: Protocol | None = None,
    ) -> None:
        self.console = console
        # The image protocol the terminal announced (agent/ui/inline_image.py), or None.
        self.inline_images = inline_images
        # Masks the settings' secrets in what the traces show (tool output, errors, notices).
        self.redact = redact
        self.verbosity = verbosity
        self.stream_answer = stream_answer
        self.animate = console.is_terminal and not console.is_dumb_terminal
        self._buffer = ""
        self._shown = ""  # the model's text last printed: a `terminate` answer differs from it
        self._live: Live | None = None
        self._activity = _Activity()
        self._activity_live: Live | None = None
        self._progress_shown: dict[str, float] = {}
        self._task_shown: dict[str, str] = {}  # call id -> the task status line last shown
        self._plan_calls: set[str] = set()  # update_plan calls: their block stands for them

    def handle(self, event: Event) -> None:
        """One match over the event types: mypy checks that every type has its arm, and a
        grep for an event class finds where it is shown."""
        match event:
            case RunStarted():
                pass  # nothing to show: the user just typed the request
            case StepStarted():
                self._on_step_started(event)
            case TextDelta():
                self._on_text_delta(event)
            case ModelRetry():
                self._on_model_retry(event)
            case AssistantMessage():
                self._on_assistant_message(event)
            case ToolCallStarted():
                self._on_tool_call_started(event)
            case ToolProgress():
                self._on_tool_progress(event)
            case TaskUpdate():
                self._on_task_update(event)
            case ToolCallFinished():
                self._on_tool_call_finished(event)
            case PlanUpdated():
                self._on_plan_updated(event)
            case Notice():
                self._on_notice(event)
            case RunFinished():
                self._on_run_finished(event)
            case SubagentEvent():
                self._on_subagent(event)
            case _:
                assert_never(event)

    def cancelled(self) -> None:
        """The calls a Ctrl-C cut short, each with what it had reported by then (progress
        and its last messages): the live rows that showed it vanish with the turn."""
        self._end_stream()
        running, now = list(self._activity.running.values()), time.monotonic()
        self._activity.running.clear()
        self._sync_activity()
        for item in running:
            head = Text("  ⊘ cancelled ", style="yellow")
            head.append_text(item.label)
            head.append(f" after {now - item.started:.1f} s", style="dim")
            if item.progress is not None:
                total = f"/{item.total:g}" if item.total else ""
                head.append(f" at {item.progress:g}{total}", style="dim")
            self.console.print(head)
            if item.said:
                self.console.print(Indented(Text("\n".join(item.said), style="dim")))
            elif item.progress is None:
                self.console.print(Indented(Text("(it had reported nothing)", style="dim")))

    def close(self) -> None:
        self._end_stream()
        self._activity.thinking_since = None
        self._activity.running.clear()
        self._sync_activity()

    # -- activity (spinners) ----------------------------------------------------------

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """No live region while the user answers a question; it comes back afterwards."""
        self._end_stream()
        if self._activity_live is not None:
            self._activity_live.stop()
            self._activity_live = None
        try:
            yield
        finally:
            self._sync_activity()

    def _sync_activity(self) -> None:
        """Show the activity region while there is activity; one Live at a time."""
        wanted = self.animate and self.verbosity >= NORMAL and bool(self._activity)
        if wanted and self._activity_live is None and self._live is None:
            self._activity_live = Live(
                self._activity, console=self.console, refresh_per_second=10, transient=True
            )
            self._activity_live.start()
        elif not wanted and self._activity_live is not None:
            self._activity_live.stop()
            self._activity_live = None

    def _print(self, renderable: RenderableType, **kwargs: Any) -> None:
        """Print above the activity region (Live keeps itself at the bottom)."""
        self.console.print(renderable, **kwargs)

    # -- answer streaming -------------------------------------------------------------

    def _on_text_delta(self, event: TextDelta) -> None:
        if self._activity.thinking_since is not None:
            self._activity.thinking_since = None
            self._sync_activity()
        if not self.stream_answer:
            return
        self._buffer += event.text
        if not self.animate:
            return  # printed whole when the message ends
        if self._live is None:
            self._live = Live(
                _Tail(self),
                console=self.console,
                refresh_per_second=8,
                transient=True,  # replaced by the whole answer, printed once, at the end
                vertical_overflow="crop",
            )
            self._live.start()  # the refresh thread redraws the tail from self._buffer

    def streamed(self) -> str:
        """What the live region may show of the answer so far: redacted, without its last
        word, which may be the start of a secret that the redactor can only see whole."""
        end = len(self._buffer)
        while end and not self._buffer[end - 1].isspace():
            end -= 1
        return self.redact(self._buffer[:end])

    def _end_stream(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._buffer.strip():
            self.console.print(markdown(self.redact(self._buffer)))
            self._shown = self._buffer
        self._buffer = ""

    def _on_assistant_message(self, event: AssistantMessage) -> None:
        self._activity.thinking_since = None
        self._sync_activity()
        self._end_stream()

    def _on_model_retry(self, event: ModelRetry) -> None:
        if event.discarded_text:
            self._end_stream()
        if self.verbosity >= NORMAL:
            void = "; the text above was cut short and is discarded" if event.discarded_text else ""
            line = Text(
                f"model request failed ({self.redact(event.reason)}); retry {event.attempt} "
                f"in {event.delay:.1f} s{void}",
                style="yellow",
            )
            self.console.print(line)

    # -- steps and tools --------------------------------------------------------------

    def _on_step_started(self, event: StepStarted) -> None:
        self._shown = ""
        if self.verbosity >= VERBOSE:
            self._print(Text(f"step {event.step}/{event.max_steps}", style="dim"))
        self._activity.thinking_since = time.monotonic()
        self._sync_activity()

    def _on_tool_call_started(self, event: ToolCallStarted) -> None:
        self._end_stream()
        if self.verbosity < NORMAL:
            return
        if (event.server, event.tool) == ("agent", UPDATE_PLAN) and self.verbosity < VERBOSE:
            self._plan_calls.add(event.call_id)  # the plan's block shows it, not its JSON
            return
        label = Text()
        if event.server:
            label.append(clean(event.server), style="bold cyan")
            label.append(" › ")
        label.append(clean(event.tool), style="bold")
        line = Text("▸ ", style="cyan")
        line.append_text(label)
        line.append(" ")
        if self.verbosity >= VERBOSE and event.arguments:
            self._print(line)
            pretty = json.dumps(event.arguments, ensure_ascii=False, indent=2, default=str)
            self._print(Indented(Text(self.redact(pretty), style="dim")))
        else:
            line.append(self.redact(compact_json(event.arguments)), style="dim")
            self._print(line)
        self._activity.running[event.call_id] = _Running(label, time.monotonic())
        self._sync_activity()

    def _on_tool_progress(self, event: ToolProgress) -> None:
        running = self._activity.running.get(event.call_id)
        if running is not None:
            running.progress, running.total = event.progress, event.total
            running.message = clean(self.redact(event.message)) if event.message else None
            if running.message and running.message not in running.said[-1:]:
                running.said = [*running.said[-(CANCELLED_LINES - 1) :], running.message]
        if self.animate:
            return  # drawn by the activity region
        now = time.monotonic()
        if self.verbosity < NORMAL or now - self._progress_shown.get(event.call_id, 0) < 0.5:
            return
        self._progress_shown[event.call_id] = now
        total = f"/{event.total:g}" if event.total else ""
        msg = f" {self.redact(event.message)}" if event.message else ""
        self._print(Text(f"  … {event.progress:g}{total}{msg}", style="dim"))

    def _on_task_update(self, event: TaskUpdate) -> None:
        """The live row shows the task's status and stage; elsewhere (a pipe, -p on
        stderr) each change of either is one line, with the time since the task began."""
        words = event.status.replace("_", " ")
        said = f"{words}: {event.message}" if event.message else words
        said = clean(self.redact(said))
        running = self._activity.running.get(event.call_id)
        if running is not None:
            running.message = f"task {said}"
        last = self._task_shown.get(event.call_id)
        self._task_shown[event.call_id] = said
        if self.animate or self.verbosity < NORMAL or last == said:
            return
        task_id = clean(self.redact(event.task_id[:12]))
        self._print(Text(f"  ⧗ task {task_id} {said} ({event.elapsed:.1f} s)", style="dim"))

    def _on_tool_call_finished(self, event: ToolCallFinished) -> None:
        self._activity.running.pop(event.call_id, None)
        self._sync_activity()
        if self.verbosity < NORMAL:
            return
        if event.call_id in self._plan_calls:
            self._plan_calls.discard(event.call_id)
            if not event.is_error:
                return  # shown as its plan's block (or, unchanged, not again)
        style = "red" if event.is_error else "green"
        mark = "✗" if event.is_error else "✓"
        if event.denied:
            mark, style = "⊘ denied", "yellow"
        head = Text(f"  {mark} ", style=style)
        head.append(event.tool, style="bold")
        head.append(f" {event.duration_ms:.0f} ms", style="dim")
        self.console.print(head)
        output = self.redact(event.output)
        if self.verbosity >= VERBOSE:
            self.console.print(Text(strip_marker(output)), soft_wrap=True)
        else:
            shown, more = summary(output)
            body = Text(shown, style="red" if event.is_error else "dim")
            if more:
                body.append(f"\n… {more} more lines", style="dim italic")
            self.console.print(Indented(body))  # wrapped lines keep the indent
        self._show_images(event)

    def _show_images(self, event: ToolCallFinished) -> None:
        """Where the result's images were saved: a person can open them (the model's copy
        may be left out or gone from the history)."""
        paths = [i.path for i in event.images if i.path]
        for path in paths[:IMAGE_PATHS_SHOWN]:
            print_path(self.console, "    image saved:", path, "cyan")
            self._draw_image(path)
        if len(paths) > IMAGE_PATHS_SHOWN:
            folder = str(Path(paths[0]).parent)
            rest = len(paths) - IMAGE_PATHS_SHOWN
            self.console.print(Indented(Text(f"… {rest} more images in {folder}", style="dim")))

    def _draw_image(self, path: str) -> None:
        """The picture itself, where the terminal announced an image protocol."""
        if self.inline_images is None:
            return
        try:
            file = Path(path)
            if file.stat().st_size > MAX_INLINE_BYTES:
                return
            data = file.read_bytes()
        except OSError:
            return  # the path above is still there to open
        mime = mimetypes.guess_type(path)[0] or ""
        if sequences := escape_sequences(self.inline_images, data, mime):
            self.console.print(InlineImage(sequences))

    def _on_plan_updated(self, event: PlanUpdated) -> None:
        """The plan as one compact block, a mark per step: model text, masked and shown as
        text (escapes visible), one line a step."""
        if self.verbosity < NORMAL:
            return
        self._end_stream()
        head = Text("  plan", style="bold cyan")
        if event.explanation:
            head.append(f"  {clean(self.redact(event.explanation))}", style="dim")
        lines = [head]
        for step in event.plan:
            mark, style = PLAN_MARKS[step.status]
            line = Text(f"    {mark} ", style=style)
            line.append(
                clean(self.redact(step.step)), style="dim" if step.status == "completed" else style
            )
            lines.append(line)
        self._print(Text("\n").join(lines))

    def _on_subagent(self, event: SubagentEvent) -> None:
        """A sub-agent's steps, indented under the `task` call that runs it: each of its
        tool calls and how it ended, its warnings (its answer is the call's result)."""
        inner = event.event
        if self.verbosity < NORMAL:
            return
        line = Text(f"    {clean(event.agent)} │ ", style="dim")
        match inner:
            case ToolCallStarted():
                line.append("▸ ", style="cyan")
                if inner.server:
                    line.append(f"{clean(inner.server)} › ", style="cyan")
                line.append(clean(inner.tool), style="bold")
                line.append(f" {clean(self.redact(compact_json(inner.arguments)))}", style="dim")
            case ToolCallFinished():
                mark, style = ("✗", "red") if inner.is_error else ("✓", "green")
                if inner.denied:
                    mark, style = "⊘ denied", "yellow"
                line.append(f"{mark} ", style=style)
                line.append(clean(inner.tool), style="bold")
                shown, _ = summary(self.redact(inner.output), 1)
                line.append(f" {inner.duration_ms:.0f} ms  {clean(shown)}", style="dim")
            case Notice() if inner.level == "warning" or self.verbosity >= VERBOSE:
                line.append(self.redact(inner.message), style="yellow")
            case RunFinished() if inner.status not in ("answered", "refused"):
                line.append(f"stopped: {self.redact(inner.error or inner.status)}", style="yellow")
            case _:
                return
        self._print(line)

    def _on_notice(self, event: Notice) -> None:
        if self.verbosity >= NORMAL or event.level == "warning":
            style = "yellow" if event.level == "warning" else "dim"
            self.console.print(Text(self.redact(event.message), style=style))

    def _on_run_finished(self, event: RunFinished) -> None:
        self.close()
        answer = event.answer or ""
        if self.stream_answer and answer.strip() and answer.strip() != self._shown.strip():
            self.console.print(markdown(self.redact(answer)))  # given through `terminate`
        if event.status == "error" and event.error:
            self.console.print(Text(f"error: {self.redact(event.error)}", style="bold red"))
        elif event.status == "max_steps":
            self.console.print(Text(f"stopped: {event.error}", style="yellow"))
        elif event.status == "refused":
            hint = "--allowed-tools NAME allows a tool without asking, --yes every tool"
            self.console.print(Text(f"refused: {event.error}; {hint}", style="yellow"))


LOG_BATCH = 200  # log lines shown per print at most (a few prints a second)


@dataclass
class LogLines:
    """MCP log messages for -v, printed a few times a second at most.

    Printing costs rich a render per call: a server that logs 20,000 lines during one call
    would take longer to show than to run. The first line after a quiet spell is printed at
    once; lines in a burst are gathered and printed together every `interval` seconds, and
    `flush` prints what is left (the front end calls it when a turn ends). `hold` keeps
    lines back while the input line or a question owns the terminal.
    """

    console: Console
    interval: float = 0.25
    lines: list[str] = field(default_factory=list)
    _printed: float = float("-inf")

    def add(self, server: str, line: str, *, hold: bool = False) -> None:
        self.lines.append(f"{server}: {line}")
        if not hold and time.monotonic() - self._printed >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self.lines:
            shown = self.lines[:LOG_BATCH]
            if len(self.lines) > LOG_BATCH:  # faster than anyone reads: the log file has all
                more = len(self.lines) - LOG_BATCH
                shown.append(f"… {more} more log lines (all in the server's log file)")
            self.console.print(Text("\n".join(shown), style="dim"))
            self.lines.clear()
        self._printed = time.monotonic()
