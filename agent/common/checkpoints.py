"""Checkpoints around the agent's turns, and what `/undo` and `/redo` do with them.

The loop calls `begin_turn` when a request starts, `before` ahead of a batch of tool calls
that may change things (not read-only by annotation) and `after` once it ran; the first
`before` of a turn snapshots the workspace (agent.common.snapshots), every `after` records
it again. `/undo` then restores the files that turn changed to what they were before it
(again: the turn before), `/redo` puts them back. Only what differs between a turn's two
snapshots is touched, so the user's own edits to other files stay; a restore that would
overwrite a file changed since the agent's snapshot (outside the agent) is a `Plan` with
`conflicts`, and the front end asks before `apply`. Calls to remote servers (http, sse,
OpenAPI) are remembered per turn: what they changed is on another machine, and `/undo`
says it cannot take that back.

Persisted in the session's folder (`<state>/sessions/<id>.checkpoints/`), so `--resume`
keeps them; at most `KEEP_TURNS` turns are kept, older snapshots and the objects only
they named are pruned.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import anyio

from agent.common.snapshots import (
    DEFAULT_CAPS,
    Caps,
    FileState,
    Manifest,
    SnapshotStore,
    prune_stores,
    write_private,
)

KEEP_TURNS = 20  # turns that can be undone; older snapshots are pruned
SHOWN_NAMES = 5
Direction = Literal["undo", "redo"]


@dataclass
class Turn:
    """One turn that ran calls which may change things: its snapshots and remote calls."""

    number: int  # counted over the session, resumes included
    request: str  # its first line, redacted, shortened: how /undo names it
    before: str  # manifest ids
    after: str | None = None  # None: the turn was cut short before it was recorded
    remote: list[str] = field(default_factory=list)  # "server › tool" of remote servers


@dataclass(frozen=True)
class Plan:
    """What an /undo or /redo would do, before it is done (the front end may ask)."""

    direction: Direction
    turn: Turn
    targets: dict[str, FileState | None]  # path -> what it becomes (None: removed)
    keep_dirs: frozenset[str]
    conflicts: tuple[str, ...]  # changed since the agent's snapshot: overwritten if applied
    remote: tuple[str, ...]  # remote servers' calls in the turns passed over
    uncovered: int  # files the snapshots could not cover
    applied: int  # the pointer after applying


class Checkpoints:
    """The session's checkpoints over one workspace (see the module's docstring)."""

    def __init__(
        self,
        folder: Path,
        root: Path,
        *,
        redact: Callable[[str], str] = lambda text: text,
        is_remote: Callable[[str], bool] = lambda server: False,
        caps: Caps = DEFAULT_CAPS,
        exclude: tuple[Path, ...] = (),
    ) -> None:
        self.store = SnapshotStore(folder, root, caps, exclude)
        prune_stores(folder.parent, folder)
        self.folder = folder
        self.redact = redact
        self.is_remote = is_remote
        self.turns: list[Turn] = []
        self.applied = 0  # turns[:applied] are in effect; the rest were undone (redo)
        self._next = 1
        self._latest: Manifest | None = None  # the newest snapshot: its stats spare reads
        self._request: str | None = None
        self._current: Turn | None = None
        self._said: set[str] = set()
        self._lock = anyio.Lock()
        self._load()

    # -- what the loop calls ------------------------------------------------------------

    def begin_turn(self, request: str) -> None:
        self._request, self._current = request, None

    async def before(self, calls: Sequence[tuple[str, str]]) -> str | None:
        """Ahead of a batch that may change things: the turn's first snapshot; the remote
        calls noted. Returns a notice when the snapshot could not cover everything."""
        notice = None
        if self._current is None:
            manifest = await self._snapshot()
            first = (self._request or "").strip().splitlines()[:1] or [""]
            request = self.redact(first[0])[:80]
            del self.turns[self.applied :]  # what was undone cannot be redone any more
            self._current = Turn(self._next, request, manifest.id)
            self._next += 1
            self.turns.append(self._current)
            del self.turns[:-KEEP_TURNS]
            self.applied = len(self.turns)
            notice = self._coverage_notice(manifest)
        for server, tool in calls:
            name = f"{server} › {tool}"
            if self.is_remote(server) and name not in self._current.remote:
                self._current.remote.append(name)
        await anyio.to_thread.run_sync(self._save_and_prune)
        return notice

    async def after(self) -> None:
        """Once a batch ran: the workspace as the turn left it (what /undo compares with)."""
        turn = self._current
        if turn is None:
            return
        manifest = await self._snapshot()
        old, turn.after = turn.after, manifest.id
        await anyio.to_thread.run_sync(self._save_and_prune, old)

    # -- what /undo and /redo call ------------------------------------------------------

    async def plan(self, direction: Direction) -> Plan | str:
        """The nearest turn that changed files, and what restoring it would do; a string
        says why there is nothing to do."""
        async with self._lock:
            return await anyio.to_thread.run_sync(self._plan, direction)

    async def apply(self, plan: Plan) -> str:
        """Do what `plan` says; the line to show."""
        async with self._lock:
            not_done = await anyio.to_thread.run_sync(
                self.store.restore, plan.targets, set(plan.keep_dirs)
            )
            if len(not_done) < len(plan.targets):  # nothing done: the turn stays to retry
                self.applied = plan.applied
            self._current = None  # a later call of this turn starts a new checkpoint
            await anyio.to_thread.run_sync(self._save_and_prune)
        return self._said_done(plan, not_done)

    def question(self, plan: Plan) -> str:
        """What to ask when a restore would overwrite changes made outside the agent."""
        count = len(plan.conflicts)
        files = "file" if count == 1 else "files"
        since = f"the agent's turn {plan.turn.number}" if plan.direction == "undo" else "/undo"
        return (
            f"{count} {files} changed since {since} "
            f"({_names(plan.conflicts)}); /{plan.direction} overwrites "
            f"{'it' if count == 1 else 'them'}. Go on? [y/N] "
        )

    # -- inside -------------------------------------------------------------------------

    async def _snapshot(self) -> Manifest:
        async with self._lock:
            manifest = await anyio.to_thread.run_sync(self.store.snapshot, self._latest)
            self._latest = manifest
            return manifest

    def _plan(self, direction: Direction) -> Plan | str:
        order = (
            range(self.applied - 1, -1, -1)
            if direction == "undo"
            else range(self.applied, len(self.turns))
        )
        remote: list[str] = []
        for index in order:
            turn = self.turns[index]
            remote += turn.remote
            found = self._changes(turn)
            if isinstance(found, str):
                return found
            before, after, changed = found
            if not changed:
                continue
            source, target = (after, before) if direction == "undo" else (before, after)
            conflicts = tuple(
                p
                for p in changed
                if not _same(self.store.state_now(p, source.files.get(p)), source.files.get(p))
            )
            return Plan(
                direction,
                turn,
                {p: target.files.get(p) for p in changed},
                frozenset(_folders(target.files)),
                conflicts,
                tuple(remote),
                len(set(before.skipped) | set(after.skipped)),
                index if direction == "undo" else index + 1,
            )
        return _nothing(direction, remote, more=bool(self.turns))

    def _changes(self, turn: Turn) -> tuple[Manifest, Manifest, list[str]] | str:
        """A turn's two snapshots and the paths whose content differs between them."""
        before = self.store.load(turn.before)
        if turn.after is None:  # cut short before it was recorded: the files as they are
            self._latest = self.store.snapshot(self._latest)
            turn.after = self._latest.id
        after = self.store.load(turn.after)
        if before is None or after is None:
            return f"the snapshots of turn {turn.number} are missing from {self.folder}"
        paths = set(before.files) | set(after.files)
        changed = sorted(
            p
            for p in paths
            if before.covers(p)
            and after.covers(p)
            and p not in before.skipped
            and p not in after.skipped
            and not _same(before.files.get(p), after.files.get(p))
        )
        return before, after, changed

    def _coverage_notice(self, manifest: Manifest) -> str | None:
        """Once per session and reason: what the snapshot had to leave out."""
        reasons = sorted(set(manifest.skipped.values()) - self._said)
        if not reasons:
            return None
        self._said.update(reasons)
        count = len(manifest.skipped)
        caps = self.store.caps
        return (
            f"undo: {count} file{'s' if count != 1 else ''} of the workspace not snapshotted "
            f"({'; '.join(reasons)}; caps: {caps.max_files:,} files, "
            f"{caps.max_file_bytes // (1024 * 1024)} MiB a file, {caps.seconds:g} s): "
            "changes to them cannot be undone"
        )

    def _said_done(self, plan: Plan, not_done: dict[str, str]) -> str:
        """What was done, counting only the paths that were; then what was not, and why."""
        verb, none = ("undid", "undone") if plan.direction == "undo" else ("redid", "redone")
        turn = f'turn {plan.turn.number} ("{plan.turn.request}")'
        done = {p: s for p, s in plan.targets.items() if p not in not_done}
        removed = [p for p, s in done.items() if s is None]
        written = [p for p, s in done.items() if s is not None]
        parts = []
        if written:
            parts.append(f"restored {len(written)} ({_names(written)})")
        if removed:
            parts.append(f"removed {len(removed)} ({_names(removed)})")
        if done:
            line = f"{verb} {turn}: " + ", ".join(parts)
        else:
            line = f"/{plan.direction}: nothing {none} of {turn}"
        if not_done:
            problems = [f"{p}: {why}" for p, why in sorted(not_done.items())]
            line += f"; not done: {'; '.join(problems[:SHOWN_NAMES])}"
            if len(problems) > SHOWN_NAMES:
                line += f" and {len(problems) - SHOWN_NAMES} more"
        if not done:
            line += f"; /{plan.direction} again once that is fixed"
        if plan.remote:
            line += "; " + _remote_note(plan.remote, plan.direction)
        if plan.uncovered:
            line += (
                f"; {plan.uncovered} file(s) the snapshots do not cover (past the caps, or "
                "secret files such as .env) are not restored"
            )
        return line

    def _load(self) -> None:
        """A resumed session's checkpoints, as far as they are readable."""
        try:
            record = json.loads((self.folder / "checkpoints.json").read_text())
            turns = [Turn(**t) for t in record["turns"]]
            applied, number = int(record["applied"]), int(record["next"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        self.turns = [t for t in turns if (self.store.manifests / f"{t.before}.json").exists()]
        self.applied, self._next = min(applied, len(self.turns)), number
        if latest := record.get("latest"):
            self._latest = self.store.load(latest)

    def _save_and_prune(self, replaced: str | None = None) -> None:
        record = {
            "version": 1,
            "next": self._next,
            "applied": self.applied,
            "latest": self._latest.id if self._latest is not None else None,
            "turns": [asdict(t) for t in self.turns],
        }
        self.folder.mkdir(mode=0o700, exist_ok=True)
        write_private(self.folder / "checkpoints.json", json.dumps(record).encode(), 0o600)
        keep = {m for t in self.turns for m in (t.before, t.after) if m is not None}
        if self._latest is not None:
            keep.add(self._latest.id)
        if replaced is not None and replaced not in keep:
            (self.store.manifests / f"{replaced}.json").unlink(missing_ok=True)
        saved = {p.stem for p in self.store.manifests.glob("*.json")}
        if saved - keep:  # turns dropped: their snapshots and the objects only they named
            self.store.prune(keep)


def _same(a: FileState | None, b: FileState | None) -> bool:
    return a is None and b is None or (a is not None and a.same_content(b))


def _folders(files: dict[str, FileState]) -> set[str]:
    """Every folder that holds a file of `files` (a deletion leaves these in place)."""
    folders: set[str] = set()
    for path in files:
        parent = path.rpartition("/")[0]
        while parent and parent not in folders:
            folders.add(parent)
            parent = parent.rpartition("/")[0]
    return folders


def _names(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:SHOWN_NAMES])
    return shown + (f" and {len(paths) - SHOWN_NAMES} more" if len(paths) > SHOWN_NAMES else "")


def _remote_note(remote: Sequence[str], direction: Direction) -> str:
    servers = ", ".join(dict.fromkeys(remote))
    done = "undone" if direction == "undo" else "redone"
    return (
        f"what remote servers did ({servers}) cannot be {done}: only files in the "
        "workspace are restored"
    )


def _nothing(direction: Direction, remote: list[str], more: bool) -> str:
    if direction == "redo":
        line = "nothing to redo: no undone turn changed files"
    elif more:
        line = "nothing more to undo: no earlier turn of this session changed files"
    else:
        line = "nothing to undo: no turn of this session changed files in the workspace"
    return f"{line}; {_remote_note(remote, direction)}" if remote else line
