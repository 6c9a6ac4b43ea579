"""Running a command under bubblewrap: the policy, its `bwrap` command line, whether bwrap
works here, and what a sandboxed command's failure says about what the sandbox denied.

Shared by the bundled server (its shell wraps each command) and the agent (it wraps the
command line of a stdio server from config), so it sits in common: the bundled server may
import nothing else. The policy is data (JSON on the bundled server's command line), and
the bwrap line is built from it in one place, so both get the same mounts in the same
order: the root read-only, then what may be written, then what stays read-only inside
that (`.git`, the agent's own config), then the secrets hidden, last so nothing re-exposes
them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

from agent.common import seccomp

Mode = Literal["read-only", "workspace-write", "off"]
MODES: tuple[str, ...] = ("workspace-write", "read-only", "off")
PROBE_TIMEOUT = 10.0  # seconds for `bwrap ... true` to say whether namespaces work
# Secrets a sandboxed command never sees, relative to the home folder: keys, cloud and
# registry credentials, tokens of tools that log in. A folder becomes empty, a file empty.
HIDDEN_IN_HOME: tuple[str, ...] = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".config/gh",
    ".config/hub",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".config/mcp-agent",
    ".local/state/mcp-agent",
    ".password-store",
    ".vault-token",
)
# In the workspace, read-only even where the workspace is writable: git's own store (a hook
# written there runs at the user's next commit) and the files that start servers, hooks and
# skills at the agent's next start.
PROTECTED_IN_WORKSPACE: tuple[str, ...] = (
    ".git",
    "config",
    ".mcp.json",
    ".cursor",
    ".vscode",
    ".claude",
    ".gemini",
    ".codex",
    ".agents",
    ".mcp-agent",
    ".zed",
)
# Left out of the search for nested repositories: folders of packages and caches, where a
# `.git` is a dependency's, not the user's, and which can hold many thousands of entries.
_NOT_SEARCHED = frozenset(
    {"node_modules", ".venv", "venv", "__pycache__", ".cache", ".tox", ".nox", "site-packages"}
)
GIT_SEARCH_LIMIT = 20_000  # folders looked at for nested repositories, at most
GIT_SEARCH_DEPTH = 8
_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
# What a failure says when the sandbox stopped it (in C's, Python's and Node's words).
_READ_ONLY = re.compile(r"Read-only file system|\bEROFS\b")
_NETWORK = re.compile(
    r"Network is unreachable|ENETUNREACH|Temporary failure in name resolution|EAI_AGAIN"
    r"|Could not resolve host|Name or service not known|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)"
    r"|No address associated with hostname|Could not resolve proxy|Resolving timed out"
    r"|Address family not supported by protocol|EAFNOSUPPORT"  # a unix socket (seccomp.py)
)
# A refused local port: the sandbox's loopback is its own, so a dev server of the user's on
# localhost is not there (curl says only "Couldn't connect").
_LOOPBACK = re.compile(
    r"Couldn't connect to server|Connection refused|ECONNREFUSED|Failed to connect to localhost"
)
# Creating a protected name that did not exist: its placeholder is an empty file there.
_PLACEHOLDER = re.compile(
    r"File exists|Not a directory|Permission denied|\bE(?:EXIST|NOTDIR|ACCES)\b"
)
# A quoted path, the word before ": Read-only" (bash's `bash: x: Read-only file system`),
# or a bare path starting with / or ~/.
_PATH = re.compile(
    r"""['"‘`]([^'"’`\n]+)['"’`]"""
    r"""|([^\s:'"‘’`]+): (?:Read-only|Permission denied|Not a directory|File exists)"""
    r"""|(?<![\w.~/])(~?/[^\s:'"’`,)]*)"""
)


@dataclass(frozen=True)
class Policy:
    """What a sandboxed command may do. Paths are absolute; `write` adds to the workspace
    (workspace-write) or stands alone (read-only); `read_only` applies inside what may be
    written; `hidden` are replaced by an empty folder or file."""

    mode: Mode = "workspace-write"
    network: bool = False
    workspace: str = "/"
    write: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    bwrap: str = "bwrap"

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Policy:
        """The policy the agent passed on the command line; a ValueError says what is wrong."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("mode") not in MODES:
            raise ValueError(f"--sandbox: mode must be one of {', '.join(MODES)}")
        lists = {
            k: tuple(str(p) for p in data.get(k, ())) for k in ("write", "read_only", "hidden")
        }
        return cls(
            mode=data["mode"],
            network=bool(data.get("network", False)),
            workspace=str(data.get("workspace", "/")),
            bwrap=str(data.get("bwrap", "bwrap")),
            **lists,
        )

    def writable(self) -> tuple[str, ...]:
        """Every folder or file a command may change (temp included)."""
        if self.mode == "off":
            return ("/",)
        base = (self.workspace, *_temp_dirs()) if self.mode == "workspace-write" else ()
        return _unique((*base, *self.write))

    def widened(self, write: Iterable[str] = (), network: bool = False) -> Policy:
        """This policy with `write` writable too (a protected folder they fall in is no
        longer protected) and, if asked, the network on: a one-off retry's policy."""
        extra = tuple(write)
        kept = tuple(r for r in self.read_only if not any(_inside(w, r) for w in extra))
        return replace(
            self,
            write=_unique((*self.write, *extra)),
            read_only=kept,
            network=self.network or network,
        )

    def summary(self) -> str:
        """One line for people and the model: what may be written, and the network."""
        if self.mode == "off":
            return "off (no sandbox)"
        where = "the workspace and temp folders" if self.mode == "workspace-write" else "nothing"
        if self.write:
            where += " and " + ", ".join(self.write)
        net = "network on" if self.network else "no network"
        return f"{self.mode}: writes {where}; {net}"


def bwrap_argv(policy: Policy, argv: list[str], cwd: str | None = None) -> list[str]:
    """`argv` run under `policy` (unchanged when the mode is off). Without network, bwrap
    is started through `seccomp.trampoline` so that no unix socket outside is reachable."""
    if policy.mode == "off":
        return list(argv)
    line = [policy.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc"]
    line += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if policy.mode == "read-only":
        line += ["--tmpfs", "/tmp"]  # private and thrown away: tools that need scratch space
    # Through their real paths: bwrap cannot mount onto a symlink, and a link (`config ->
    # elsewhere`) is protected by protecting what it leads to.
    writable = _real(policy.writable())
    for path in writable:
        line += ["--bind", path, path]
    for path in _real(policy.read_only):
        line += ["--ro-bind", path, path]
    # A protected name that does not exist yet must not be created either (a `.mcp.json`
    # written from inside would start its server at the next start, outside the sandbox):
    # an empty read-only file takes its place. bwrap leaves that empty file behind as the
    # mount point; `remove_placeholders` takes it away when the sandboxes end.
    for path in placeholders(policy):
        line += ["--ro-bind", "/dev/null", path]
    for path in _real(policy.hidden):
        line += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
    if not policy.network:
        line.append("--unshare-net")
        if seccomp.supported():
            line += ["--seccomp", str(seccomp.FD)]
    if cwd is not None:
        line += ["--chdir", cwd]
    line += ["--", *argv]
    if not policy.network and seccomp.supported():
        return seccomp.trampoline(seccomp.no_unix_sockets(), line)
    return line


def placeholders(policy: Policy) -> tuple[str, ...]:
    """Where a protected path is missing inside a writable folder: its first missing
    component (as a real path), which the sandbox covers with an empty read-only file."""
    if policy.mode != "workspace-write":
        return ()
    writable = _real(policy.writable())
    found: list[str] = []
    for path in policy.read_only:
        missing = _first_missing(os.path.realpath(path))  # a dangling link: where it leads
        if missing is not None and any(_inside(missing, w) for w in writable):
            found.append(missing)
    return _unique(found)


def remove_placeholders(paths: Iterable[str]) -> None:
    """Take away the empty files bwrap left as mount points (`placeholders`), once no
    sandbox uses them: only an empty regular file is removed, never a link or content."""
    for path in paths:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _first_missing(path: str) -> str | None:
    """The first component of `path` that does not exist, under its parent's real path
    (None: it all exists, or a parent is not a folder)."""
    current = Path(path)
    if os.path.lexists(current):
        return None
    while not os.path.lexists(current.parent) and current.parent != current:
        current = current.parent
    parent = os.path.realpath(current.parent)
    if not os.path.isdir(parent):
        return None
    return os.path.join(parent, current.name)


@functools.cache
def unavailable(path_var: str | None = None) -> str | None:
    """Why bubblewrap cannot sandbox here (None: it can). `path_var` is the PATH to look
    in (the process's own by default); the answer is kept per PATH, the probe runs once."""
    found = shutil.which("bwrap", path=path_var)
    if found is None:
        return "bubblewrap (bwrap) is not on PATH: install the bubblewrap package"
    probe = [found, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc"]
    probe += ["--unshare-net"]
    if seccomp.supported():  # the filter a sandbox without network gets loads here too
        probe = seccomp.trampoline(seccomp.no_unix_sockets(), [*probe, "--seccomp", "9"])
    probe += ["--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap did not run ({exc})"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return (
            f"bwrap cannot create namespaces here ({said[-1] if said else 'no message'}): "
            "user namespaces may be off (sysctl kernel.unprivileged_userns_clone)"
        )
    return None


def bwrap_path(path_var: str | None = None) -> str:
    """Where bwrap is (call after `unavailable` said it works)."""
    return shutil.which("bwrap", path=path_var) or "bwrap"


def hidden_paths(home: Path, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The secrets to hide: HIDDEN_IN_HOME under `home`, and `extra` (the state folder)."""
    return _unique((*(str(home / p) for p in HIDDEN_IN_HOME), *extra))


def protected_paths(
    workspace: Path, extra: Iterable[str] = (), home: Path | None = None
) -> tuple[str, ...]:
    """What stays read-only inside a writable workspace: PROTECTED_IN_WORKSPACE, every
    nested repository's `.git` and every folder a `core.hooksPath` names (a hook planted
    there runs at the user's next commit), and `extra` (config files)."""
    own = (str(workspace / p) for p in PROTECTED_IN_WORKSPACE)
    return _unique((*own, *git_stores(workspace, home), *extra))


def git_stores(workspace: Path, home: Path | None = None) -> tuple[str, ...]:
    """The `.git` of every repository under `workspace` (a bounded walk that skips package
    and cache folders), and the hook folders their configs and the user's name."""
    repos: list[Path] = []
    seen = 0
    stack: list[tuple[Path, int]] = [(workspace, 0)]
    while stack and seen < GIT_SEARCH_LIMIT:
        folder, depth = stack.pop()
        seen += 1
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name == ".git":
                repos.append(folder)
            elif depth < GIT_SEARCH_DEPTH and entry.name not in _NOT_SEARCHED:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((Path(entry.path), depth + 1))
    stores = [str(repo / ".git") for repo in repos if repo != workspace]
    configs = [(repo / ".git" / "config", repo) for repo in (workspace, *repos)]
    if home is not None:
        user = [home / ".gitconfig", home / ".config" / "git" / "config"]
        configs += [(path, repo) for path in user for repo in (workspace, *repos)]
    hooks = (_hooks_path(config, repo) for config, repo in configs)
    return _unique((*stores, *(str(h) for h in hooks if h is not None)))


_HOOKS_PATH = re.compile(r"^\s*hookspath\s*=\s*(.+?)\s*$", re.IGNORECASE)


def _hooks_path(config: Path, repo: Path) -> Path | None:
    """The folder `core.hooksPath` in a git config names, relative to the repository's
    working tree as git takes it (None: not set, or the file cannot be read). A plain
    reading of `[core]`: `include` files are not followed."""
    try:
        lines = config.read_text(errors="replace").splitlines()[:5000]
    except OSError:
        return None
    section = ""
    found: str | None = None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped.strip("[]").split()[0].lower() if stripped.strip("[]") else ""
        elif section == "core" and (match := _HOOKS_PATH.match(stripped)):
            found = match.group(1).strip('"')
    if not found:
        return None
    return repo / Path(found).expanduser()


@dataclass(frozen=True)
class Denial:
    """What a sandboxed command's failure shows the sandbox denied."""

    write: tuple[str, ...] = ()  # the paths it could not write (as absolute paths)
    network: bool = False
    hidden: tuple[str, ...] = field(default=())  # secrets it looked for and did not find
    loopback: bool = False  # a local port refused: the user's localhost is not the sandbox's

    def needs(self) -> tuple[str, ...]:
        """Where write access would have to be granted: each path, or for one that does not
        exist, the nearest folder that does (a new file needs its folder writable)."""
        return _unique(_existing(p) for p in self.write)

    def words(self) -> str:
        """What was denied, for people and the model."""
        parts = []
        if self.write:
            parts.append(f"writing {', '.join(self.write)}")
        if self.network and self.loopback:
            parts.append(
                "the network (its loopback is its own: a server listening on this machine's "
                "localhost is not reachable from inside)"
            )
        elif self.network:
            parts.append("the network")
        if self.hidden:
            parts.append(f"reading {', '.join(self.hidden)} (hidden: it holds secrets)")
        return " and ".join(parts)


def find_denial(output: str, exit_code: int | None, policy: Policy, cwd: str) -> Denial | None:
    """The denial a failed command's output shows, or None when the sandbox is not why it
    failed (a success, or a failure that names nothing the sandbox holds back)."""
    if policy.mode == "off" or exit_code in (0, None):
        return None
    writes: list[str] = []
    for line in output.splitlines():
        if _READ_ONLY.search(line):
            writes += [p for p in _paths(line, cwd) if not _allowed(p, policy)]
        elif _PLACEHOLDER.search(line):
            writes += [p for p in _paths(line, cwd) if _protected(p, policy)]
    ro_failed = any(_READ_ONLY.search(line) for line in output.splitlines())
    if ro_failed and not writes:  # it said read-only and named no path we can tell
        writes = ["/"]
    loopback = not policy.network and bool(_LOOPBACK.search(output))
    network = not policy.network and (bool(_NETWORK.search(output)) or loopback)
    hidden = tuple(h for h in policy.hidden if os.path.exists(h) and _mentions(output, h))
    if not (writes or network or hidden):
        return None
    return Denial(write=_unique(writes), network=network, hidden=hidden, loopback=loopback)


def explain(denial: Denial, policy: Policy, *, asked: str) -> str:
    """The note the model gets under a command the sandbox stopped. `asked` says what came
    of offering the user a one-off retry with the access it needed."""
    return (
        f"[sandbox: this command ran sandboxed ({policy.summary()}; .git and the agent's "
        f"config read-only; secrets hidden) and the sandbox denied {denial.words()}. "
        f"{asked} Do not try to get around the sandbox: if the task needs this access, say "
        "so to the user, who can allow it once when asked or widen the sandbox ([sandbox] "
        "in config.toml: mode, network).]"
    )


def _paths(line: str, cwd: str) -> list[str]:
    """Absolute paths named in one line of an error message: the quoted ones if any, else
    the word before ": Read-only", else bare paths (`bash: line 1: /x: Read-only ...` names
    the shell first)."""
    kinds: tuple[list[str], list[str], list[str]] = ([], [], [])
    for match in _PATH.findall(line):
        for kind, text in zip(kinds, match, strict=True):
            if text.strip():
                kind.append(text.strip())
    chosen = next((kind for kind in kinds if kind), [])
    return [os.path.normpath(os.path.join(cwd, os.path.expanduser(t))) for t in chosen]


def _allowed(path: str, policy: Policy) -> bool:
    """Whether `path` was writable under `policy` (then the failure is not the sandbox's)."""
    if any(_inside(path, r) for r in policy.read_only):
        return False
    return any(_inside(path, w) for w in policy.writable())


def _protected(path: str, policy: Policy) -> bool:
    """Whether `path` is, or lies in, a path the policy keeps read-only."""
    return any(_inside(path, r) or _inside(path, os.path.realpath(r)) for r in policy.read_only)


def _mentions(output: str, path: str) -> bool:
    home = os.path.expanduser("~")
    short = "~" + path[len(home) :] if path.startswith(home + "/") else None
    return path in output or (short is not None and short in output)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _existing(path: str) -> str:
    current = Path(path)
    while not current.exists() and current != current.parent:
        current = current.parent
    return str(current)


def _real(paths: Iterable[str]) -> tuple[str, ...]:
    """The real paths of those that exist (a dangling link is left out), once each."""
    return _unique(os.path.realpath(p) for p in paths if os.path.exists(p))


def _temp_dirs(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    env = os.environ if environ is None else environ
    extra = (env["TMPDIR"],) if env.get("TMPDIR") else ()
    return _unique((*_TEMP_DIRS, *extra))


def _unique(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(paths))
