"""Terminal safety for text we do not control (tool output, server text, model answers).

Rich never parses a `Text` as markup, but it passes escape sequences through: a tool that
prints `ESC[2J` would clear the user's screen, and an OSC sequence could retitle the window
or plant a hyperlink. `SafeConsole` makes every character of content visible and inert at
the one place all output passes (its segments, just before they are written), so no call
site can forget; rich's own styling and cursor control are separate segments and untouched.

Invisible characters get the same treatment: Unicode tag characters, zero-width spaces and
joiners, stray variation selectors reach the model as text but draw nothing, so a page
could whisper instructions to it that the user never sees; they are shown as `\\u200b`.
Content is cleaned before rich lays it out wherever the layout matters (a live region
counts its lines to redraw them), and again at the end as the guard for everything else.

This module is the one terminal writer: a rich console is a `SafeConsole`, and a plain line
(a subcommand's output, an error on stderr) goes out through `terminal`. Both also mask
secrets: a console made with the session's redactor (`Settings.redactor()`) runs it over
every content segment, and `terminal` takes the caller's redactor (by default the patterns
alone: `sk-…` keys, `Bearer` tokens). Call sites still redact whole messages first (a
secret wrapped over two lines is two segments); this is the guard for the ones that forget.
tests/test_architecture.py forbids any other way to the terminal.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TextIO

from rich.console import Console
from rich.segment import Segment

from agent.common.redact import PATTERNS_ONLY
from agent.tools.results import without_envelope_tags
from agent.ui.layout import AnswerMarkdown

# Invisible characters that format or hide text: zero-width space and marks, word joiner
# and invisible operators, soft hyphen, BOM, Mongolian vowel separator, Hangul fillers,
# line/paragraph separators, variation selectors 1-14 (15 and 16 pick text or emoji
# style), tag characters and the variation selectors supplement.
_INVISIBLE = (
    "\u00ad\u061c\u115f\u1160\u180e\u200b\u200e\u200f\u2028\u2029\u2060-\u2064\u3164"
    "\ufe00-\ufe0d\ufeff\uffa0\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
# C0 controls except tab and newline, DEL, C1 controls, and the bidirectional overrides
# that can make text read differently from what it is ("Trojan Source").
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
# Zero-width (non-)joiners shape emoji sequences and Indic and Arabic script: kept when
# they join two visible non-ASCII characters, shown anywhere else.
_JOINERS = "\u200c\u200d"
_NEIGHBOUR = f"[^\\x00-\\x7f\\s{_CONTROL}{_INVISIBLE}{_JOINERS}]"
_UNSAFE = re.compile(
    f"[{_CONTROL}{_INVISIBLE}]|(?<!{_NEIGHBOUR})[{_JOINERS}]|[{_JOINERS}](?!{_NEIGHBOUR})"
)
# In JSON every one of them is escaped, joiners too: the escape reads back the same.
_JSON_UNSAFE = re.compile(f"[{_CONTROL}{_INVISIBLE}{_JOINERS}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def clean(text: str) -> str:
    """`text` with every control or invisible character shown as an escape (`\\x1b`,
    `\\u200b`), newlines kept."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


def json_text(document: str) -> str:
    """A JSON document (from `json.dumps(..., ensure_ascii=False)`) with control, bidi and
    invisible characters written as `\\u` escapes: a terminal showing it executes none of
    them, and a JSON reader gets the same strings back."""
    return _JSON_UNSAFE.sub(_json_escape, document)


def markdown(text: str) -> AnswerMarkdown:
    """A model's answer as Markdown that hides nothing: escapes shown before the layout is
    made, and each link followed by its real target (`text (https://target)`), since a link
    whose text is another URL would otherwise hide where it leads. The envelope tags it may
    have echoed are left out (`without_envelope_tags`)."""
    return AnswerMarkdown(clean(without_envelope_tags(text)), hyperlinks=False)


class SafeConsole(Console):
    """A rich Console whose content can never act as a terminal control sequence, and,
    given `redact` (the session's redactor), never shows a secret it knows.

    Into a pipe or a file it does not wrap: one message stays one line for grep and logs.
    """

    def __init__(
        self, *args: Any, redact: Callable[[str], str] = PATTERNS_ONLY, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.redact = redact
        if "soft_wrap" not in kwargs and not self.is_terminal:
            self.soft_wrap = True

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        redact = self.redact
        return super()._render_buffer(
            segment if segment.control else Segment(clean(redact(segment.text)), segment.style)
            for segment in buffer
        )


def terminal(
    text: str = "",
    *,
    err: bool = False,
    end: str = "\n",
    redact: Callable[[str], str] = PATTERNS_ONLY,
    stream: TextIO | None = None,
) -> None:
    """One plain line (or `end`-less prompt) to stdout, or stderr with `err`: redacted, then
    every control and invisible character shown inert, flushed. For output that is not
    rich's: a subcommand's lines, the one error line of `main`, an answer into a pipe."""
    out = stream or (sys.stderr if err else sys.stdout)
    out.write(clean(redact(text)) + end)
    out.flush()


def page(text: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Show `text`, made by a SafeConsole (so cleaned and redacted already), through the
    user's pager ($PAGER, else less), as git does: with LESS=FRX unless LESS is set (colours
    kept, what fits on one screen printed plainly, the text left on screen after `q`).
    Blocking: run it in a worker thread. False when there is no pager to run."""
    command = shlex.split(environ.get("PAGER") or "less")
    if not command or shutil.which(command[0]) is None:
        return False
    env = {**environ, "LESS": environ.get("LESS", "FRX")}
    try:
        subprocess.run(command, input=text, text=True, env=env, check=False)
    except OSError:
        return False
    return True
