"""A process the agent starts (a stdio server) cannot read the agent's environment.

Linux lets a same-user process read /proc/<pid>/environ unless the target is non-dumpable.
Root reads it regardless (CAP_SYS_PTRACE), so under root the check runs as user `nobody`
with the system interpreter, loading agent/common/private.py by path (it needs only the standard
library); as any other user it runs the real agent, whose bundled server looks for the key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import REPO_ROOT

PRIVATE = REPO_ROOT / "agent" / "common" / "private.py"

NOBODY = 65534
PROBE = """
import importlib.util, subprocess, sys
spec = importlib.util.spec_from_file_location("private", sys.argv[1])
private = importlib.util.module_from_spec(spec)
spec.loader.exec_module(private)
if sys.argv[2] == "harden":
    assert private.make_non_dumpable()
child = subprocess.run(
    ["sh", "-c", "cat /proc/$PPID/environ"], capture_output=True, text=True
)
print("LEAKED" if "probe-secret" in child.stdout else "kept: " + child.stderr.strip())
"""


def _probe(harden: bool) -> str:
    """Run PROBE as an unprivileged user: parent with the secret, child reading it."""
    python, drop = sys.executable, None
    if os.geteuid() == 0:
        python = "/usr/bin/python3"
        if not os.access(python, os.X_OK):
            pytest.skip("needs a system python3 that user nobody can run")

        def drop() -> None:
            os.setgid(NOBODY)
            os.setuid(NOBODY)

    proc = subprocess.run(
        [python, "-c", PROBE, str(PRIVATE), "harden" if harden else ""],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": "probe-secret"},
        cwd="/",
        preexec_fn=drop,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_child_of_the_same_user_reads_a_dumpable_parent_environment() -> None:
    """The threat is real (the control for the next test)."""
    assert _probe(harden=False) == "LEAKED"


def test_a_child_of_the_same_user_cannot_read_a_non_dumpable_parent_environment() -> None:
    assert "Permission denied" in _probe(harden=True)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any /proc/<pid>/environ")
def test_the_bundled_server_cannot_read_the_agent_environment(tmp_path: Path) -> None:
    """The real agent: its server's shell looks up the agent (its grandparent) and reads."""
    command = (
        "agent=$(awk '{print $4}' /proc/$PPID/stat); "
        "if grep -q sk-e2e-secret /proc/$agent/environ; then echo LEAKED; else echo kept; fi"
    )
    with ScriptedLLM(tool_calls(("local__bash", {"command": command})), text("done")) as llm:
        proc = run_cli(["-p", "look", "--yes", "--output", "json"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    [call] = json.loads(proc.stdout)["tool_calls"]
    assert "kept" in call["output"] and "LEAKED" not in call["output"]


def test_the_agent_entry_point_makes_its_process_non_dumpable() -> None:
    """The wiring, checkable as root too: after main() the process says it is not dumpable."""
    script = (
        "import ctypes, contextlib, io\n"
        "from agent.cli.main import main\n"
        "libc = ctypes.CDLL(None)\n"
        "before = libc.prctl(3, 0, 0, 0, 0)\n"  # PR_GET_DUMPABLE
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'])\n"
        "print(before, libc.prctl(3, 0, 0, 0, 0))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "0"]
