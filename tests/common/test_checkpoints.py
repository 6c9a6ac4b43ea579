"""Checkpoints and their store (agent/common/checkpoints.py, snapshots.py), driven by the
real loop with scripted tools: when snapshots are taken, what a restore may touch, the
caps, pruning and a resumed store. The REPL's /undo and /redo run whole in
tests/e2e/test_undo_terminal.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.common import checkpoints as checkpoints_module
from agent.common.checkpoints import Checkpoints, Plan
from agent.common.memory import Memory
from agent.common.snapshots import Caps
from agent.loop.events import Notice
from agent.loop.react import Agent
from tests.support.fake_model import FakeModel, FakeTools, answer, calls, drain

pytestmark = pytest.mark.anyio


def workspace_with(tmp_path: Path, **files: str) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    for name, content in files.items():
        (root / name).write_text(content)
    return root


def agent_over(root: Path, store: Checkpoints, model: FakeModel) -> Agent:
    """The loop with three tools: `write` and `move` (may change things), `look` (read-only)."""

    async def write(args: dict[str, Any]) -> str:
        target = root / args["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(args["text"])
        return "written"

    async def look(args: dict[str, Any]) -> str:
        return "looked"

    async def move(args: dict[str, Any]) -> str:
        target = root / args["to"]
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            target.rmdir()  # an empty folder where the file goes
        (root / args["path"]).rename(target)
        return "moved"

    tools = FakeTools({"write": write, "look": look, "move": move}, read_only=frozenset({"look"}))
    return Agent(model, tools, Memory(), checkpoints=store)


async def plan(store: Checkpoints, direction: str = "undo") -> Plan:
    found = await store.plan("undo" if direction == "undo" else "redo")
    assert isinstance(found, Plan), found
    return found


async def test_a_turn_of_read_only_calls_takes_no_snapshot(tmp_path: Path) -> None:
    root = workspace_with(tmp_path, a="a")
    store = Checkpoints(tmp_path / "s.checkpoints", root)
    model = FakeModel([calls(("look", {})), answer("done")])
    await drain(agent_over(root, store, model), "look around")
    assert store.turns == [] and not (tmp_path / "s.checkpoints" / "objects").exists()
    assert await store.plan("undo") == (
        "nothing to undo: no turn of this session changed files in the workspace"
    )


async def test_one_turn_of_several_steps_is_undone_as_one(tmp_path: Path) -> None:
    root = workspace_with(tmp_path, a="one")
    store = Checkpoints(tmp_path / "s.checkpoints", root)
    model = FakeModel(
        [
            calls(("write", {"path": "a", "text": "two"})),
            calls(("write", {"path": "sub/dir/b", "text": "new"})),
            answer("done"),
        ]
    )
    await drain(agent_over(root, store, model), "change things")
    assert len(store.turns) == 1
    said = await store.apply(await plan(store))
    assert "restored 1 (a), removed 1 (sub/dir/b)" in said
    assert (root / "a").read_text() == "one"
    assert sorted(os.listdir(root)) == ["a"]  # the folders the turn made went with it


async def test_a_change_with_the_same_size_and_mtime_is_still_seen(tmp_path: Path) -> None:
    """The stat cache may spare reading a file only when nothing could have changed it:
    a same-size rewrite with its mtime put back still changes the ctime."""
    root = workspace_with(tmp_path, a="aaaa")
    store = Checkpoints(tmp_path / "s.checkpoints", root)
    first = await anyio.to_thread.run_sync(store.store.snapshot, None)
    before = os.stat(root / "a")
    (root / "a").write_text("bbbb")
    os.utime(root / "a", ns=(before.st_atime_ns, before.st_mtime_ns))
    second = await anyio.to_thread.run_sync(store.store.snapshot, first)
    assert second.files["a"].sha != first.files["a"].sha


async def test_a_restore_never_writes_through_a_folder_replaced_by_a_symlink(
    tmp_path: Path,
) -> None:
    root = workspace_with(tmp_path)
    (root / "sub").mkdir()
    (root / "sub" / "f").write_text("old")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("outside, must stay")
    store = Checkpoints(tmp_path / "s.checkpoints", root)
    model = FakeModel([calls(("write", {"path": "sub/f", "text": "new"})), answer("done")])
    await drain(agent_over(root, store, model), "change sub/f")
    (root / "sub" / "f").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside)  # after the turn, `sub` leads out of the workspace
    said = await store.apply(await plan(store))
    assert "sub/f: its folder is not a real folder inside the workspace; not restored" in said
    assert (outside / "f").read_text() == "outside, must stay"


async def test_undo_never_deletes_a_moved_file_whose_place_it_could_not_restore(
    tmp_path: Path,
) -> None:
    """The turn moved sub/f to moved/f; then `sub` became a link out of the workspace.
    /undo refuses to write through it, so moved/f is the only copy on disk: kept, and
    only what was restored is counted."""
    root = workspace_with(tmp_path, a="one")
    (root / "sub").mkdir()
    (root / "sub" / "f").write_text("precious")
    outside = tmp_path / "outside"
    outside.mkdir()
    store = Checkpoints(tmp_path / "s.checkpoints", root)
    model = FakeModel(
        [
            calls(("write", {"path": "a", "text": "two"})),
            calls(("move", {"path": "sub/f", "to": "moved/f"})),
            answer("done"),
        ]
    )
    await drain(agent_over(root, store, model), "tidy up")
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside)
    said = await store.apply(await plan(store))
    assert said == (
        'undid turn 1 ("tidy up"): restored 1 (a); not done: '
        "moved/f: kept: the only copy on disk of sub/f, which was not restored; "
        "sub/f: its folder is not a real folder inside the workspace; not restored"
    )
    assert (root / "moved" / "f").read_text() == "precious"
    assert sorted(os.listdir(root / "moved")) == ["f"]  # put back under its own name
    assert (root / "a").read_text() == "one" and os.listdir(outside) == []


async def test_undo_that_restored_nothing_says_so_and_can_be_tried_again(tmp_path: Path) -> None:
    root = workspace_with(tmp_path)
    (root / "sub").mkdir()
    (root / "sub" / "f").write_text("precious")
    store = Checkpoints(tmp_path / "s.checkpoints", root)
    model = FakeModel([calls(("move", {"path": "sub/f", "to": "moved/f"})), answer("done")])
    await drain(agent_over(root, store, model), "move it")
    (root / "sub").rmdir()
    (root / "sub").symlink_to(tmp_path)
    said = await store.apply(await plan(store))
    assert said.startswith('/undo: nothing undone of turn 1 ("move it"); not done: moved/f: kept')
    assert said.endswith("; /undo again once that is fixed")
    assert (root / "moved" / "f").read_text() == "precious"
    (root / "sub").unlink()  # fixed: the same /undo now goes through
    said = await store.apply(await plan(store))
    assert said == 'undid turn 1 ("move it"): restored 1 (sub/f), removed 1 (moved/f)'
    assert (root / "sub" / "f").read_text() == "precious" and not (root / "moved").exists()


async def test_undo_puts_a_file_back_into_the_folder_of_its_own_name(tmp_path: Path) -> None:
    """x/f became the file x (same content): the file set aside frees x for the folder."""
    root = workspace_with(tmp_path)
    (root / "x").mkdir()
    (root / "x" / "f").write_text("content")
    store = Checkpoints(tmp_path / "s.checkpoints", root)
    model = FakeModel(
        [
            calls(("move", {"path": "x/f", "to": "y"})),
            calls(("move", {"path": "y", "to": "x"})),
            answer("done"),
        ]
    )
    await drain(agent_over(root, store, model), "flatten")
    assert (root / "x").read_text() == "content"
    said = await store.apply(await plan(store))
    assert said == 'undid turn 1 ("flatten"): restored 1 (x/f), removed 1 (x)'
    assert os.listdir(root) == ["x"] and os.listdir(root / "x") == ["f"]
    assert (root / "x" / "f").read_text() == "content"


async def test_files_past_the_caps_are_said_and_never_deleted_by_undo(tmp_path: Path) -> None:
    root = workspace_with(tmp_path, small="s")
    caps = Caps(max_file_bytes=100)
    store = Checkpoints(tmp_path / "s.checkpoints", root, caps=caps)
    big = ("write", {"path": "big", "text": "x" * 500})
    model = FakeModel([calls(big, ("write", {"path": "small", "text": "t"})), answer("done")])
    agent = agent_over(root, store, model)
    (root / "huge").write_text("y" * 500)
    events = await drain(agent, "write")
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any(
        "1 file of the workspace not snapshotted (larger than the size cap" in n for n in notices
    )
    said = await store.apply(await plan(store))
    assert "restored 1 (small)" in said and "the snapshots do not cover (past the caps" in said
    assert (root / "big").exists() and (root / "huge").exists()  # unknown before: left alone


async def test_old_turns_are_pruned_and_a_reopened_store_keeps_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoints_module, "KEEP_TURNS", 3)
    root = workspace_with(tmp_path, a="0")
    folder = tmp_path / "s.checkpoints"
    store = Checkpoints(folder, root)
    writes = (calls(("write", {"path": "a", "text": str(n)})) for n in range(1, 6))
    agent = agent_over(root, store, FakeModel([r for w in writes for r in (w, answer("done"))]))
    for n in range(1, 6):
        await drain(agent, f"write {n}")
    assert [t.number for t in store.turns] == [3, 4, 5]
    # A turn's "before" is the turn before's "after" (nothing changed between): 4 states.
    assert len(list((folder / "manifests").glob("*.json"))) == 4
    assert len([p for p in (folder / "objects").rglob("*") if p.is_file()]) == 4  # "2".."5"

    reopened = Checkpoints(folder, root)  # what --resume does
    for expected in ("4", "3", "2"):
        await reopened.apply(await plan(reopened))
        assert (root / "a").read_text() == expected
    assert "nothing more to undo" in str(await reopened.plan("undo"))
    assert (folder / "checkpoints.json").stat().st_mode & 0o777 == 0o600


async def test_neither_the_state_folder_nor_symlinks_are_snapshotted(tmp_path: Path) -> None:
    root = workspace_with(tmp_path, a="a")
    (tmp_path / "secret").write_text("outside the workspace")
    (root / "link").symlink_to(tmp_path / "secret")
    (root / "linked-dir").symlink_to(tmp_path)
    state = root / ".state"
    (state / "sessions").mkdir(parents=True)
    (state / "history").write_text("typed lines")
    store = Checkpoints(state / "sessions" / "x.checkpoints", root, exclude=(state,))
    manifest = await anyio.to_thread.run_sync(store.store.snapshot, None)
    assert sorted(manifest.files) == ["a"]


def test_a_repository_s_fsmonitor_hook_is_never_run(tmp_path: Path) -> None:
    """`git ls-files` runs the command a repository's own config names as core.fsmonitor
    (git 2.39 does): listing an untrusted checkout must not run its code."""
    root = workspace_with(tmp_path, a="a")
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path / 'hook-ran'}\necho\n")
    hook.chmod(0o755)
    for args in (["init", "-q"], ["add", "a"], ["config", "core.fsmonitor", str(hook)]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    store = Checkpoints(tmp_path / "s.checkpoints", root)
    manifest = store.store.snapshot(None)
    assert manifest.lister == "git" and sorted(manifest.files) == ["a"]
    assert not (tmp_path / "hook-ran").exists()


async def test_environments_caches_and_secret_files_are_not_copied_and_undo_says_so(
    tmp_path: Path,
) -> None:
    """Issue 41 #9: a workspace's `.venv` (and any folder holding `pyvenv.cfg`),
    `node_modules` and caches were copied into the state folder once a session, and `.env`
    and keys with them; none is copied now, and `/undo` says what it does not restore."""
    root = workspace_with(tmp_path, a="a", **{".env": "TOKEN=sk-live-1", "key.pem": "PRIVATE"})
    for inner in (".venv/lib", "myenv/lib", "node_modules/x", "pkg/__pycache__"):
        (root / inner).mkdir(parents=True)
        (root / inner / "f.txt").write_text(f"content of {inner}")
    (root / "myenv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / ".env.example").write_text("TOKEN=")
    folder = tmp_path / "s.checkpoints"
    store = Checkpoints(folder, root)
    step = calls(("write", {"path": "a", "text": "b"}), ("write", {"path": ".env", "text": "X"}))
    events = await drain(agent_over(root, store, FakeModel([step, answer("done")])), "write")
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert any("2 files of the workspace not snapshotted (a secret file" in n for n in notices)
    copied = [p.read_bytes() for p in (folder / "objects").rglob("*") if p.is_file()]
    assert b"TOKEN=sk-live-1" not in copied and b"PRIVATE" not in copied
    assert not any(c.startswith(b"content of") for c in copied), copied
    assert b"TOKEN=" in copied  # an example file is no secret
    said = await store.apply(await plan(store))
    assert "restored 1 (a)" in said and "secret files such as .env) are not restored" in said
    assert (root / ".env").read_text() == "X"  # never touched by /undo


def test_only_the_newest_sessions_keep_their_checkpoints(tmp_path: Path) -> None:
    """Each session's store is a copy of the workspace: ten runs made ten copies. Opening
    a session keeps the stores of the ten newest (its own included) and deletes the rest."""
    sessions = tmp_path / "sessions"
    for n in range(12):
        old = sessions / f"2026-{n:02d}.checkpoints"
        old.mkdir(parents=True)
        os.utime(old, (1_000_000 + n, 1_000_000 + n))
    Checkpoints(sessions / "now.checkpoints", workspace_with(tmp_path))
    kept = sorted(p.name for p in sessions.glob("*.checkpoints"))
    assert kept == [f"2026-{n:02d}.checkpoints" for n in range(3, 12)]  # 9 old + this one
