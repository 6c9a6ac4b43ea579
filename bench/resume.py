"""`--resume` of a huge transcript against a small one, in the same run (issue 19 item 14).

    python bench/resume.py [--size-mb 1024] [--whole]

Writes a transcript of about `--size-mb` MB (turns of a user question, an assistant tool
call, a 19 KB tool result and an answer: ~210,000 messages per GB) and one of 40 messages in
a temporary folder, then loads each in a fresh process the way `--resume` does
(`agent.common.transcript.load` with the default window's budget) and reports wall time and peak
RSS of that process, next to a process that only imports the module. `--whole` also times
reading the big file whole (what resume did before): expect seconds and gigabytes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LOAD = """
import sys, time
from pathlib import Path
from agent.common.transcript import load
started = time.perf_counter()
loaded = load(Path(sys.argv[1]), max_tokens=int(sys.argv[2]))
print(len(loaded.messages), time.perf_counter() - started, open("/proc/self/status").read())
"""
IMPORT_ONLY = 'import agent.common.transcript; print(0, 0.0, open("/proc/self/status").read())'
WHOLE = """
import json, sys, time
from pathlib import Path
started = time.perf_counter()
lines = Path(sys.argv[1]).read_text().splitlines()
records = [json.loads(line) for line in lines if line.strip()]
print(len(records), time.perf_counter() - started, open("/proc/self/status").read())
"""


def turn(n: int) -> list[str]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "fs__read", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": f"question {n}: what is in file {n}?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": f"file {n}: " + "data " * 3800},
        {"role": "assistant", "content": f"file {n} holds data."},
    ]
    return [json.dumps({"type": "message", "message": m}) + "\n" for m in messages]


def write_transcript(path: Path, size: int) -> int:
    """A transcript of at least `size` bytes (or 10 turns); the number of messages."""
    count = n = 0
    with path.open("w") as fh:
        fh.write(json.dumps({"type": "meta", "created": time.time()}) + "\n")
        while fh.tell() < size or n < 10:
            lines = turn(n)
            fh.writelines(lines)
            count, n = count + len(lines), n + 1
    return count


def measure(code: str, *args: str) -> tuple[int, float, float, int]:
    """(messages, seconds inside, seconds wall, peak RSS in KB) of one fresh process.

    The peak is the child's own VmHWM (it prints its /proc status): wait4's ru_maxrss would
    start at the peak of the process that spawned it, which Linux carries across exec.
    """
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, cwd=REPO_ROOT, text=True
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"measurement failed ({proc.returncode}): {proc.stderr[-500:]}")
    messages, inside, status = proc.stdout.split(maxsplit=2)
    peak = re.search(r"VmHWM:\s*(\d+) kB", status)
    assert peak is not None, "no VmHWM in /proc/self/status"
    return int(messages), float(inside), wall, int(peak.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--whole", action="store_true", help="also read the big file whole")
    args = parser.parse_args(argv)
    budget = str(2 * 128_000)  # what --resume reads back with the default window
    with tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp:
        big, small = Path(tmp) / "big.jsonl", Path(tmp) / "small.jsonl"
        started = time.perf_counter()
        big_count = write_transcript(big, args.size_mb * 1024 * 1024)
        written = time.perf_counter() - started
        small_count = write_transcript(small, 0)
        print(f"big: {big.stat().st_size / 2**20:,.0f} MB, {big_count:,} messages "
              f"(written in {written:.1f} s); small: {small_count} messages")  # fmt: skip
        rows = [
            ("import only", measure(IMPORT_ONLY)),
            ("resume small", measure(LOAD, str(small), budget)),
            ("resume big", measure(LOAD, str(big), budget)),
        ]
        if args.whole:
            rows.append(("big read whole (before)", measure(WHOLE, str(big))))
    print(f"{'measurement':<26}{'messages':>10}{'load s':>9}{'process s':>11}{'peak RSS':>11}")
    for label, (messages, inside, wall, rss) in rows:
        print(f"{label:<26}{messages:>10,}{inside:>9.3f}{wall:>11.2f}{rss / 1024:>8.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
