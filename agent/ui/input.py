"""The REPL's input line: prompt-toolkit key bindings, completion and the history file.

Enter sends; Esc-Enter or a trailing backslash starts a new line; from a pipe (PipedLines)
each line is sent. Completion offers slash commands, their arguments, tool and server names and
`@server:uri` references, from what the REPL knows right now; when that offers nothing, the
servers' own completions (prompt arguments, resource template values).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import termios
import threading
from collections.abc import AsyncGenerator, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.completion.base import get_common_complete_suffix
from prompt_toolkit.document import Document
from prompt_toolkit.filters import has_completions
from prompt_toolkit.history import History
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from agent.common.private import private_folder
from agent.config.settings import Settings


class CompletionSource(Protocol):
    """What completion asks of the front end (the REPL), right now."""

    @property
    def commands(self) -> Mapping[str, object]: ...

    def argument_words(self, command: str) -> list[str]: ...

    def resource_refs(self) -> list[str]: ...

    async def server_completions(self, text: str) -> list[tuple[str, int]]:
        """(completion, start position) the servers offer for `text` (completion/complete)."""
        ...


def input_key_bindings() -> KeyBindings:
    """Enter sends; Esc-Enter, or Enter after a trailing backslash, starts a new line."""
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("tab", filter=~has_completions)
    def _complete(event: KeyPressEvent) -> None:
        """What the REPL knows is completed at once; only the servers' own completions
        wait. prompt-toolkit completes in a task of its own: a Tab and an Enter read
        together sent the line as typed (`/he`) and then drew it completed (`/help`)."""
        buffer = event.current_buffer
        asked = CompleteEvent(completion_requested=True)
        known = (
            list(buffer.completer.get_completions(buffer.document, asked))
            if buffer.completer
            else []
        )
        if len(known) == 1:
            buffer.apply_completion(known[0])
            return
        if common := get_common_complete_suffix(buffer.document, known):
            buffer.insert_text(common)
        buffer.start_completion(insert_common_part=True)

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.document.text_before_cursor.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    return bindings


class ReplCompleter(Completer):
    """Slash commands, then their arguments: servers and tools, approval modes, prompts."""

    def __init__(self, repl: CompletionSource) -> None:
        self.repl = repl

    def get_completions(self, document: Document, complete_event: object) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/"):
            yield from self._references(text)
            return
        if " " not in text:
            for name in self.repl.commands:
                if name.startswith(text[1:]):
                    yield Completion("/" + name, start_position=-len(text))
            return
        command, _, arg = text.partition(" ")
        for word in self.repl.argument_words(command[1:]):
            if word.startswith(arg) and word != arg:
                yield Completion(word, start_position=-len(arg))

    async def get_completions_async(
        self, document: Document, complete_event: CompleteEvent
    ) -> AsyncGenerator[Completion, None]:
        """What the REPL knows first; when that offers nothing, what the servers offer."""
        offered = False
        for completion in self.get_completions(document, complete_event):
            offered = True
            yield completion
        if offered:
            return
        for text, start in await self.repl.server_completions(document.text_before_cursor):
            yield Completion(text, start_position=start)

    def _references(self, text: str) -> Iterator[Completion]:
        """`@server:uri` resource references anywhere in a request."""
        word = text.rsplit(None, 1)[-1] if text.strip() else ""
        if not word.startswith("@"):
            return
        for ref in self.repl.resource_refs():
            if ref.startswith(word[1:]):
                yield Completion("@" + ref, start_position=-len(word))


def prompt_session(history: History, **io: Any) -> PromptSession[str]:
    """The REPL's input line; `io` (input=, output=) lets tests drive it headless."""
    return PromptSession(
        history=history,
        multiline=True,
        key_bindings=input_key_bindings(),
        prompt_continuation="  ",
        complete_while_typing=False,
        **io,
    )


class PipedLines:
    """The REPL's input from a pipe or a file: a turn per line, a trailing backslash joins the
    next line. Read without prompt-toolkit, which would print a warning, draw prompts and ask
    the terminal for the cursor position (whose reply then lands in the user's shell)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._pending: asyncio.Future[str | None] | None = None

    async def prompt_async(self, message: str = "", **_: Any) -> str:
        """The next turn; EOFError at the end of the input, like prompt-toolkit's Ctrl-D.

        A wait that is cancelled (an app's message came first) leaves its read running: the
        next call takes that line, so no line is ever lost. The reader is a daemon thread,
        so a read still waiting at exit never holds the process.
        """
        if self._pending is None:
            loop = asyncio.get_running_loop()
            pending: asyncio.Future[str | None] = loop.create_future()

            def read() -> None:
                turn = self._read_turn()
                with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                    loop.call_soon_threadsafe(
                        lambda: None if pending.done() else pending.set_result(turn)
                    )

            threading.Thread(target=read, name="piped-input", daemon=True).start()
            self._pending = pending
        turn = await asyncio.shield(self._pending)
        self._pending = None
        if turn is None:
            raise EOFError
        return turn

    def _read_turn(self) -> str | None:
        lines: list[str] = []
        while line := self.stream.readline():
            line = line.rstrip("\r\n")
            if not line.endswith("\\"):
                return "\n".join([*lines, line])
            lines.append(line[:-1])
        return "\n".join(lines) if lines else None


@contextlib.contextmanager
def typeahead_unechoed(stream: TextIO) -> Iterator[None]:
    """Keys typed while the REPL works (a turn, a command) wait, unechoed, for the prompt.

    In its ordinary mode a terminal echoes each key where the cursor happens to be: a line
    typed during a turn was drawn twice (in the middle of the answer, then by the prompt
    that reads it), and the echo (or Ctrl-C's `^C`) moved the cursor under rich's live
    region, whose next redraw then left a copy of its first line behind. Only ECHO goes:
    lines still gather (ICANON), Ctrl-C still interrupts (ISIG), each prompt's raw mode
    saves and restores this state, and the terminal gets its own state back at the end.
    """
    try:
        fd = stream.fileno()
        saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    except (OSError, ValueError, termios.error):  # not a terminal (a pipe, a test's StringIO)
        saved = None
    if saved is None:
        yield
        return
    quiet = list(saved)
    quiet[3] = saved[3] & ~termios.ECHO  # lflag
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error):  # the terminal went away
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def history_file(settings: Settings) -> Path:
    """The input history: private (0600), since people paste secrets into prompts."""
    path = settings.state_dir / "history"
    private_folder(path.parent)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    path.chmod(0o600)  # one made by an older version
    return path
