"""The real-model benchmark's tasks: small, everyday requests over files, a shell and the time,
each with an objective check of the workspace or of the answer (never of the wording).

A task is a request, the files the workspace starts with, and a check. The checks read what
a person would: the file that should exist, the number that should be in the answer. Several
tasks put the file where a small model does not look first (`notes.md` is one folder down),
so an error that says where things are matters.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

Check = Callable[[Path, str], bool]


@dataclass(frozen=True)
class Task:
    name: str
    prompt: str
    check: Check
    files: dict[str, str] = field(default_factory=dict)


def _text(workspace: Path, name: str) -> str | None:
    path = workspace / name
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _has(answer: str, *needles: str) -> bool:
    return all(n.lower() in answer.lower() for n in needles)


def _london_time() -> str:
    """14:30 in New York today, in London: the check follows daylight saving."""
    today = datetime.now(UTC).date()
    new_york = datetime(
        today.year, today.month, today.day, 14, 30, tzinfo=ZoneInfo("America/New_York")
    )
    return new_york.astimezone(ZoneInfo("Europe/London")).strftime("%H:%M")


ROWS = "".join(f"{i},item{i},{i * 3}\n" for i in range(1, 38))
NUMBERS = [17, 4, 23, 8, 42, 15, 16, 9, 31, 5]

TASKS: tuple[Task, ...] = (
    Task(
        "write-hello",
        "Create a file named hello.txt containing exactly this text: Hello from the agent",
        lambda ws, a: (_text(ws, "hello.txt") or "").strip() == "Hello from the agent",
    ),
    Task(
        "read-port",
        "Which port number does config.json set?",
        lambda ws, a: "8421" in a,
        {"config.json": '{\n  "name": "billing",\n  "port": 8421,\n  "debug": false\n}\n'},
    ),
    Task(
        "nested-notes",
        "Read notes.md and tell me the access code written in it.",
        lambda ws, a: "ZEBRA-42" in a and not (ws / "notes.md").exists(),
        {"docs/setup/notes.md": "# Setup notes\n\nThe access code is ZEBRA-42.\n"},
    ),
    Task(
        "fix-typo",
        "In doc.txt, replace the misspelling 'teh' with 'the' everywhere "
        "(keep capitalisation: 'Teh' becomes 'The').",
        lambda ws, a: _text(ws, "doc.txt") == "The quick brown fox jumps over the lazy dog.\n",
        {"doc.txt": "Teh quick brown fox jumps over teh lazy dog.\n"},
    ),
    Task(
        "count-rows",
        "How many data rows (not counting the header line) does data.csv have?",
        lambda ws, a: re.search(r"\b37\b", a) is not None,
        {"data.csv": "id,name,value\n" + ROWS},
    ),
    Task(
        "convert-time",
        "Use the time tools: what time is it in London (Europe/London) when it is 14:30 "
        "today in New York (America/New_York)? Answer with HH:MM.",
        lambda ws, a: _london_time() in a,
    ),
    Task(
        "date-file",
        "Write today's date in UTC, in YYYY-MM-DD format, into a file named date.txt.",
        lambda ws, a: datetime.now(UTC).date().isoformat() in (_text(ws, "date.txt") or ""),
    ),
    Task(
        "sum-numbers",
        "What is the sum of all the numbers in numbers.txt?",
        lambda ws, a: re.search(rf"\b{sum(NUMBERS)}\b", a) is not None,
        {"numbers.txt": "\n".join(map(str, NUMBERS)) + "\n"},
    ),
    Task(
        "append-todo",
        "Add the line '- water plants' at the end of todo.txt, keeping the lines already there.",
        lambda ws, a: (
            (_text(ws, "todo.txt") or "").splitlines()
            == ["- buy milk", "- call bob", "- water plants"]
        ),
        {"todo.txt": "- buy milk\n- call bob\n"},
    ),
    Task(
        "find-definition",
        "Which file in this project defines the function parse_port? Give its path.",
        lambda ws, a: "util/net.py" in a,
        {
            "src/app.py": "from util.net import parse_port\n\nprint(parse_port('8080'))\n",
            "src/util/net.py": "def parse_port(text):\n    return int(text)\n",
            "src/util/__init__.py": "",
            "README.md": "# demo\n",
        },
    ),
    Task(
        "new-report",
        "Create the file reports/summary.md whose first line is the heading: # Summary",
        lambda ws, a: (_text(ws, "reports/summary.md") or "").splitlines()[:1] == ["# Summary"],
    ),
    Task(
        "copy-file",
        "Copy the contents of a.txt into a new file b.txt.",
        lambda ws, a: _text(ws, "b.txt") is not None and _text(ws, "b.txt") == _text(ws, "a.txt"),
        {"a.txt": "alpha\nbeta\ngamma\n"},
    ),
    Task(
        "run-python",
        "Run the shell command python3 -c 'print(6*7)' and tell me what it printed.",
        lambda ws, a: re.search(r"\b42\b", a) is not None,
    ),
)


def prepare(workspace: Path, task: Task) -> None:
    """The workspace as the task starts: empty but for the task's files."""
    for path in sorted(workspace.rglob("*"), reverse=True):
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()
    for name, text in task.files.items():
        target = workspace / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
