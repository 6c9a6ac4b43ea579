"""A real terminal for end-to-end REPL tests: a private tmux server, read as screen text.

tmux renders everything the program draws (prompt-toolkit redraws, rich Live regions) into a
screen, so tests match what a person would see instead of raw escape sequences. Each
Terminal has its own tmux socket, so parallel tests never share a server.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.hermetic import assert_own_home
from tests.support.servers import REPO_ROOT

if TYPE_CHECKING:
    from tests.support.fake_llm import ScriptedLLM

WIDTH, HEIGHT = 120, 50


class Terminal:
    def __init__(
        self,
        command: list[str],
        *,
        cwd: Path,
        env: dict[str, str],
        log: Path,
        width: int = WIDTH,
        height: int = HEIGHT,
    ) -> None:
        self.socket = f"mcp-agent-test-{secrets.token_hex(4)}"
        self.log = log
        self.rc_file = log.with_suffix(".rc")
        env_args = [f"{k}={v}" for k, v in env.items()]
        # The exit status goes to a file; the pane then stays until the test kills the server.
        script = f"{shlex.join(['env', '-i', *env_args, *command])}; echo $? > {self.rc_file}"
        self._tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-c", str(cwd), script)
        self._tmux("set-option", "-g", "remain-on-exit", "on")
        self._tmux("set-option", "-g", "history-limit", "5000")

    def _tmux(self, *args: str) -> str:
        proc = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
        )
        return proc.stdout

    def screen(self) -> str:
        """Everything on screen and in the scroll-back, as plain text."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-5000")

    def record(self, path: Path) -> None:
        """Append every byte the program writes from now on to `path` (what a screen
        capture cannot show: text drawn and then overwritten)."""
        self._tmux("pipe-pane", "-o", f"cat >> {shlex.quote(str(path))}")

    def rows(self) -> list[str]:
        """The screen's rows as drawn, lines the terminal wrapped left apart (capture -J
        joins them): where a word was broken, it shows broken here."""
        return self._tmux("capture-pane", "-p", "-S", "-5000").split("\n")

    def visible(self) -> str:
        """Only what is on screen now, without the scroll-back."""
        return self._tmux("capture-pane", "-p", "-J")

    def send(self, *keys: str) -> None:
        """tmux key names: 'Enter', 'C-c', 'C-d', or literal text with -l via type()."""
        self._tmux("send-keys", *keys)

    def type(self, text: str, enter: bool = True) -> None:
        self._tmux("send-keys", "-l", text)
        if enter:
            self._tmux("send-keys", "Enter")

    def wait_for(self, pattern: str, *, timeout: float = 30, after: int = 0) -> float:
        """Wait until `pattern` (a regex) shows up past screen offset `after`; seconds waited."""
        started = time.monotonic()
        deadline = started + timeout
        regex = re.compile(pattern)
        while True:
            text = self.screen()
            if regex.search(text, after):
                return time.monotonic() - started
            if time.monotonic() > deadline:
                self.save()
                raise AssertionError(f"{pattern!r} not on screen after {timeout} s:\n{text}")
            time.sleep(0.05)

    def mark(self) -> int:
        """An offset into the screen text: later waits look only at what appears after it."""
        return len(self.screen().rstrip())

    def exit_code(self, timeout: float = 15) -> int:
        deadline = time.monotonic() + timeout
        while not self.rc_file.exists() or not self.rc_file.read_text().strip():
            if time.monotonic() > deadline:
                self.save()
                raise AssertionError(f"the program did not exit:\n{self.screen()}")
            time.sleep(0.05)
        return int(self.rc_file.read_text())

    def leave(self) -> None:
        """Type /exit; the program must end with exit code 0."""
        self.type("/exit")
        assert self.exit_code() == 0

    def save(self) -> str:
        text = self.screen()
        self.log.write_text(text)
        return text

    def close(self) -> None:
        self.save()
        subprocess.run(
            ["tmux", "-L", self.socket, "kill-server"],
            capture_output=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
        )
        # kill-server leaves the socket file behind; one per test run would pile up.
        folder = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
        (folder / self.socket).unlink(missing_ok=True)


# ----------------------------------------------------- the agent in a terminal, for the tests

# CI installs tmux (.ci/run); elsewhere a machine without it skips these, but CI never does.
needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None and os.environ.get("CI") != "true", reason="needs tmux"
)

PROMPT = r"\n›[ ]?(?=\n|$)"  # an empty prompt line (tmux trims trailing spaces)


def as_drawn(text: str) -> str:
    """A regex for `text` as the terminal shows it at any width: rich breaks a line at a
    space and folds a word longer than the line (a path: the checkout's, a temp folder's)
    anywhere, so any space may be a line break and a break may fall inside any word. A test
    that waits for a path this way passes however long the path is."""
    words = (r"(?:\n *)?".join(re.escape(char) for char in word) for word in text.split())
    return r"\s+".join(words)


def agent_env(base_url: str, state_dir: Path, term: str = "xterm-256color") -> dict[str, str]:
    """Our environment minus the model and agent settings, then the scripted model's. HOME
    and the XDG folders are the test's own (tests/support/hermetic.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "MCP_AGENT_"))}
    assert_own_home(env)
    env.update(
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="sk-terminal-test",
        MCP_AGENT_STATE_DIR=str(state_dir),
        TERM=term,
        NO_COLOR="1",
    )
    for name in ("PYTEST_CURRENT_TEST", "COLUMNS", "LINES"):  # the terminal gives its size
        env.pop(name, None)
    return env


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The folder the agent runs in (its bundled server's root), with one file to read."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("launch code 4711\n")
    return root


@pytest.fixture
def terminals(tmp_path: Path) -> Iterator[list[Terminal]]:
    """The terminals a test opened; closed after it, each screen printed (seen on failure)."""
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()
        print(f"--- screen of {terminal.log.name} ---\n{terminal.log.read_text()}")


def start(
    terminals: list[Terminal],
    llm: ScriptedLLM,
    workspace: Path,
    name: str,
    *args: str,
    term: str = "xterm-256color",
    ready: str = r"tools from 1 server",
    size: tuple[int, int] = (WIDTH, HEIGHT),
) -> Terminal:
    """`run_mcp.py ARGS` in a new terminal (`size`: columns, rows) against the scripted
    model, at its first prompt."""
    terminal = Terminal(
        [sys.executable, str(REPO_ROOT / "run_mcp.py"), *args],
        cwd=workspace,
        env=agent_env(llm.base_url, workspace.parent / "state", term),
        log=workspace.parent / f"{name}.screen.txt",
        width=size[0],
        height=size[1],
    )
    terminals.append(terminal)
    terminal.wait_for(ready)
    if ready != PROMPT:
        terminal.wait_for(PROMPT)
    return terminal
