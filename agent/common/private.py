"""Keep the agent's memory and environment from other processes of the same user.

A stdio server runs as the user running the agent, and Linux lets a same-user process read
`/proc/<pid>/environ` (OPENAI_API_KEY and every other secret exported to the agent) and
`/proc/<pid>/mem`. A non-dumpable process's /proc files belong to root, so neither works
any more, nor ptrace (gdb, py-spy) without privileges; core dumps are off too. Standard
library only: it runs first thing, before anything else is imported.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from pathlib import Path

PR_SET_DUMPABLE = 4


def make_non_dumpable() -> bool:
    """prctl(PR_SET_DUMPABLE, 0) on Linux; whether it took effect (elsewhere: False)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # no libc / no prctl (exotic builds): nothing to do
        return False


def private_folder(path: Path) -> Path:
    """Create `path` and every missing folder above it readable by the user only (0700):
    the state folder holding sessions, logs and history is private too, not only its
    subfolders (`mkdir(parents=True, mode=...)` gives the parents the umask's 0755).
    Folders that exist already are left as they are."""
    missing: list[Path] = []
    folder = path
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    return path
