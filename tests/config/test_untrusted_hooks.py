"""The user's own hooks in a folder that is not trusted (issue 29, item 15).

A user-level hook such as `npx prettier` run with a cloned repository as its working
directory runs the repository's own `node_modules/.bin/prettier`. In an untrusted folder
the user's hooks start in the user's config folder instead, and are told the project
(MCP_AGENT_PROJECT_DIR, `cwd` in their JSON) and that it is not trusted
(MCP_AGENT_WORKSPACE_TRUSTED=0, `workspace_trusted: false`).

The repository here holds `node_modules/.bin/fmt`, which writes a marker; the user's hook
records where it ran and what it was told, then runs `fmt` as `npx` would (found from
its working directory's node_modules/.bin first).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text

RECORDER = """
import json, os, subprocess, sys
seen = json.load(sys.stdin)
record = {
    "cwd": os.getcwd(),
    "payload_cwd": seen["cwd"],
    "payload_trusted": seen.get("workspace_trusted"),
    "project": os.environ.get("MCP_AGENT_PROJECT_DIR"),
    "trusted": os.environ.get("MCP_AGENT_WORKSPACE_TRUSTED"),
}
open(sys.argv[1], "w").write(json.dumps(record))
local = os.path.join("node_modules", ".bin", "fmt")  # what npx runs first
if os.path.exists(local):
    subprocess.run([local])
"""


def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The repository (the working directory), the user's config folder, and the marker
    the repository's own bin writes when it runs."""
    repo = tmp_path / "repo"
    marker = tmp_path / "repository-bin-ran"
    fmt = repo / "node_modules" / ".bin" / "fmt"
    fmt.parent.mkdir(parents=True)
    fmt.write_text(f"#!/bin/sh\necho ran > {shlex.quote(str(marker))}\n")
    fmt.chmod(0o755)
    user = repo / "xdg-config" / "mcp-agent"  # tests.support.cli's XDG_CONFIG_HOME
    user.mkdir(parents=True)
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER)
    command = shlex.join([sys.executable, str(script), str(tmp_path / "seen.json")])
    doc = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": command}]}]}}
    (user / "hooks.json").write_text(json.dumps(doc))
    return repo, user, marker


@pytest.mark.parametrize("trusted", [False, True])
def test_user_hooks_run_in_the_users_config_folder_unless_the_folder_is_trusted(
    tmp_path: Path, trusted: bool
) -> None:
    repo, user, marker = setup(tmp_path)
    args = ["-p", "hi", *(["--trust-workspace"] if trusted else [])]
    with ScriptedLLM(text("done")) as llm:
        proc = run_cli(args, repo, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    project = str(repo.resolve())
    if trusted:
        assert os.path.realpath(seen["cwd"]) == project
        assert marker.exists()  # in a trusted folder its own tools are the user's choice
    else:
        assert os.path.realpath(seen["cwd"]) == os.path.realpath(user)
        assert not marker.exists()  # the repository's bin never ran
    assert seen["payload_cwd"] == project and seen["project"] == project  # told the project
    assert seen["payload_trusted"] is trusted and seen["trusted"] == ("1" if trusted else "0")
