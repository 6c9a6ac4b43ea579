"""search_files' worker, run in a process of its own so the server can kill it at a deadline.

Python's `re` holds the GIL for as long as one match runs, and a pattern such as `(a+)+$`
backtracks exponentially: in a thread it would freeze the whole server, and no thread can
be stopped. A process can. Standard library only (it starts with `python -I -S`), one
argument: a JSON object {root, target, pattern, glob, limit}. Matches go to stdout as they
are found, so a search cut short still returns what it found. Exit code 2: a bad pattern.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__"})
PIECE = 65536  # characters: a longer line is searched in pieces, so memory stays bounded
SHOWN = 300  # characters of a matching line shown
MEMORY_LIMIT = 1 << 30  # bytes of address space: a pattern cannot make the worker swap


def search(
    root: Path, target: Path, pattern: str, glob: str | None, limit: int, out: TextIO
) -> None:
    regex = re.compile(pattern)
    found = 0
    for file in _files(target):
        if glob and not file.match(glob):
            continue
        real = file.resolve()  # a symlink inside may point outside the root
        if real != root and not real.is_relative_to(root):
            continue
        for number, line in _lines(real):
            if regex.search(line):
                out.write(f"{file.relative_to(root)}:{number}: {line.rstrip()[:SHOWN]}\n")
                out.flush()
                found += 1
                if found >= limit:
                    out.write(f"[stopped at {limit} matches]\n")
                    return
    if not found:
        out.write("no matches\n")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, piece) of a regular text file; FIFOs and devices are never opened for
    a blocking read, and a binary file stops at its first NUL."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    with open(fd, encoding="utf-8", errors="replace", newline="") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        number, at_start = 0, True
        while piece := fh.readline(PIECE):
            if "\x00" in piece:
                return
            number += at_start
            at_start = piece.endswith("\n")
            yield number, piece


def _files(target: Path) -> Iterator[Path]:
    if not target.is_dir():
        yield target
        return
    for dirpath, dirnames, filenames in os.walk(target):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        yield from (Path(dirpath) / name for name in sorted(filenames))


def main(argv: list[str]) -> int:
    job = json.loads(argv[1])
    with contextlib.suppress(ImportError, ValueError, OSError):  # not on every platform
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    try:
        search(
            Path(job["root"]),
            Path(job["target"]),
            job["pattern"],
            job["glob"],
            job["limit"],
            sys.stdout,
        )
    except re.error as exc:
        print(f"invalid regular expression: {exc}")
        return 2
    except MemoryError:
        print(f"[search stopped: it needed more than {MEMORY_LIMIT >> 20} MB]")
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
