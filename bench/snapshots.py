"""What a checkpoint costs (/undo): snapshots of a 10,000-file workspace.

The first snapshot of a session reads and copies every file into the store, so its
baseline is `cp -r` of the same tree; a second one with nothing changed reads nothing (a
file's size, times and inode match the first) and copies nothing, so its baseline is
walking the tree with a stat per file, in Python. Both in one run, on the same tree
(files of 1–3 KB in 100 folders, in the page cache as the agent's would be). Full runs
also time the same workspace as a git work tree (the list comes from `git ls-files`).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from agent.common.snapshots import SnapshotStore
from bench.measures import Row

FILES = 10_000
FOLDERS = 100


def make_workspace(root: Path, files: int) -> None:
    for n in range(files):
        folder = root / f"pkg{n % FOLDERS:03d}"
        folder.mkdir(exist_ok=True)
        body = f"# module {n}\n" + f"value = {n}\n" * (50 + n % 100)
        (folder / f"mod{n:05d}.py").write_text(body)


def _timed(fn: object) -> float:
    started = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - started


def _walk(root: Path) -> None:
    for top, _, names in os.walk(root):
        for name in names:
            os.lstat(os.path.join(top, name))


def _one(files: int, git: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        ws, copy, store_dir = Path(tmp) / "ws", Path(tmp) / "copy", Path(tmp) / "s.checkpoints"
        ws.mkdir()
        make_workspace(ws, files)
        if git:
            subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
        cp = _timed(lambda: subprocess.run(["cp", "-r", str(ws), str(copy)], check=True))
        store = SnapshotStore(store_dir, ws)
        found: dict[str, object] = {}
        first = _timed(lambda: found.setdefault("first", store.snapshot(None)))
        second = _timed(lambda: store.snapshot(found["first"]))  # type: ignore[arg-type]
        walk = _timed(lambda: _walk(ws))
        shutil.rmtree(copy)
        return {"cp": cp, "first": first, "second": second, "walk": walk}


def snapshot_cost(smoke: bool) -> list[Row]:
    files = 1_000 if smoke else FILES
    runs = [_one(files, git=False) for _ in range(1 if smoke else 3)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    detail: dict[str, object] = {"files": files, "runs": runs}
    if not smoke:
        detail["git_work_tree"] = _one(files, git=True)
    return [
        Row(
            "snapshot_first",
            f"checkpoint: first snapshot of a {files:,}-file workspace vs cp -r",
            "s",
            med["first"],
            med["cp"],
            "ratio",
            3.0,
            detail,
        ),
        Row(
            "snapshot_second",
            f"checkpoint: second snapshot ({files:,} files unchanged) vs a walk with stat",
            "s",
            med["second"],
            med["walk"],
            "ratio",
            5.0,
        ),
    ]


if __name__ == "__main__":
    for row in snapshot_cost(smoke=False):
        print(row.label, f"{row.ours:.3f}", f"{row.baseline:.3f}", f"{row.value:.2f}x", row.detail)
