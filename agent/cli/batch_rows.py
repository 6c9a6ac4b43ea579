"""A batch's rows and its OUT, whoever runs the rows: read from INPUT.jsonl (`read_rows`),
one row answered as its own conversation on a session's servers (`answer_row`), or failed
(`failed_line`), written to OUT (`OutFile`: masked, 0600, never through a link), counted
(`Tally`) and summed up (`finish`). The local batch (agent/cli/batch_command.py), the
cluster's driver (agent/cli/batch_cluster.py) and its workers (agent/cli/batch_worker.py)
share them, so the lines, the file and the exit codes cannot drift apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from agent.common.errors import ConfigError
from agent.common.json_limits import TooDeep
from agent.common.json_limits import loads as load_json_line
from agent.common.redact import Redactor
from agent.common.text import valid_unicode
from agent.config.settings import Settings
from agent.session.startup import Session, expand_refs
from agent.ui.output import RESULT_KEYS, RunRecord, server_states
from agent.ui.safe import SafeConsole

# `run`'s options that are about one run's input or output, and their values here.
RESERVED = frozenset({*RESULT_KEYS, "id", "session_id", "line"})  # an input field must not shadow


@dataclass
class Row:
    line: int
    id: Any
    prompt: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def key(self) -> str:
        """How OUT names the row: its id, or its line when it had none."""
        return json.dumps(self.id) if self.id is not None else f"line {self.line}"


def read_rows(path: Path) -> Iterator[Row]:
    """INPUT's rows, read a line at a time; a line that is not a row is a Row with an error."""
    seen: set[str] = set()
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            row = _row(raw, number)
            if row.error is None and row.key in seen:  # recorded by its line, not its id
                error = f"line {number}: id {row.key} is already used by an earlier line"
                row = Row(number, None, error=error)
            seen.add(row.key)
            yield row


def _row(raw: bytes, number: int) -> Row:
    try:
        data = load_json_line(raw)
    except TooDeep as exc:
        return Row(number, None, error=f"line {number}: {exc}")
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        return Row(number, None, error=f"line {number} is not JSON: {exc}")
    if not isinstance(data, dict):
        return Row(number, None, error=f"line {number}: expected an object with id and prompt")
    row_id = data.get("id")
    if not isinstance(row_id, str | int) or isinstance(row_id, bool):
        return Row(number, None, error=f'line {number}: "id" must be a string or a number')
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return Row(number, row_id, error=f'line {number}: "prompt" must be a non-empty string')
    extra = {k: v for k, v in data.items() if k not in ("id", "prompt")}
    if clash := sorted(RESERVED & set(extra)):
        error = f"line {number}: input field {clash[0]!r} clashes with a result field: rename it"
        return Row(number, row_id, error=error)
    return Row(number, row_id, prompt, extra)


def check_out(out: Path, resume: bool) -> None:
    """Refuse an OUT the batch would write through: a symbolic link (dangling or not: the
    "must not exist" check would follow it) or anything but a file. OutFile opens it
    without following links too, so a link put there later is refused as well."""
    if out.is_symlink():
        raise ConfigError(f"--out {out} is a symbolic link: give the file itself, or a new name")
    if out.exists() and not resume:
        raise ConfigError(f"--out {out} exists: pass --resume to continue it, or remove it")
    if out.exists() and not out.is_file():
        raise ConfigError(f"--out {out} is not a file: give a file's name")


def _read_out(out: Path) -> BinaryIO:
    """OUT opened to read, without following a symbolic link at the last step."""
    try:
        return open(out, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW | os.O_NONBLOCK))
    except OSError as exc:  # a link put there since check_out: it says so
        check_out(out, resume=True)
        raise ConfigError(f"--out {out}: {exc.strerror}") from None


def finished_keys(out: Path) -> set[str]:
    """The rows OUT already holds (`--resume`); a line cut short by a crash is not one."""
    keys: set[str] = set()
    if not os.path.lexists(out):
        return keys
    with _read_out(out) as lines:
        for raw in lines:
            try:
                data = load_json_line(raw)
            except ValueError:  # not JSON, or nested too deep: not a row of ours
                continue
            if isinstance(data, dict) and data.get("id") is not None:
                keys.add(json.dumps(data["id"]))
            elif isinstance(data, dict) and isinstance(data.get("line"), int):
                keys.add(f"line {data['line']}")
    return keys


