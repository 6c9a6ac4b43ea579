"""How a login asks a person at the terminal: the line to open in a browser, and for
`--login` at a terminal the address the browser ends on, pasted (a browser on another
machine). The REPL and `--login` both use it, so it lives with the front ends, not in
the `--login` command that the session must not import."""

from __future__ import annotations

import sys

import anyio
from rich.console import Console
from rich.text import Text

from agent.auth.login import LoginHost


async def _paste_from_terminal() -> str:
    return await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)


def terminal_host(console: Console, *, paste: bool) -> LoginHost:
    def notify(line: str) -> None:
        console.print(Text(line))
        if paste:
            console.print(Text("(or paste here the address the browser ends on)", style="dim"))

    return LoginHost(interactive=True, notify=notify, paste=_paste_from_terminal if paste else None)
