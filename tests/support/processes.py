"""Looking at processes a test started from the outside: is it still alive, what did it say."""

from __future__ import annotations

import threading
from pathlib import Path


def alive(pid: int) -> bool:
    """Alive and not a zombie: a killed child may linger as a zombie until its parent (or
    init, for an orphan) gets round to reaping it, and is dead for our purpose."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def read_fifo(path: Path, timeout: float = 60) -> str:
    """The FIFO's contents; opening blocks until the writer comes, so bound it with a thread."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(path.read_text()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not got:
        with open(path, "w"):  # unblock the reader thread before failing
            pass
        raise AssertionError("the tool never started")
    return got[0]
