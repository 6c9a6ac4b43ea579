"""Tool arguments as the person approving a call sees them.

What is asked must fit on the screen with its beginning: a command padded with 20,000
spaces would otherwise push `rm -rf …` out of sight above the question. So long runs of
whitespace are collapsed into a visible count (`⟨20,000 spaces⟩`), each long value shows
its start and its end, and the middle is replaced by how much was left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from rich.text import Text

INLINE = 200  # arguments this short (as compact JSON) stay inside the question
HEAD = 800  # characters of a long value shown from its start ...
TAIL = 200  # ... and from its end
_RUN = re.compile(r"\s{8,}")  # whitespace this long is collapsed into a count
_RUN_COST = 20  # characters a collapsed run takes on screen, roughly
_LINE_COST = 40  # a new line costs this much of the budget: 20 short lines, not 800
_MARK = "dim italic"


def inline(arguments: Mapping[str, Any], redact: Callable[[str], str]) -> str | None:
    """The arguments as compact JSON when short and plain enough to sit in the question."""
    text = redact(json.dumps(arguments, ensure_ascii=False, separators=(", ", ": ")))
    return text if len(text) <= INLINE and not _RUN.search(text) else None


def block(arguments: Mapping[str, Any], redact: Callable[[str], str]) -> Text:
    """One `name: value` entry per argument, each value's beginning shown whole."""
    out = Text()
    for name, value in arguments.items():
        raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        out.append(f"  {name}: ", style="bold")
        _append_value(out, redact(raw))
        out.append("\n")
    out.rstrip()
    return out


def _append_value(out: Text, value: str) -> None:
    head_end = _cut(value, HEAD)
    tail_start = len(value) - _cut(value[::-1], TAIL)
    if tail_start <= head_end:
        _append_collapsed(out, value)
        return
    _append_collapsed(out, value[:head_end])
    out.append(f" … {tail_start - head_end:,} more characters … ", style=_MARK)
    _append_collapsed(out, value[tail_start:])


def _cut(value: str, budget: int) -> int:
    """How many characters of `value` fit in `budget` screen characters: a collapsed run
    counts as its label (never split), a new line as a short line's worth."""
    shown = i = 0
    while i < len(value) and shown < budget:
        run = _RUN.match(value, i)
        if run is not None:
            if shown + _RUN_COST > budget:
                break
            shown, i = shown + _RUN_COST, run.end()
            continue
        shown += _LINE_COST if value[i] == "\n" else 1
        i += 1
    return i


def _append_collapsed(out: Text, value: str) -> None:
    end = 0
    for match in _RUN.finditer(value):
        out.append(value[end : match.start()])
        out.append(f"⟨{_describe_run(match.group())}⟩", style=_MARK)
        end = match.end()
    out.append(value[end:])


def _describe_run(run: str) -> str:
    kinds = set(run)
    what = "spaces" if kinds == {" "} else "newlines" if kinds == {"\n"} else "blanks"
    return f"{len(run):,} {what}"
