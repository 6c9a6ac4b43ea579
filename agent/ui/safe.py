"""Terminal safety for text we do not control (tool output, server text, model answers).

Rich never parses a `Text` as markup, but it passes escape sequences through: a tool that
prints `ESC[2J` would clear the user's screen, and an OSC sequence could retitle the window
or plant a hyperlink. `SafeConsole` makes every character of content visible and inert at
the one place all output passes (its segments, just before they are written), so no call
site can forget; rich's own styling and cursor control are separate segments and untouched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

# C0 controls except tab and newline, DEL, C1 controls, and the bidirectional overrides
# that can make text read differently from what it is ("Trojan Source").
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str) -> str:
    """`text` with every control character shown as an escape (`\\x1b`), newlines kept."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


class SafeConsole(Console):
    """A rich Console whose content can never act as a terminal control sequence.

    Into a pipe or a file it does not wrap: one message stays one line for grep and logs.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "soft_wrap" not in kwargs and not self.is_terminal:
            self.soft_wrap = True

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(clean(segment.text), segment.style)
            for segment in buffer
        )
