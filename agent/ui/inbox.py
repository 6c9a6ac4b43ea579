"""Work for the terminal that arrives while the REPL waits at its prompt.

An MCP App in the browser may ask something of the person at the terminal at any moment:
run a tool (an approval question), open a link (a question), or send a message (the
user's next turn). At the prompt, the line being typed is set aside (kept as the next
prompt's default), the item runs in the REPL's own task, and the prompt comes back. During
a turn the REPL asks in the turn's flow instead (agent.ui.repl `in_terminal`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio


@dataclass(frozen=True)
class AppTurn:
    """A message from an app: the user's next turn, shown as coming from `source`."""

    source: str
    text: str


@dataclass
class Work:
    """Something to run in the REPL's task (it asks a question); its caller awaits `done`."""

    run: Callable[[], Awaitable[Any]]
    done: anyio.Event = field(default_factory=anyio.Event)
    value: Any = None
    error: BaseException | None = None

    async def __call__(self) -> None:
        try:
            self.value = await self.run()
        except Exception as exc:
            self.error = exc
        finally:
            self.done.set()


Item = AppTurn | Work


class Inbox:
    def __init__(self) -> None:
        self._items: deque[Item] = deque()
        self._arrived = anyio.Event()
        self._draft = ""  # what was typed when an item interrupted the prompt

    def put(self, item: Item) -> None:
        self._items.append(item)
        self._arrived.set()

    async def run(self, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run `work` in the REPL's task at its next prompt; its value (or error)."""
        item = Work(work)
        self.put(item)
        await item.done.wait()
        if item.error is not None:
            raise item.error
        return item.value

    async def next(self, input_line: Any, message: str) -> str | Item:
        """The next line typed, or the next item (which interrupts the prompt)."""
        if self._items:
            return self._items.popleft()
        self._arrived = anyio.Event()  # set by items already taken
        line: str | None = None
        failure: BaseException | None = None
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                nonlocal line, failure
                draft, self._draft = self._draft, ""
                try:
                    line = await input_line.prompt_async(message, default=draft)
                except (KeyboardInterrupt, EOFError) as exc:
                    failure = exc
                tg.cancel_scope.cancel()

            async def wait() -> None:
                await self._arrived.wait()
                buffer = getattr(input_line, "default_buffer", None)
                self._draft = buffer.text if buffer is not None else ""
                tg.cancel_scope.cancel()

            tg.start_soon(read)
            tg.start_soon(wait)
        if failure is not None:
            raise failure
        if line is not None:
            return line
        return self._items.popleft()
