"""SIGTERM and SIGHUP end a run the way Ctrl-C does, then exit 128 + the signal number.

Their default action kills the process on the spot: no `finally` runs, so the servers'
process groups (each stdio server leads its own) outlive us, the JSON report is never
printed and the transcript is not closed. Here the signal cancels the run's main task the
way asyncio's own SIGINT handler does, so every cleanup path is the one Ctrl-C takes: the
registry closes its servers (shielded and bounded) before their owner tasks are cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType
from typing import Any

ENDING_SIGNALS = {
    getattr(signal, name): word
    for name, word in (("SIGTERM", "terminated"), ("SIGHUP", "hung up"))
    if hasattr(signal, name)
}


class SignalEnded(BaseException):
    """SIGTERM / SIGHUP before the run's event loop takes them over (while servers start
    and the heavy modules load): it unwinds like KeyboardInterrupt, so every `finally`
    runs and the servers started early are stopped. A BaseException: no `except
    Exception` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.exit_code = 128 + signum
        self.word = ENDING_SIGNALS.get(signum, "ended")


@contextlib.contextmanager
def ending_signals_raise() -> Iterator[None]:
    """From before the first server starts: SIGTERM / SIGHUP raise SignalEnded (their
    default action would kill us on the spot, leaving the servers running). The event
    loop's own handlers (ended_by_signals) replace these while it runs."""

    def raise_ended(signum: int, frame: FrameType | None) -> None:
        raise SignalEnded(signum)

    with _handled_by(tuple(ENDING_SIGNALS), raise_ended):
        yield


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGTERM, SIGHUP and SIGINT wait until the block ends, then reach the handlers in
    force (SignalEnded, KeyboardInterrupt, or the default action).

    For a spawn: an exception raised inside Popen after the fork loses the Popen object,
    and with it the only way to stop that child. Blocking the signals instead would be
    inherited by the child, which could then never be stopped by SIGTERM.
    """
    caught: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    try:
        with _handled_by((*ENDING_SIGNALS, signal.SIGINT), hold):
            yield
    finally:  # the previous handlers are back: each caught signal reaches them now
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


@contextlib.contextmanager
def _handled_by(
    signums: tuple[int, ...], handler: Callable[[int, FrameType | None], None]
) -> Iterator[None]:
    """`handler` for `signums` during the block, then the previous handlers again. Off the
    main thread Python cannot set handlers: nothing changes there."""
    previous = {}
    for signum in signums:
        with contextlib.suppress(ValueError, OSError):
            previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            if old is not None:  # None: set outside Python, nothing to put back
                signal.signal(signum, old)


async def ended_by_signals(main: Callable[..., Awaitable[int]], *args: Any) -> int:
    """Run `main(*args)`; on SIGTERM / SIGHUP cancel it, let it clean up, return 128 + signum.

    The handlers stay installed until the cleanup is over, so a second signal cannot cut it
    short (it is bounded anyway: every shutdown wait has its own time limit).
    """
    host = asyncio.current_task()
    loop = asyncio.get_running_loop()
    caught: list[int] = []

    def on_signal(signum: int) -> None:
        if not caught and host is not None:
            caught.append(signum)
            host.cancel()

    installed = []
    for signum in ENDING_SIGNALS:
        try:
            loop.add_signal_handler(signum, on_signal, signum)
        except (NotImplementedError, RuntimeError, ValueError):  # platform / not main thread
            continue
        installed.append(signum)
    try:
        return await main(*args)
    except asyncio.CancelledError:
        if not caught or host is None:
            raise
        host.uncancel()
        with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
            print(ENDING_SIGNALS[caught[0]], file=sys.stderr)
        return 128 + caught[0]
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
