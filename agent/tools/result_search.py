"""read_result's pattern search, run in a process of its own so the agent can stop it.

Python's `re` holds the GIL for as long as one match runs, and a pattern the model writes
(`(a+)+$`) can backtrack for hours: on the agent's event loop that froze the whole agent,
Ctrl-C and SIGTERM included. A process can be killed at a deadline, and the loop stays
free while it works. Standard library only (started with `python -I -S`); one argument, a
JSON object {path, pattern, offset, max_matches, line_chars}. Each match goes to stdout as
it is found, `<offset>: <line>`, so a search cut short still returns what it found; the
last line is `total <n>`. Exit code 2: a bad pattern (the message on stdout).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys

MEMORY_LIMIT = 1 << 30  # bytes of address space: a pattern cannot make the worker swap


def search(job: dict[str, object]) -> int:
    try:
        regex = re.compile(str(job["pattern"]))
    except re.error as exc:
        sys.stdout.write(f"`pattern` is not a regex ({exc})\n")
        return 2
    offset, wanted, width = (int(str(job[key])) for key in ("offset", "max_matches", "line_chars"))
    at = total = 0
    # Newlines read as read_text reads them, so offsets agree with read_result's pages.
    with open(str(job["path"]), encoding="utf-8", errors="replace") as text:
        for line in text:
            if at >= offset and regex.search(line):
                total += 1
                if total <= wanted:
                    sys.stdout.write(f"{at}: {line.rstrip()[:width]}\n")
                    sys.stdout.flush()
            at += len(line)
    sys.stdout.write(f"total {total}\n")
    return 0


def main(argv: list[str]) -> int:
    with contextlib.suppress(ImportError, ValueError, OSError):  # not on every platform
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    try:
        return search(json.loads(argv[1]))
    except MemoryError:
        sys.stdout.write(f"[search stopped: it needed more than {MEMORY_LIMIT >> 20} MB]\n")
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
