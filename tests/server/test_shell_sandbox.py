"""The bundled server's shell under bubblewrap, as a user runs the agent: the workspace and
temp writable, the rest of the filesystem, `.git` and the agent's config read-only, secrets
hidden; what the sandbox stopped is told to the model, and (in the REPL) offered to the
user once with the access it lacked. Needs bwrap (Debian's bubblewrap, installed by .ci/run).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.common.sandbox import unavailable
from tests.support.cli import RUN_MCP, cli_env, run_cli, start_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages
from tests.support.processes import read_fifo
from tests.support.sandbox_dirs import outside_temp_base
from tests.support.terminal import PROMPT, Terminal, as_drawn, needs_tmux, start, terminals

__all__ = ["terminals"]
pytestmark = pytest.mark.skipif(
    unavailable() is not None and os.environ.get("CI") != "true",
    reason=f"bubblewrap cannot sandbox here: {unavailable()}",
)


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside the workspace and outside every temp folder (which the sandbox
    lets commands write): see tests/support/sandbox_dirs.py; removed afterwards."""
    folder = outside_temp_base() / uuid.uuid4().hex
    folder.mkdir(parents=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def bash(command: str) -> tuple[str, dict[str, str]]:
    return ("local__bash", {"command": command})


def test_the_shell_cannot_write_outside_the_workspace_and_the_model_is_told_why(
    outside_tmp: Path,
) -> None:
    workspace, outside = outside_tmp / "ws", outside_tmp / "elsewhere"
    workspace.mkdir()
    outside.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    command = f"echo in > inside.txt; echo out > {outside}/x.txt"
    script = [
        tool_calls(bash(command)),
        tool_calls(bash("echo hook > .git/hooks/post-commit")),
        text("done"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "write both", "--yes"], workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "inside.txt").read_text() == "in\n"
    assert not (outside / "x.txt").exists()
    assert not (workspace / ".git" / "hooks" / "post-commit").exists()
    system = llm.requests[0]["messages"][0]["content"]
    assert "bash runs in a sandbox (workspace-write: writes the workspace and temp" in system
    told = tool_messages(llm.requests[1])[0]
    assert "Read-only file system" in told
    assert f"the sandbox denied writing {outside}/x.txt" in told, told
    assert "The user did not allow it" in told
    assert "widen the sandbox" in told
    told_git = tool_messages(llm.requests[2])[1]
    assert f"denied writing {workspace}/.git/hooks/post-commit" in told_git, told_git


def test_secrets_and_the_agent_state_are_hidden_and_there_is_no_network(
    outside_tmp: Path,
) -> None:
    workspace = outside_tmp / "ws"
    workspace.mkdir()
    home = outside_tmp / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    command = (
        f"cat ~/.ssh/id_ed25519; ls {workspace}/state | wc -l; "
        "python3 -c 'import socket; socket.create_connection((\"10.255.255.1\", 9))' 2>&1 | tail -1"
    )
    with ScriptedLLM(tool_calls(bash(command)), text("done")) as llm:
        env = cli_env(workspace, llm.base_url, "sk-e2e-secret") | {"HOME": str(home)}
        proc = subprocess.run(
            [sys.executable, RUN_MCP, "-p", "look", "--yes"],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert proc.returncode == 0, proc.stderr
    told = tool_messages(llm.requests[1])[0]
    assert "PRIVATE KEY" not in told
    assert "No such file or directory" in told
    assert "\n0\n" in told  # the state folder (sessions, logins) is an empty folder inside
    assert "Network is unreachable" in told, told
    assert (workspace / "state").is_dir() and any((workspace / "state").iterdir())


def run_without_bwrap(
    workspace: Path, llm: ScriptedLLM, *args: str
) -> subprocess.CompletedProcess[str]:
    """The agent with a PATH that holds no bwrap (as on a machine without bubblewrap)."""
    bare = workspace.parent / "bin-without-bwrap"
    bare.mkdir(exist_ok=True)
    env = cli_env(workspace, llm.base_url, "sk-e2e-secret") | {"PATH": str(bare)}
    return subprocess.run(
        [sys.executable, RUN_MCP, *args],
        cwd=workspace,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_without_bwrap_one_warning_and_the_shell_runs_unsandboxed(outside_tmp: Path) -> None:
    workspace, outside = outside_tmp / "ws", outside_tmp / "elsewhere"
    workspace.mkdir()
    outside.mkdir()
    with ScriptedLLM(tool_calls(bash(f"echo out > {outside}/x.txt")), text("done")) as llm:
        proc = run_without_bwrap(workspace, llm, "-p", "write", "--yes")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: sand")]
    assert warnings == [
        "warning: sandbox: bubblewrap (bwrap) is not on PATH: install the bubblewrap package; "
        'commands run unsandboxed ([sandbox] mode = "off" says so and stops this warning; '
        "required = true refuses to start)"
    ], proc.stderr
    assert (outside / "x.txt").read_text() == "out\n"


def test_required_refuses_to_start_without_bwrap(outside_tmp: Path) -> None:
    workspace = outside_tmp / "ws"
    (workspace / "config").mkdir(parents=True)
    settings = workspace / "settings.toml"
    settings.write_text("[sandbox]\nrequired = true\n")
    with ScriptedLLM(text("never asked")) as llm:
        proc = run_without_bwrap(workspace, llm, "--config", str(settings), "-p", "hi")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: [sandbox] required = true but bubblewrap (bwrap) is not on PATH: install the "
        "bubblewrap package; install it, or set required = false"
    ), proc.stderr
    assert llm.requests == []


def sleeping(seconds: str) -> list[int]:
    """Host pids of the processes running `sleep SECONDS`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes() == f"sleep\0{seconds}\0".encode():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_a_sandboxed_command_does_not_outlive_the_agent(outside_tmp: Path) -> None:
    """SIGTERM to the agent mid-call: the command in its sandbox (its own pid namespace,
    where $$ means nothing outside) is gone with it."""
    workspace = outside_tmp / "ws"
    workspace.mkdir()
    os.mkfifo(workspace / "ready.fifo")
    seconds = f"{300 + uuid.uuid4().int % 1000}.25"  # a sleep no other test runs
    script = [tool_calls(bash(f"echo go > ready.fifo; exec sleep {seconds}"))]
    with ScriptedLLM(*script) as llm:
        env = cli_env(workspace, llm.base_url, "sk-e2e-secret")
        proc = start_cli(["-p", "work", "--yes"], workspace, env)
        try:
            assert read_fifo(workspace / "ready.fifo") == "go\n"
            deadline = time.monotonic() + 30  # the shell's `exec sleep` follows its echo
            while not sleeping(seconds):
                assert time.monotonic() < deadline, "the command never started its sleep"
                time.sleep(0.02)
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 143
    assert sleeping(seconds) == []


@needs_tmux
def test_the_repl_offers_the_denied_command_once_with_the_access_it_needed(
    outside_tmp: Path, terminals: list[Terminal]
) -> None:
    """The user says yes: that one command runs again with write access to the folder it
    needed, and the model gets the second run's output; the next command is sandboxed as
    before. The user says no: nothing runs again. The question shows the whole command,
    a long run of blanks counted, so padding cannot hide its tail."""
    workspace, outside = outside_tmp / "ws", outside_tmp / "elsewhere"
    workspace.mkdir()
    outside.mkdir()
    script = [
        tool_calls(bash(f"echo once > {outside}/allowed.txt")),
        tool_calls(bash(f"echo twice >{' ' * 5000}{outside}/declined.txt")),
        text("all done"),
    ]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, "sandbox-retry", "--yes")
        term.type("write outside")
        term.wait_for(as_drawn(f"Run it once more with write access to {outside}?"))
        term.wait_for(r"Answer it\? \[y\]es")
        mark = term.mark()
        term.type("y")
        term.wait_for(r"Answer it\? \[y\]es", after=mark)
        asked = term.screen()[mark:]
        term.type("n")
        term.wait_for(r"all done" + r"[\s\S]*" + PROMPT)
        term.leave()
    assert (outside / "allowed.txt").read_text() == "once\n"
    assert not (outside / "declined.txt").exists()
    first, second = tool_messages(llm.requests[1])[0], tool_messages(llm.requests[2])[1]
    assert "the user allowed it once" in first and "[exit code 0]" in first, first
    assert "The user did not allow it" in second, second
    # the padded command's tail is in the question, its padding counted
    assert re.search(r"echo twice >⟨5,000 blanks⟩\S*declined\.txt", asked.replace("\n", "")), asked


def test_sandbox_settings_widen_the_shell_for_good(outside_tmp: Path) -> None:
    """[sandbox] write (a protected folder listed there becomes writable) and network."""
    workspace, outside = outside_tmp / "ws", outside_tmp / "elsewhere"
    (workspace / ".git").mkdir(parents=True)
    outside.mkdir()
    settings = outside_tmp / "settings.toml"
    settings.write_text(f'[sandbox]\nwrite = [".git", "{outside}"]\nnetwork = true\n')
    command = (
        f"touch .git/ok {outside}/ok && "
        "python3 -c 'import socket; socket.create_connection((\"10.255.255.1\", 9), 0.2)' 2>&1 "
        "| tail -1"
    )
    with ScriptedLLM(tool_calls(bash(command)), text("done")) as llm:
        args = ["--config", str(settings), "-p", "go", "--yes"]
        proc = run_cli(args, workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / ".git" / "ok").exists() and (outside / "ok").exists()
    told = tool_messages(llm.requests[1])[0]
    assert "Network is unreachable" not in told and "[sandbox" not in told, told


def test_a_protected_folder_that_is_a_symlink_is_protected_where_it_leads(
    outside_tmp: Path,
) -> None:
    """`config -> elsewhere` in the workspace: bwrap cannot mount onto a link, so the mount
    goes to what it leads to; the shell still runs, and the folder stays read-only."""
    workspace, target = outside_tmp / "ws", outside_tmp / "real-config"
    workspace.mkdir()
    target.mkdir()
    (workspace / "config").symlink_to(target)
    command = "echo hi > notes.txt; echo evil > config/mcp.json"
    with ScriptedLLM(tool_calls(bash(command)), text("done")) as llm:
        proc = run_cli(["-p", "go", "--yes"], workspace, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert (workspace / "notes.txt").read_text() == "hi\n"
    assert not (target / "mcp.json").exists()
    assert f"denied writing {workspace}/config/mcp.json" in tool_messages(llm.requests[1])[0]


def test_a_bwrap_that_cannot_create_namespaces_warns_the_same_way(outside_tmp: Path) -> None:
    """User namespaces off: bwrap is there but fails; one warning that says so."""
    workspace = outside_tmp / "ws"
    workspace.mkdir()
    fake = outside_tmp / "bin-without-bwrap"  # the folder run_without_bwrap puts on PATH
    fake.mkdir()
    (fake / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    with ScriptedLLM(tool_calls(bash("echo unboxed")), text("done")) as llm:
        proc = run_without_bwrap(workspace, llm, "-p", "go", "--yes")
    assert proc.returncode == 0, proc.stderr
    [warning] = [line for line in proc.stderr.splitlines() if line.startswith("warning: sand")]
    assert warning.startswith(
        "warning: sandbox: bwrap cannot create namespaces here (bwrap: No permissions to "
        "create new namespace): user namespaces may be off"
    ), warning
    assert "unboxed" in tool_messages(llm.requests[1])[0]
