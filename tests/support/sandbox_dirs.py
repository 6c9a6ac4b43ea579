"""Where the sandbox tests keep a folder a sandboxed command must not be able to write.

The sandbox lets commands write the workspace and the temp folders (/tmp, /var/tmp,
/dev/shm, $TMPDIR), so "outside" must be outside all of them. The checkout's `.cache` is,
unless the checkout itself lies in one (a clone under /tmp, as a CI runner may make): then
the user's `~/.cache` (the real one: each test's HOME is a temp folder, tests/support/hermetic.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.hermetic import REAL_HOME
from tests.support.servers import REPO_ROOT

TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def outside_temp_base() -> Path:
    """`<somewhere>/sandbox-tests`, in no folder the sandbox leaves writable."""
    temps = [Path(p).resolve() for p in (*TEMP_DIRS, os.environ.get("TMPDIR") or "/tmp")]
    for base in (REPO_ROOT / ".cache", REAL_HOME / ".cache"):
        real = base.resolve()
        if not any(real == temp or real.is_relative_to(temp) for temp in temps):
            return base / "sandbox-tests"
    raise RuntimeError("no folder outside the temp folders for the sandbox tests")