class OutFile:
    """OUT, appended a line at a time, flushed at once; readable by the user alone (it
    holds answers and tool output, like the transcripts); every string masked. Opened
    without following a symbolic link, created anew unless resumed, and 0600 even when a
    resumed file had another mode."""

    def __init__(self, path: Path, redact: Redactor, resume: bool) -> None:
        self.file = os.fdopen(_open_out(path, resume), "a+b")
        self.redact = redact
        self.file.seek(0, os.SEEK_END)
        if self.file.tell():  # a line cut short by a crash must not swallow the next one
            self.file.seek(-1, os.SEEK_END)
            if self.file.read(1) != b"\n":
                self.file.write(b"\n")

    def write(self, line: dict[str, Any]) -> None:
        text = json.dumps(self.redact.deep(line), ensure_ascii=False)
        self.file.write(valid_unicode(text).encode() + b"\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def _open_out(path: Path, resume: bool) -> int:
    """OUT's descriptor; a link, a file made meanwhile or a non-file is one line."""
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags if resume else flags | os.O_EXCL, 0o600)
    except OSError as exc:  # a link or a file put there since check_out: it says which
        check_out(path, resume)
        raise ConfigError(f"--out {path}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigError(f"--out {path} is not a file: give a file's name")
    os.fchmod(fd, 0o600)
    return fd


@dataclass
class Plan:
    input: Path
    out: Path
    parallel: int
    max_errors: int | None
    done: set[str]
    resume: bool = False


@dataclass
class Tally:
    statuses: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    not_run: int = 0
    stopped: bool = False

    @property
    def failed(self) -> int:
        return self.statuses.get("error", 0)

    def count(self, status: str) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1

    def summary(self, out: Path) -> str:
        done = sum(self.statuses.values())
        parts = [f"{n} {status}" for status, n in sorted(self.statuses.items())]
        if self.skipped:
            parts.append(f"{self.skipped} skipped (already in {out.name})")
        return f"batch: {done} rows: {', '.join(parts) or 'none run'} → {out}"


def say_stopped(stderr: SafeConsole, plan: Plan, tally: Tally) -> None:
    """What OUT holds after Ctrl-C or a signal, and how to go on."""
    rows = len(plan.done) + sum(tally.statuses.values())
    said = f"batch stopped: {rows} rows in {plan.out}; rerun with --resume for the rest"
    stderr.print(said, markup=False, highlight=False)


def finish(stderr: SafeConsole, settings: Settings, plan: Plan, tally: Tally) -> int:
    """The summary line, why the batch stopped early, and the exit code."""
    if not settings.ui.quiet or tally.failed or tally.stopped:
        stderr.print(tally.summary(plan.out), markup=False, highlight=False)
    if tally.stopped:
        stderr.print(
            f"stopped after {tally.failed} failed rows (--max-errors {plan.max_errors}): "
            f"{tally.not_run} rows not run; rerun with --resume to run them",
            markup=False,
            highlight=False,
            style="yellow",
        )
    return 1 if tally.failed or tally.stopped else 0


def drop_unused(path: Path) -> None:
    """The batch's own session ran nothing (each row has its own): its transcript, which
    holds only its opening record, is removed so `--resume` and listings never offer it."""
    with contextlib.suppress(OSError):
        if len(path.read_bytes().splitlines()) <= 1:
            path.unlink()


async def answer_row(session: Session, row: Row, stderr: SafeConsole) -> dict[str, Any]:
    """One row: its own conversation on the session's servers, run by the one loop."""
    async with session.conversation(stderr) as (agent, session_id):
        request = await expand_refs(session.catalog, row.prompt, stderr)
        record = RunRecord(servers=server_states(session.registry))
        async with contextlib.aclosing(agent.run(request)) as events:
            async for event in events:
                record.add(event)
        record.servers = server_states(session.registry)
        result = record.to_json(agent.run_usage, agent.session_usage)
    return {"id": row.id, "session_id": session_id, **row.extra, **result}


def failed_line(row: Row, error: str) -> dict[str, Any]:
    """The line of a row that never ran, or raised: status error, nothing used."""
    usage = {"prompt_tokens": None, "completion_tokens": None}
    result: dict[str, Any] = {"answer": None, "status": "error", "steps": 0, "tool_calls": []}
    line: dict[str, Any] = {"id": row.id, "session_id": None}
    if row.id is None:
        line["line"] = row.line
    ended: dict[str, Any] = {"usage": usage, "error": error, "servers": [], "plan": None}
    return {**line, **row.extra, **result, **ended}


@contextlib.contextmanager
def progress(stderr: SafeConsole, settings: Settings, path: Path) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr at a terminal (not with -q); elsewhere nothing."""
    if settings.ui.quiet or not stderr.is_terminal or stderr.is_dumb_terminal:
        yield lambda: None
        return
    with path.open("rb") as lines:
        total = sum(1 for raw in lines if raw.strip())
    columns = (TextColumn("batch"), BarColumn(), MofNCompleteColumn(), TextColumn("rows"))
    with Progress(*columns, console=stderr, transient=True) as bar:
        task = bar.add_task("rows", total=total)
        yield lambda: bar.advance(task)
