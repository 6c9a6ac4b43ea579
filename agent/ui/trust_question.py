"""The REPL's one question about a working directory that has its own configuration.

Asked before anything of the folder is used, once per folder: "yes" and "never" are
remembered by the caller, "not now" asks again next time. The files' contents are shown as
plain text on a safe console (they come from the folder, so they are untrusted).
"""

from __future__ import annotations

from typing import Literal, Protocol

from rich.console import Console
from rich.text import Text

from agent.config.trust import Trust

Reply = Literal["trust", "not now", "never"]
QUESTION = "Trust this folder and use its files? [y]es / [n]ot now / ne[v]er: "
_REPLIES: dict[str, Reply] = {
    "y": "trust",
    "yes": "trust",
    "t": "trust",
    "trust": "trust",
    "n": "not now",
    "no": "not now",
    "not now": "not now",
    "": "not now",
    "v": "never",
    "never": "never",
}


class LineReader(Protocol):
    def prompt(self, message: str) -> str: ...


def ask_trust(trust: Trust, effects: list[str], console: Console, reader: LineReader) -> Reply:
    """Show what the folder's files would do, then ask until the reply is understood.

    End of input (Ctrl-D) is "not now": nothing is remembered and nothing of the folder used.
    """
    console.print(Text(f"{trust.folder} has its own configuration:", style="bold"))
    for line in effects:
        console.print(Text(f"  {line}"))
    console.print(
        Text(
            "Used only if you trust this folder: its servers start, its settings apply, and "
            "its instructions, commands and agents reach the model.",
            style="dim",
        )
    )
    while True:
        try:
            reply = reader.prompt(QUESTION).strip().lower()
        except EOFError:
            return "not now"
        if reply in _REPLIES:
            return _REPLIES[reply]
        console.print(Text("answer y, n or v (never)", style="dim"))
