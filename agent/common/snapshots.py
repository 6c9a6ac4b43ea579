"""Snapshots of the workspace's files in a private, content-addressed store.

What `/undo` restores from (agent.common.checkpoints decides when). A snapshot lists the
workspace's files (in a git work tree: tracked and untracked-not-ignored, read with `git
ls-files`, which writes nothing; elsewhere: a walk that skips `.git`) and copies each into
`objects/<sha256>` of the store, a folder of the session's own (0700, files 0600). The
user's `.git` is never written: Codex removed its undo after writing into users' own
repositories lost data.

Bounded (size and time): files over `max_file_bytes`, past `max_files`, or left when the
deadline passes are not covered, and the snapshot says so (`skipped`, `complete`). A file
whose size, mtime, ctime and inode match the previous snapshot is not read again (ctime
far enough before that snapshot began, git's "racy" rule), so a second snapshot of a
large workspace costs a walk and a stat per file. Blocking: callers run it in a thread.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
RACY_NS = 50_000_000  # a file changed this close to the last snapshot is read again
COARSE_RACY_NS = 2_000_000_000  # on filesystems with whole-second times (FAT, some NFS)
GIT_TIMEOUT = 10.0


@dataclass(frozen=True)
class Caps:
    """What one snapshot may cost (documented in docs/usage.md, "Undo")."""

    max_files: int = 50_000
    max_file_bytes: int = 10 * 1024 * 1024
    max_new_bytes: int = 512 * 1024 * 1024  # copied into the store by one snapshot
    seconds: float = 15.0


DEFAULT_CAPS = Caps()

# Rebuilt, not written by hand: environments and caches (a 26 MB `.venv` was copied into
# the state folder once a session). A folder holding `pyvenv.cfg` is a virtualenv whatever
# its name. Left out of every snapshot, silently; `/undo` says it cannot restore them.
ENVIRONMENT_FOLDERS = frozenset(
    {
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".cache",
        "site-packages",
    }
)
# What the sandbox hides in a home folder, as they sit in a workspace: keys and tokens are
# never copied into the state folder (a snapshot is a copy that outlives the file).
SECRET_NAMES = frozenset(
    {
        ".netrc",
        ".npmrc",
        ".pypirc",
        ".git-credentials",
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
    }
)
SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx")
_ENV_EXAMPLES = (".example", ".sample", ".template", ".dist")
SECRET_REASON = "a secret file (keys, tokens: never copied into the state folder)"
KEEP_STORES = 10  # the newest sessions' checkpoint stores kept in the sessions folder


def secret_file(name: str) -> bool:
    """Whether a file of this name holds secrets (`.env`, `.env.local`, keys), by name."""
    if name in SECRET_NAMES or name.endswith(SECRET_SUFFIXES):
        return True
    return (name == ".env" or name.startswith(".env.")) and not name.endswith(_ENV_EXAMPLES)


def environment_folder(path: Path, name: str) -> bool:
    return name in ENVIRONMENT_FOLDERS or (path / "pyvenv.cfg").is_file()


def prune_stores(sessions: Path, current: Path, keep: int = KEEP_STORES) -> None:
    """Delete the checkpoint stores of all but the `keep` newest sessions (by when they
    last changed): each session's store is a copy of the workspace's files, and ten runs
    made ten copies. The current session's is never deleted."""
    try:
        stores = [p for p in sessions.glob("*.checkpoints") if p.is_dir() and p != current]
        stores.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in stores[max(0, keep - 1) :]:
        shutil.rmtree(old, ignore_errors=True)


@dataclass(frozen=True)
class FileState:
    """One file as a snapshot saw it: its content's hash and permission bits decide
    equality; the stat fields only spare re-reading it next time."""

    sha: str
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int

    def same_content(self, other: FileState | None) -> bool:
        return other is not None and self.sha == other.sha and self.mode == other.mode

    def same_stat(self, st: os.stat_result) -> bool:
        return (self.size, self.mtime_ns, self.ctime_ns, self.ino) == (
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            st.st_ino,
        )


