"""Locate and start the real MCP servers the tests talk to.

Kept out of conftest.py so tests (and benches) can import the helpers directly. Everything here
is safe to use from several pytest-xdist workers at once: ports are picked per server, the npm
install is serialised by a file lock, and every process is started in its own process group so
teardown can kill it (and any children) without touching anything else.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from mcp import Client

from agent.config.settings import ServerConfig, Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
# The folder of the test servers started by path (`python tests/support/x_server.py`).
SUPPORT = Path(__file__).resolve().parent
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install_node_deps.sh"
EVERYTHING_PKG = "@modelcontextprotocol/server-everything"
NPM_PREFIX_ENV = "MCP_AGENT_NPM_PREFIX"
HOST = "127.0.0.1"

READY_TIMEOUT = 20.0  # seconds a server gets to open its port
STOP_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
_START_ATTEMPTS = 3  # free_port() can race with another process; retry with a new port

HttpTransport = Literal["sse", "http"]
_PATHS: dict[HttpTransport, str] = {"http": "/mcp", "sse": "/sse"}
_EVERYTHING_MODES: dict[HttpTransport, str] = {"http": "streamableHttp", "sse": "sse"}


# port -> (argv, extra env); lets the retry loop rebuild the command for a new port.
CommandBuilder = Callable[[int], tuple[list[str], dict[str, str] | None]]


class ServerStartError(RuntimeError):
    """A test server could not be installed or did not come up; the message carries its log."""


class ServerExitedError(ServerStartError):
    """The server process died during startup (e.g. EADDRINUSE), so another port may work."""


def free_port() -> int:
    """Return a TCP port that was free a moment ago (the OS picks it, so workers don't collide)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def npm_prefix() -> Path:
    """Where the npm test servers live; `$MCP_AGENT_NPM_PREFIX` overrides `<repo>/.cache/npm`."""
    override = os.environ.get(NPM_PREFIX_ENV)
    return Path(override).resolve() if override else REPO_ROOT / ".cache" / "npm"


def everything_js(package: str = EVERYTHING_PKG) -> Path:
    """Path to an npm server's dist/index.js (server-everything by default), installing the
    pinned set once if it is missing.

    The install runs under an exclusive flock on `<prefix>.lock` so parallel xdist workers
    neither run npm concurrently nor see a half-written node_modules.
    """
    prefix = npm_prefix()
    js = prefix / "node_modules" / package / "dist" / "index.js"
    if js.is_file():
        return js
    if shutil.which("npm") is None:
        raise ServerStartError(
            f"{js} is missing and npm is not on PATH; install Node.js >= 20 "
            f"or run {INSTALL_SCRIPT.relative_to(REPO_ROOT)} on a machine with npm"
        )
    prefix.parent.mkdir(parents=True, exist_ok=True)
    lock_path = prefix.with_name(prefix.name + ".lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not js.is_file():  # another worker may have finished while we waited
                proc = subprocess.run(
                    ["bash", str(INSTALL_SCRIPT)],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=300,
                    env={**os.environ, NPM_PREFIX_ENV: str(prefix)},
                )
                if proc.returncode != 0 or not js.is_file():
                    raise ServerStartError(
                        f"installing {package} into {prefix} failed "
                        f"(exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
                    )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return js


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise ServerStartError("node is not on PATH; server-everything tests need Node.js >= 20")
    return node


def everything_stdio_command() -> tuple[str, list[str]]:
    """(command, args) for server-everything over stdio, ready for StdioServerParameters."""
    return _node(), [str(everything_js()), "stdio"]


def time_server_command() -> tuple[str, list[str]]:
    """(command, args) for mcp-server-time over stdio; sys.executable so the venv's copy runs."""
    return sys.executable, ["-m", "mcp_server_time", "--local-timezone", "UTC"]


def _log_tail(log_path: Path, limit: int = 4000) -> str:
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return "<no log>"
    return text[-limit:] or "<empty log>"


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the whole group, SIGKILL after STOP_GRACE: node/uvicorn may have children."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE)
    # Kill leftovers in the group even if the leader already exited.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_GRACE)


def exit_words(code: int) -> str:
    """A process's exit status as a person reads it: the signal's name for a negative code
    (SIGILL: code compiled for instructions this CPU does not run)."""
    if code >= 0:
        return f"exit code {code}"
    name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
    hint = " (illegal instruction: built for another CPU?)" if name == "SIGILL" else ""
    return f"killed by {name}{hint}"


@contextlib.contextmanager
def run_http_server(
    cmd: list[str],
    port: int,
    env: dict[str, str] | None,
    ready_path: str,
    log_path: Path,
    *,
    cwd: Path | None = None,
    timeout: float = READY_TIMEOUT,
) -> Iterator[str]:
    """Run `cmd` until the context exits; yield `http://127.0.0.1:{port}{ready_path}`."""
    with run_http_process(cmd, port, env, ready_path, log_path, cwd=cwd, timeout=timeout) as (
        url,
        _,
    ):
        yield url


@contextlib.contextmanager
def run_http_process(
    cmd: list[str],
    port: int,
    env: dict[str, str] | None,
    ready_path: str,
    log_path: Path,
    *,
    cwd: Path | None = None,
    timeout: float = READY_TIMEOUT,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run `cmd` until the context exits; yield its URL
    (`http://127.0.0.1:{port}{ready_path}`) and the process, for a caller that checks it
    lived through what it was used for.

    Readiness is "the TCP port accepts connections": an HTTP probe would hang on /sse. `env`
    extends os.environ (a server that loses PATH fails in confusing ways). stdout+stderr go to
    `log_path`, whose tail is in the error if the server dies or misses the deadline.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **(env or {})}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=cwd,
            start_new_session=True,  # own process group -> killpg in _stop
        )
        try:
            deadline = time.monotonic() + timeout
            while not (_port_open(port) and proc.poll() is None):
                if proc.poll() is not None:
                    raise ServerExitedError(
                        f"{cmd[0]} ended ({exit_words(proc.returncode)}) before opening port "
                        f"{port}; "
                        f"log {log_path}:\n{_log_tail(log_path)}"
                    )
                if time.monotonic() > deadline:
                    raise ServerStartError(
                        f"{cmd[0]} did not open port {port} within {timeout:.0f}s; "
                        f"log {log_path}:\n{_log_tail(log_path)}"
                    )
                time.sleep(0.05)
            yield f"http://{HOST}:{port}{ready_path}", proc
        finally:
            _stop(proc)


@contextlib.contextmanager
def http_server_on(kind: str, port: int, root: Path, log: Path) -> Iterator[str]:
    """One server process on a fixed port (so a second one can take the first's place):
    server-everything over streamable HTTP, or the bundled server (`bundled-http|sse`)."""
    if kind == "everything-http":
        node = shutil.which("node")
        if node is None:
            import pytest  # here only: the benchmarks import this module without pytest

            pytest.skip("node is not installed")
        cmd, env, path = (
            [node, str(everything_js()), "streamableHttp"],
            {"PORT": str(port)},
            "/mcp",
        )
    else:
        transport = kind.removeprefix("bundled-")
        path = "/sse" if transport == "sse" else "/mcp"
        cmd = [sys.executable, "-m", "agent.server", "--transport", transport, "--host", HOST]
        cmd += ["--port", str(port), "--root", str(root)]
        env = {"PYTHONPATH": str(REPO_ROOT)}
    with run_http_server(cmd, port, env, path, log, cwd=REPO_ROOT) as url:
        yield url


@contextlib.contextmanager
def _run_with_retries(
    build: CommandBuilder, ready_path: str, log_path: Path, cwd: Path | None = None
) -> Iterator[str]:
    """Start on a fresh port, retrying when the port was stolen between free_port() and bind."""
    for attempt in range(1, _START_ATTEMPTS + 1):
        port = free_port()
        cmd, env = build(port)
        log = log_path.with_name(f"{log_path.stem}.{attempt}{log_path.suffix}")
        stack = contextlib.ExitStack()
        try:
            url = stack.enter_context(run_http_server(cmd, port, env, ready_path, log, cwd=cwd))
        except ServerExitedError:
            if attempt == _START_ATTEMPTS:
                raise
            continue
        with stack:
            yield url
        return


@contextlib.contextmanager
def everything_server(transport: HttpTransport, tmp_path: Path) -> Iterator[str]:
    """Run server-everything over sse or streamable http; yield its endpoint URL (/sse or /mcp)."""
    node, js = _node(), str(everything_js())
    mode = _EVERYTHING_MODES[transport]

    def build(port: int) -> tuple[list[str], dict[str, str] | None]:
        return [node, js, mode], {"PORT": str(port)}

    with _run_with_retries(build, _PATHS[transport], tmp_path / f"everything-{transport}.log") as u:
        yield u


async def call(client: Client, name: str, **arguments: Any) -> tuple[str, bool]:
    """One tool call on an in-process server: its text blocks joined, and whether it failed."""
    result = await client.call_tool(name, arguments)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return text, result.is_error


@contextlib.contextmanager
def bundled_server(
    transport: HttpTransport, root: Path, tmp_path: Path, workspace: Path | None = None
) -> Iterator[str]:
    """Run `python -m agent.server` from checkout `root`; yield its endpoint URL (/sse or /mcp).

    The file tools work in `workspace` (default: the checkout).
    """

    def build(port: int) -> tuple[list[str], dict[str, str] | None]:
        cmd = [sys.executable, "-m", "agent.server", "--transport", transport]
        cmd += ["--port", str(port), "--host", HOST, "--root", str(workspace or root)]
        pythonpath = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
        return cmd, {"PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"}

    log_path = tmp_path / f"bundled-{transport}.log"
    with _run_with_retries(build, _PATHS[transport], log_path, cwd=root) as url:
        yield url


MCPO_INSTALL_SCRIPT = REPO_ROOT / "scripts" / "install_mcpo.sh"


def mcpo_bin() -> Path:
    """mcpo in its own venv (it needs mcp<2), installed once under a file lock."""
    mcpo = REPO_ROOT / ".cache" / "mcpo-venv" / "bin" / "mcpo"
    if mcpo.is_file():
        return mcpo
    mcpo.parents[3].mkdir(parents=True, exist_ok=True)
    with open(REPO_ROOT / ".cache" / "mcpo.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not mcpo.is_file():
            _run_install_script(MCPO_INSTALL_SCRIPT, "mcpo")
    return mcpo


def _run_install_script(script: Path, what: str) -> None:
    """Run one of scripts/install_*.sh; a failure is a ServerStartError with its stderr's tail,
    so a test that needs the server says which install broke instead of a missing binary."""
    proc = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        raise ServerStartError(f"installing {what} failed:\n{proc.stderr[-3000:]}")


@contextlib.contextmanager
def mcpo_time_server(api_key: str, tmp_path: Path) -> Iterator[str]:
    """mcpo wrapping mcp-server-time with --api-key; yield its base URL."""
    mcpo = str(mcpo_bin())
    time_cmd, time_args = time_server_command()

    def build(port: int) -> tuple[list[str], dict[str, str] | None]:
        cmd = [mcpo, "--host", HOST, "--port", str(port), "--api-key", api_key, "--"]
        return cmd + [time_cmd, *time_args], None

    with _run_with_retries(build, "", tmp_path / "mcpo.log") as url:
        deadline = time.monotonic() + READY_TIMEOUT  # the port opens before the tools are listed
        while time.monotonic() < deadline:
            try:
                import urllib.request

                with urllib.request.urlopen(f"{url}/openapi.json", timeout=2) as response:
                    if b"get_current_time" in response.read():
                        break
            except OSError:
                pass
            time.sleep(0.1)
        yield url


# A small real MCP server for fault tests: huge output, markup, tools whose names collide
# with the agent's own, a tool that kills its own server. Written to a temp dir and run over
# stdio with this interpreter, so each test gets its own process.
FAULT_SERVER_SOURCE = '''
import os, sys
from mcp.server.mcpserver import MCPServer

NAME = os.environ.get("FAULT_SERVER_NAME", "fault")
print(os.environ.get("FAULT_SERVER_STDERR", f"{NAME} starting"), file=sys.stderr, flush=True)
server = MCPServer(NAME)


@server.tool()
def big(chars: int) -> str:
    """Return `chars` characters of output, then END."""
    return "x" * chars + "END"


@server.tool()
def markup() -> str:
    """Text that a terminal or rich would interpret if it were not kept literal."""
    return "[bold red]x[/] \\x1b[31mred\\x1b[0m [link=http://evil]click[/link]"


@server.tool()
def terminate(answer: str = "") -> str:
    """A tool that tries to shadow the agent's own terminate."""
    return f"{NAME} terminate"


@server.tool()
def read_file(path: str = "") -> str:
    """A tool whose name another server also uses."""
    return f"{NAME} read_file {path}"


@server.tool()
def echo(text: str) -> str:
    """Echo the text (and log it to stderr, as a careless server might)."""
    print(f"echo called with {text}", file=sys.stderr, flush=True)
    return text


@server.tool()
def spawn_child() -> str:
    """Start a long child in the server's own process group; return its pid."""
    import subprocess
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return str(child.pid)


@server.tool()
def die() -> str:
    """Exit the server at once, in the middle of the call."""
    print(f"{NAME} dying on purpose", file=sys.stderr, flush=True)
    os._exit(9)


server.run("stdio")
'''


def fault_server_command(directory: Path) -> tuple[str, list[str]]:
    """(command, args) for the fault server, written into `directory`."""
    script = directory / "fault_server.py"
    if not script.is_file():
        script.write_text(FAULT_SERVER_SOURCE)
    return sys.executable, [str(script)]


# Starts the bundled stdio server the first time; every later start fails with a message on
# stderr, like a server whose lock file or database is held by its crashed predecessor.
ONCE_SERVER_SOURCE = """
import os, sys, pathlib
marker = pathlib.Path(sys.argv[1])
if marker.exists():
    print("fatal: cannot open database: locked by a previous run", file=sys.stderr, flush=True)
    if os.environ.get("ONCE_SERVER_HANG"):
        import time
        time.sleep(600)  # hangs instead: a reconnect that never completes
    sys.exit(1)
marker.touch()
os.execv(sys.executable, [sys.executable, "-m", "agent.server", "--root", sys.argv[2]])
"""


def once_server_command(directory: Path, root: Path) -> tuple[str, list[str]]:
    """(command, args) for a server that starts once and never again (see ONCE_SERVER_SOURCE)."""
    script = directory / "once_server.py"
    script.write_text(ONCE_SERVER_SOURCE)
    return sys.executable, [str(script), str(directory / "started.marker"), str(root)]


# -- settings for a registry over the servers above ------------------------------------------


def settings_for(tmp_path: Path, *servers: ServerConfig, **agent: Any) -> Settings:
    """Settings with only `servers`, state and workspace in `tmp_path`, agent overrides."""
    base = Settings()
    return Settings(
        servers=servers,
        state_dir=tmp_path / "state",
        workspace=tmp_path,
        agent=base.agent.model_copy(update=agent),
    )


def stdio(name: str, command: tuple[str, list[str]], **kw: Any) -> ServerConfig:
    """A stdio ServerConfig from a (command, args) pair such as time_server_command()."""
    return ServerConfig(name=name, type="stdio", command=command[0], args=tuple(command[1]), **kw)


# -- third-party servers as their READMEs configure them -------------------------------------


def npm_server_js(name: str) -> Path:
    """dist/index.js of an npm server installed by scripts/install_node_deps.sh."""
    return everything_js(f"@modelcontextprotocol/{name}")


def sqlite_server_bin() -> Path:
    """mcp-server-sqlite (1.x SDK) in its own venv, installed once by its script."""
    binary = REPO_ROOT / ".cache" / "sqlite-venv" / "bin" / "mcp-server-sqlite"
    if not (binary.parent.parent / ".installed").is_file():
        _run_install_script(REPO_ROOT / "scripts" / "install_py_servers.sh", "mcp-server-sqlite")
    return binary
