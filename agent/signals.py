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
from collections.abc import Awaitable, Callable
from typing import Any

ENDING_SIGNALS = {
    getattr(signal, name): word
    for name, word in (("SIGTERM", "terminated"), ("SIGHUP", "hung up"))
    if hasattr(signal, name)
}


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
