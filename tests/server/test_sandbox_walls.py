"""The sandbox's walls as an attacker meets them (issue 40, items 1–3): with the network off
no unix socket of the user's is reachable (the D-Bus bus, docker.sock, an ssh-agent), a
protected file that does not exist yet cannot be created (`.mcp.json`, `config/`,
`.mcp-agent/`, `.claude/`), and every git hook folder is read-only: nested repositories'
`.git` and the folder `core.hooksPath` names. Each runs the agent as a user does, with the
model's commands in the bundled shell or a sandboxed stdio server. Needs bwrap.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.common.sandbox import unavailable
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages
from tests.support.sandbox_dirs import outside_temp_base

pytestmark = pytest.mark.skipif(
    unavailable() is not None and os.environ.get("CI") != "true",
    reason=f"bubblewrap cannot sandbox here: {unavailable()}",
)


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder outside every temp folder (see tests/support/sandbox_dirs.py) holding the
    workspace `ws`; removed afterwards."""
    folder = outside_temp_base() / uuid.uuid4().hex
    (folder / "ws").mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


class Listener:
    """A unix socket the user's service listens on; counts the connections it accepted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.accepted = 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.sendall(b"hello from the user's service\n")
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def listeners(base: Path) -> Iterator[tuple[Listener, Listener]]:
    """Two services' sockets: one in a folder of the user's (like /run/user/UID/bus) and one
    in the workspace itself (writable in the sandbox, so not a read-only mount's doing).
    A socket's path has at most 107 bytes: a long checkout's gets a short link to it."""
    (base / "run").mkdir()
    short = Path(tempfile.mkdtemp(prefix="sock", dir="/tmp"))
    (short / "r").symlink_to(base / "run")
    (short / "w").symlink_to(base / "ws")
    pair = (Listener(short / "r" / "bus"), Listener(short / "w" / "agent.sock"))
    yield pair
    for listener in pair:
        listener.close()
    shutil.rmtree(short, ignore_errors=True)


CONNECT = (
    "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); "
    "s.connect(sys.argv[1]); print(s.recv(100).decode())' {} 2>&1"
)


def bash(command: str) -> tuple[str, dict[str, str]]:
    return ("local__bash", {"command": command})


def test_without_network_the_shell_reaches_no_unix_socket_of_the_users(
    base: Path, listeners: tuple[Listener, Listener]
) -> None:
    workspace = base / "ws"
    bus, own = listeners
    commands = tool_calls(
        bash(CONNECT.format(bus.path)),
        bash(CONNECT.format(own.path)),
        bash("python3 -c 'import socket; print(len(socket.socketpair()))'"),  # still fine
    )
    with ScriptedLLM(commands, text("done")) as llm:
        proc = run_cli(["-p", "talk to the services", "--yes"], workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    to_bus, to_own, pair = tool_messages(llm.requests[1])
    for told in (to_bus, to_own):
        assert "Address family not supported by protocol" in told, told
        assert "hello from the user's service" not in told
        assert "the sandbox denied the network" in told, told
    assert "2" in pair and "Error" not in pair, pair
    assert bus.accepted == 0 and own.accepted == 0


def test_with_the_network_on_unix_sockets_are_reachable_as_documented(
    base: Path, listeners: tuple[Listener, Listener]
) -> None:
    """The other side of the same wall, as docs/sandbox.md says: `network = true` lets
    commands reach local services too."""
    workspace = base / "ws"
    bus, _ = listeners
    config = base / "config.toml"
    config.write_text("[sandbox]\nnetwork = true\n")
    with ScriptedLLM(tool_calls(bash(CONNECT.format(bus.path))), text("done")) as llm:
        argv = ["--config", str(config), "-p", "talk", "--yes"]
        proc = run_cli(argv, workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert "hello from the user's service" in tool_messages(llm.requests[1])[0]
    assert bus.accepted == 1


PROBE = """
import socket, sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool()
def call(path: str) -> str:
    \"\"\"Connect to a unix socket.\"\"\"
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        return s.recv(100).decode()
    except OSError as exc:
        return f"failed: {exc}"


server.run("stdio")
"""


def test_a_sandboxed_stdio_server_reaches_no_unix_socket_either(
    base: Path, listeners: tuple[Listener, Listener]
) -> None:
    workspace = base / "ws"
    bus, _ = listeners
    (base / "probe.py").write_text(PROBE)
    entry = {"command": sys.executable, "args": [str(base / "probe.py")], "sandbox": True}
    config = mcp_json(base, {"probe": entry})
    with ScriptedLLM(tool_calls(("probe__call", {"path": str(bus.path)})), text("ok")) as llm:
        argv = ["--mcp-config", str(config), "-p", "go", "--yes"]
        proc = run_cli(argv, workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    told = tool_messages(llm.requests[1])[0]
    assert "failed: [Errno 97] Address family not supported by protocol" in told, told
    assert bus.accepted == 0


def test_protected_files_cannot_be_created_and_nothing_is_left_behind(base: Path) -> None:
    workspace = base / "ws"
    (workspace / "src").mkdir()
    plant = (
        "echo ok > src/fine.txt; "
        'echo \'{"mcpServers": {"x": {"command": "evil"}}}\' > .mcp.json; '
        "mkdir -p .mcp-agent/skills/x; mkdir config; echo '{}' > config/mcp.json; "
        "mkdir -p .claude/commands; mkdir -p .vscode"
    )
    with ScriptedLLM(tool_calls(bash(plant)), text("done")) as llm:
        proc = run_cli(["-p", "plant", "--yes"], workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "src" / "fine.txt").read_text() == "ok\n"  # the workspace is writable
    left = sorted(p.name for p in workspace.iterdir())
    assert left == ["src", "state"], left  # no planted file, and no placeholder left behind
    told = tool_messages(llm.requests[1])[0]
    assert "the sandbox denied writing" in told, told
    assert f"{workspace.resolve()}/.mcp.json" in told, told


def test_a_protected_file_that_exists_stays_as_it_was(base: Path) -> None:
    """The placeholder is only for what is missing: an existing `.mcp.json` keeps its
    content after the session (never removed as if it were the sandbox's)."""
    workspace = base / "ws"
    (workspace / ".mcp.json").write_text("")  # empty, as a placeholder would be
    with ScriptedLLM(tool_calls(bash("echo x > .mcp.json")), text("done")) as llm:
        proc = run_cli(["-p", "write", "--yes"], workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / ".mcp.json").exists() and (workspace / ".mcp.json").read_text() == ""


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_every_git_hook_folder_is_read_only(base: Path) -> None:
    workspace = base / "ws"
    git("init", "-q", ".", cwd=workspace)
    (workspace / ".husky").mkdir()
    git("config", "core.hooksPath", ".husky", cwd=workspace)
    (workspace / "libs" / "sub").mkdir(parents=True)
    git("init", "-q", ".", cwd=workspace / "libs" / "sub")
    (workspace / "tools").mkdir()
    git("init", "-q", ".", cwd=workspace / "tools")
    git("config", "core.hooksPath", "githooks", cwd=workspace / "tools")  # not there yet
    plant = (
        "echo evil > .husky/pre-commit; "
        "echo evil > libs/sub/.git/hooks/pre-commit; "
        "git -C libs/sub config core.fsmonitor evil; "
        "mkdir tools/githooks; echo evil > tools/githooks/pre-commit; "
        "echo fine > libs/sub/file.txt"
    )
    with ScriptedLLM(tool_calls(bash(plant)), text("done")) as llm:
        proc = run_cli(["-p", "plant hooks", "--yes"], workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "libs" / "sub" / "file.txt").read_text() == "fine\n"
    assert not (workspace / ".husky" / "pre-commit").exists()
    assert not (workspace / "libs" / "sub" / ".git" / "hooks" / "pre-commit").exists()
    config = (workspace / "libs" / "sub" / ".git" / "config").read_text()
    assert "fsmonitor" not in config
    assert not (workspace / "tools" / "githooks").exists()
    told = tool_messages(llm.requests[1])[0]
    assert "Read-only file system" in told, told


def test_a_refused_local_port_says_the_sandbox_has_its_own_loopback(base: Path) -> None:
    """A dev server of the user's on localhost: inside, curl says only "Couldn't connect";
    the model is told why (issue 41 #8)."""
    workspace = base / "ws"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        command = f"curl -sS http://127.0.0.1:{port}/ 2>&1; exit 7"
        with ScriptedLLM(tool_calls(bash(command)), text("done")) as llm:
            proc = run_cli(["-p", "ask the dev server", "--yes"], workspace, base_url=llm.base_url)
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    told = tool_messages(llm.requests[1])[0]
    assert "Couldn't connect" in told or "Connection refused" in told, told
    assert "its loopback is its own" in told, told
    assert "localhost is not reachable from inside" in told


DIES = """
const fs = require("fs");
try { fs.mkdirSync(process.env.CACHE_HOME + "/.npm-like"); }
catch (err) { console.error(new Error("could not start", {cause: err})); process.exit(1); }
"""


def test_a_sandboxed_server_that_dies_of_its_sandbox_says_what_was_denied(base: Path) -> None:
    """The denied path is on Node's `cause:` line, below the tail's `Error:` line: the
    start's error still names it, and says what the entry can allow (issue 41 #8)."""
    workspace, home = base / "ws", base / "home"
    home.mkdir()
    (base / "dies.js").write_text(DIES)
    node = shutil.which("node") or "node"
    entry = {
        "command": node,
        "args": [str(base / "dies.js")],
        "env": {"CACHE_HOME": str(home)},
        "sandbox": True,
    }
    config = mcp_json(base, {"dies": entry})
    with ScriptedLLM(text("unused")) as llm:
        argv = ["--mcp-config", str(config), "-p", "go"]
        proc = run_cli(argv, workspace, base_url=llm.base_url)
    assert proc.returncode == 1, proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert "'dies'" in error, error
    assert f"the sandbox denied writing {home.resolve()}/.npm-like" in error, error
    assert f'"write": ["{home.resolve()}/.npm-like"]' in error, error