@dataclass
class Manifest:
    """One snapshot: the files it covers, those it had to leave out and why."""

    id: str
    taken_ns: int
    files: dict[str, FileState] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # path -> why it is not covered
    complete: bool = True  # False: a cap or the deadline cut the listing short
    lister: str = "walk"  # "git" (ls-files) or "walk"

    def covers(self, path: str) -> bool:
        """Whether this snapshot knows the state of `path` (present, or surely absent)."""
        return path in self.files or (self.complete and path not in self.skipped)


class SnapshotStore:
    """The objects and manifests of one session's checkpoints, over one workspace root."""

    def __init__(
        self, folder: Path, root: Path, caps: Caps | None = None, exclude: tuple[Path, ...] = ()
    ) -> None:
        self.folder = folder
        self.root = Path(os.path.realpath(root))
        self.caps = caps or DEFAULT_CAPS
        self.objects = folder / "objects"
        self.manifests = folder / "manifests"
        self._fanout: set[str] = set()  # object folders known to exist
        self._root, self._objects = str(self.root), str(self.objects)  # for the hot paths
        # The agent's own folders (the state folder, the sessions folder holding this
        # store) when they sit inside the workspace: relative prefixes never copied.
        self._excluded = tuple(
            prefix for p in (folder.parent, *exclude) if (prefix := self._prefix_of(p)) is not None
        )

    def _prefix_of(self, path: Path) -> str | None:
        real = os.path.realpath(path)
        if real.startswith(str(self.root) + os.sep):
            return os.path.relpath(real, self.root).replace(os.sep, "/") + "/"
        return None

    def _excluded_path(self, rel: str) -> bool:
        return any((rel + "/").startswith(prefix) for prefix in self._excluded)

    # -- taking a snapshot --------------------------------------------------------------

    def snapshot(self, previous: Manifest | None) -> Manifest:
        """The workspace now; unchanged files (by stat) are taken from `previous`."""
        _private_dirs(self.objects, self.manifests)
        started = time.time_ns()
        deadline = time.monotonic() + self.caps.seconds
        manifest = Manifest(_new_id(), started)
        paths, manifest.lister = self._list(deadline)
        if len(paths) > self.caps.max_files:
            for path in paths[self.caps.max_files :]:
                manifest.skipped[path] = "over the file cap"
            paths, manifest.complete = paths[: self.caps.max_files], False
        budget = self.caps.max_new_bytes
        dirs_ok: dict[str, bool] = {}
        cached = previous.files if previous is not None else {}
        racy_before = previous.taken_ns if previous is not None else 0
        for path in paths:
            st = self._lstat(path, dirs_ok)
            if st is None or not stat.S_ISREG(st.st_mode):
                continue
            if secret_file(path.rpartition("/")[2]):
                manifest.skipped[path] = SECRET_REASON
                continue
            old = cached.get(path)
            if old is not None and old.same_stat(st) and not _racy(st, racy_before):
                manifest.files[path] = old
                continue
            if st.st_size > self.caps.max_file_bytes:
                manifest.skipped[path] = "larger than the size cap"
            elif st.st_size > budget:
                manifest.skipped[path] = "over the bytes one snapshot may copy"
            elif time.monotonic() > deadline:
                manifest.skipped[path] = "the snapshot ran out of time"
                manifest.complete = False
            elif (state := self._store(path, st)) is not None:
                manifest.files[path] = state
                budget -= st.st_size
        if previous is not None and _same_manifest(manifest, previous):
            # Nothing changed: no new manifest to write or keep. Every stat it holds was
            # seen again now, so the racy rule may count from this snapshot's start.
            previous.taken_ns = started
            return previous
        self._save(manifest)
        return manifest

    def _list(self, deadline: float) -> tuple[list[str], str]:
        """Relative paths (posix), sorted: git's view where the root is in a work tree."""
        listed = _git_files(self.root, max(1.0, min(GIT_TIMEOUT, deadline - time.monotonic())))
        if listed is not None:
            envs: dict[str, bool] = {}
            return [p for p in listed if not self._left_out(p, envs)], "git"
        return self._walk(deadline), "walk"

    def _walk(self, deadline: float) -> list[str]:
        found: list[str] = []
        limit = self.caps.max_files + 1  # one more: enough to know the cap was passed
        for top, dirs, files in os.walk(self.root, followlinks=False):
            rel = os.path.relpath(top, self.root)
            prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            dirs[:] = sorted(
                d
                for d in dirs
                if d != ".git"
                and not self._excluded_path(prefix + d)
                and not environment_folder(Path(top, d), d)
            )
            found += (p for name in sorted(files) if not self._excluded_path(p := prefix + name))
            if len(found) >= limit or time.monotonic() > deadline:
                break
        return sorted(found)

    def _left_out(self, path: str, envs: dict[str, bool]) -> bool:
        """A path git lists that no snapshot copies: the agent's own, or in an environment
        or cache folder (`envs` remembers each folder's answer)."""
        if self._excluded_path(path):
            return True
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/".join(parts[:depth])
            if folder not in envs:
                envs[folder] = environment_folder(self.root / folder, parts[depth - 1])
            if envs[folder]:
                return True
        return False

    def _lstat(self, path: str, dirs_ok: dict[str, bool]) -> os.stat_result | None:
        """The file's own stat, if its folder really is inside the root (a folder replaced
        by a symlink to elsewhere is not followed)."""
        parent = path.rpartition("/")[0]
        if parent not in dirs_ok:
            real = os.path.realpath(os.path.join(self._root, parent))
            dirs_ok[parent] = real == self._root or real.startswith(self._root + os.sep)
        if not dirs_ok[parent]:
            return None
        try:
            return os.lstat(os.path.join(self._root, path))
        except OSError:
            return None

    def _store(self, path: str, st: os.stat_result) -> FileState | None:
        """Read the file once (not through a symlink), hash it, copy it in if new."""
        try:
            fd = os.open(os.path.join(self._root, path), READ_FLAGS)
        except OSError:
            return None
        try:
            after = os.fstat(fd)
            if not stat.S_ISREG(after.st_mode) or after.st_size > self.caps.max_file_bytes:
                return None
            data = _read_all(fd, self.caps.max_file_bytes + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > self.caps.max_file_bytes:
            return None
        sha = hashlib.sha256(data).hexdigest()
        self.put(sha, data)
        return FileState(
            sha,
            stat.S_IMODE(after.st_mode),
            len(data),
            after.st_mtime_ns,
            after.st_ctime_ns,
            after.st_ino,
        )

    # -- objects and manifests ----------------------------------------------------------

    def blob_path(self, sha: str) -> Path:
        return self.objects / sha[:2] / sha[2:]

    def put(self, sha: str, data: bytes) -> None:
        """An object, written once (0600, by a temporary name, then renamed: a crash
        never leaves a short object under a content's name)."""
        folder = os.path.join(self._objects, sha[:2])
        target = os.path.join(folder, sha[2:])
        if os.path.exists(target):
            return
        if sha[:2] not in self._fanout:
            _private_dirs(Path(folder))
            self._fanout.add(sha[:2])
        temp = f"{target}.{secrets.token_hex(4)}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def read(self, sha: str) -> bytes:
        return self.blob_path(sha).read_bytes()

    def _save(self, manifest: Manifest) -> None:
        record = {
            "id": manifest.id,
            "taken_ns": manifest.taken_ns,
            "complete": manifest.complete,
            "lister": manifest.lister,
            "skipped": manifest.skipped,
            "files": {
                p: [s.sha, s.mode, s.size, s.mtime_ns, s.ctime_ns, s.ino]
                for p, s in manifest.files.items()
            },
        }
        write_private(self.manifests / f"{manifest.id}.json", json.dumps(record).encode(), 0o600)

    def load(self, manifest_id: str) -> Manifest | None:
        """A saved manifest; None when it is missing or unreadable (pruned, corrupted)."""
        try:
            record = json.loads((self.manifests / f"{manifest_id}.json").read_text())
            files = {p: FileState(*v) for p, v in record["files"].items()}
            return Manifest(
                record["id"],
                record["taken_ns"],
                files,
                dict(record["skipped"]),
                bool(record["complete"]),
                record.get("lister", "walk"),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def prune(self, keep: set[str]) -> None:
        """Drop manifests not in `keep`, then objects no kept manifest names."""
        if not self.manifests.is_dir():
            return
        wanted: set[str] = set()
        for path in self.manifests.glob("*.json"):
            manifest = self.load(path.stem) if path.stem in keep else None
            if manifest is None:
                path.unlink(missing_ok=True)
            else:
                wanted.update(s.sha for s in manifest.files.values())
        for blob in self.objects.glob("*/*"):
            if blob.parent.name + blob.name not in wanted:
                blob.unlink(missing_ok=True)

    # -- the workspace now, and restoring -----------------------------------------------

    def state_now(self, path: str, recorded: FileState | None) -> FileState | None:
        """`path` as it is now (None: absent or not a regular file); read only when its
        stat differs from `recorded`."""
        st = self._lstat(path, {})
        if st is None or not stat.S_ISREG(st.st_mode):
            return None
        if recorded is not None and recorded.same_stat(st) and not _racy(st, time.time_ns()):
            return recorded
        if st.st_size > self.caps.max_file_bytes:  # too large to have been recorded
            return FileState(f"large:{st.st_size}", 0, st.st_size, 0, 0, 0)
        try:
            fd = os.open(self.root / path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
            after = os.fstat(fh.fileno())
        sha = hashlib.sha256(data).hexdigest()
        mode = stat.S_IMODE(after.st_mode)
        return FileState(sha, mode, len(data), after.st_mtime_ns, after.st_ctime_ns, after.st_ino)

    def restore(self, targets: dict[str, FileState | None], keep_dirs: set[str]) -> dict[str, str]:
        """Make each path what `targets` says (None: absent). Deletions first, then the
        files. Every folder is opened one level at a time from the root without following
        a symlink (openat with O_NOFOLLOW), so a folder swapped for a link to elsewhere is
        refused, not written through; a file is written by a temporary name, then renamed.
        Folders left empty by a deletion go unless `keep_dirs` (folders that held files in
        the target) names them. Returns what was not done: path -> why.

        A file to delete that holds what a write is to restore (a moved file, taken back)
        is first set aside under a hidden name in its folder, and deleted only once that
        content is written; when no write of it succeeded it goes back to its name: the
        copy on disk is never deleted while the restore of its content failed."""
        not_done: dict[str, str] = {}
        wanted = {state.sha for state in targets.values() if state is not None}
        aside: dict[str, tuple[str, str]] = {}  # path -> (its hidden name, its content)
        for path, state in sorted(targets.items()):
            if state is not None:
                continue
            now = self.state_now(path, None)
            if now is not None and now.sha in wanted:
                why, hidden = self._set_aside(path)
                if hidden:
                    aside[path] = (hidden, now.sha)
            else:
                why = self._delete(path, keep_dirs)
            if why:
                not_done[path] = why
        restored: set[str] = set()  # the contents written somewhere
        for path, state in sorted(targets.items()):
            if state is not None:
                if why := self._write(path, state):
                    not_done[path] = why
                else:
                    restored.add(state.sha)
        for path, (hidden, sha) in aside.items():
            if sha in restored:
                why = self._delete(_beside(path, hidden), keep_dirs)
            else:
                of = [p for p, s in sorted(targets.items()) if s is not None and s.sha == sha]
                why = self._put_back(path, hidden, of)
            if why:
                not_done[path] = why
        return not_done

    def _set_aside(self, path: str) -> tuple[str, str]:
        """Rename `path` to a hidden name in its folder: (what went wrong, that name)."""
        parent, _, name = path.rpartition("/")
        fd = self._open_folder(parent, create=False)
        if fd is None:
            return "its folder is not a real folder inside the workspace; not removed", ""
        hidden = f".{name[:100]}.{secrets.token_hex(4)}.undo"
        try:
            os.rename(name, hidden, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError as exc:
            return f"{exc.strerror}; not removed", ""
        finally:
            os.close(fd)
        return "", hidden

    def _put_back(self, path: str, hidden: str, of: list[str]) -> str:
        """A file set aside whose content was restored nowhere goes back to its name."""
        copy = f"the only copy on disk of {', '.join(of)}, which was not restored"
        parent, _, name = path.rpartition("/")
        fd = self._open_folder(parent, create=False)
        try:
            if fd is None:
                raise OSError(errno.ENOTDIR, "its folder changed")
            os.rename(hidden, name, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError as exc:
            return f"kept as {_beside(path, hidden)} ({exc.strerror}): {copy}"
        finally:
            if fd is not None:
                os.close(fd)
        return f"kept: {copy}"

    def _delete(self, path: str, keep_dirs: set[str]) -> str:
        parent, _, name = path.rpartition("/")
        fd = self._open_folder(parent, create=False)
        if fd is None:  # gone already (nothing to do), or a link now (refused)
            if parent and os.path.lexists(self.root / parent):
                return "its folder is not a real folder inside the workspace; not removed"
            return ""
        try:
            if stat.S_ISDIR(os.lstat(name, dir_fd=fd).st_mode):
                return "is a folder now; left as it is"
            os.unlink(name, dir_fd=fd)  # a symlink itself, never what it points to
        except FileNotFoundError:
            return ""
        except OSError as exc:
            return str(exc.strerror)
        finally:
            os.close(fd)
        while parent and parent not in keep_dirs:
            above, _, folder = parent.rpartition("/")
            up = self._open_folder(above, create=False)
            if up is None:
                break
            try:
                os.rmdir(folder, dir_fd=up)  # only when empty
            except OSError:
                break
            finally:
                os.close(up)
            parent = above
        return ""

    def _write(self, path: str, state: FileState) -> str:
        parent, _, name = path.rpartition("/")
        fd = self._open_folder(parent, create=True)
        if fd is None:
            return "its folder is not a real folder inside the workspace; not restored"
        try:
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(name, dir_fd=fd).st_mode):
                    os.rmdir(name, dir_fd=fd)  # an empty folder where the file was
            _write_at(fd, name, self.read(state.sha), state.mode)
        except OSError as exc:
            return str(exc.strerror or exc)
        finally:
            os.close(fd)
        return ""

    def _open_folder(self, rel: str, *, create: bool) -> int | None:
        """A descriptor of the folder `rel` under the root, opened level by level without
        following symlinks; missing levels are made when `create`. None: not possible."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        for part in rel.split("/") if rel else ():
            if part in ("", ".", ".."):
                os.close(fd)
                return None
            try:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = child
        return fd


def _beside(path: str, name: str) -> str:
    """`name` in the folder of `path` (relative, posix)."""
    parent = path.rpartition("/")[0]
    return f"{parent}/{name}" if parent else name


def _git_files(root: Path, timeout: float) -> list[str] | None:
    """`git ls-files` (tracked, and untracked not ignored) under `root`; None when git
    is missing or `root` is in no work tree. Nothing is written to the repository:
    optional locks are off, and so are the repository's fsmonitor hook and untracked cache
    (an fsmonitor configured in a repository's own config is a command git would run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    command = [
        "git",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "core.untrackedCache=false",
        "-C",
        str(root),
        "ls-files",
        "-z",
        "--cached",
        "--others",
        "--exclude-standard",
    ]
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    names = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return sorted({n for n in names if n and not n.endswith("/")})


def _read_all(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(limit - size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _same_manifest(a: Manifest, b: Manifest) -> bool:
    return (a.files, a.skipped, a.complete) == (b.files, b.skipped, b.complete)


def _racy(st: os.stat_result, since_ns: int) -> bool:
    """Changed too close to `since_ns` for its stat to prove it unchanged since."""
    window = COARSE_RACY_NS if st.st_mtime_ns % 1_000_000_000 == 0 else RACY_NS
    return st.st_ctime_ns >= since_ns - window


def _new_id() -> str:
    return f"{time.time_ns():020d}-{secrets.token_hex(3)}"


def _private_dirs(*folders: Path) -> None:
    for folder in folders:
        if not folder.is_dir():
            missing = [folder, *(p for p in folder.parents if not p.exists())]
            for each in reversed(missing):
                each.mkdir(mode=0o700, exist_ok=True)


def write_private(target: Path, data: bytes, mode: int = 0o600) -> None:
    """`data` at `target` (in the store) by a temporary name, then renamed."""
    fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _write_at(fd, target.name, data, mode)
    finally:
        os.close(fd)


def _write_at(folder: int, name: str, data: bytes, mode: int) -> None:
    """`data` as `name` in the open `folder`, by a temporary name then renamed: a reader
    never sees half a file, and a symlink named `name` is replaced, not followed."""
    temp = f".{name[:100]}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(temp, flags, 0o600, dir_fd=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        os.replace(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=folder)
        raise
