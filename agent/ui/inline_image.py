"""Pictures in the terminal, where the terminal says it can show them.

Two protocols cover the terminals that draw images inline: kitty's graphics protocol (kitty,
Ghostty, WezTerm, Konsole) and iTerm2's inline files (iTerm2, WezTerm, VS Code's terminal).
Which one a terminal speaks is read from what it tells its programs (TERM, TERM_PROGRAM,
LC_TERMINAL, KITTY_WINDOW_ID), never assumed: anywhere else, and inside tmux or screen
(which drop these sequences unless configured), only the saved file's path is shown.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Literal

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import ControlType, Segment

Protocol = Literal["kitty", "iterm"]
MAX_INLINE_BYTES = 2 * 1024 * 1024  # larger pictures: the path only
_KITTY_CHUNK = 4096  # the protocol's largest payload per escape sequence
_KITTY_TERMINALS = {"ghostty", "wezterm"}
_ITERM_TERMINALS = {"iterm.app", "iterm2", "vscode"}


def inline_protocol(environ: Mapping[str, str], is_terminal: bool) -> Protocol | None:
    """The image protocol this terminal announces, or None (then paths only)."""
    if not is_terminal or environ.get("TMUX") or environ.get("STY"):
        return None
    term = environ.get("TERM", "").lower()
    program = environ.get("TERM_PROGRAM", "").lower()
    if term == "xterm-kitty" or environ.get("KITTY_WINDOW_ID") or program in _KITTY_TERMINALS:
        return "kitty"
    if program in _ITERM_TERMINALS or environ.get("LC_TERMINAL", "").lower() == "iterm2":
        return "iterm"
    return None


def escape_sequences(protocol: Protocol, data: bytes, mime_type: str) -> list[str]:
    """The escape sequences that draw `data`; empty when this protocol cannot show it
    (kitty takes PNG directly; iTerm2 takes any image format its OS can decode)."""
    if not data or len(data) > MAX_INLINE_BYTES:
        return []
    encoded = base64.standard_b64encode(data).decode("ascii")
    if protocol == "iterm":
        return [f"\x1b]1337;File=inline=1;size={len(data)};preserveAspectRatio=1:{encoded}\x07"]
    if mime_type != "image/png":
        return []
    chunks = [encoded[i : i + _KITTY_CHUNK] for i in range(0, len(encoded), _KITTY_CHUNK)]
    sequences = []
    for n, chunk in enumerate(chunks):
        more = 1 if n < len(chunks) - 1 else 0
        head = f"a=T,f=100,m={more}" if n == 0 else f"m={more}"
        sequences.append(f"\x1b_G{head};{chunk}\x1b\\")
    return sequences


class InlineImage:
    """A renderable that writes the sequences as control segments: rich passes them to the
    terminal unchanged and counts them as zero width, and drops them when not a terminal."""

    def __init__(self, sequences: Iterable[str]) -> None:
        self.sequences = list(sequences)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for sequence in self.sequences:
            yield Segment(sequence, None, [(ControlType.BELL,)])
        yield Segment.line()
