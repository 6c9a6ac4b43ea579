"""Give big buffers back to the system when they are freed.

glibc serves allocations above its mmap threshold with their own mappings, returned to the
system on free, but it raises that threshold (up to 32 MB) each time such a block is freed.
After one 27 MB tool reply (a 20 MB image in base64) the next ones come from the heap and
stay in the process when freed: three screenshots grew the agent by 100 MB more than one.
A fixed threshold keeps every block over 1 MiB a mapping of its own. Standard library only;
elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_MMAP_THRESHOLD = -3
THRESHOLD = 1024 * 1024


def return_big_buffers() -> bool:
    """mallopt(M_MMAP_THRESHOLD, 1 MiB) on glibc; whether it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        return int(libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD)) == 1
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
