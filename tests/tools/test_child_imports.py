"""Every Python child the agent starts imports only the agent's own code (issue 19, item 1).

A project with a package named `agent/` (a common name, or a hostile clone) must neither
run its code in the bundled server nor break it; nor may a `json.py` or `re.py` of the
working directory shadow the standard library in the search worker. The real CLI runs with
the scripted model and the bundled server, in a working directory holding all three.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import REPO_ROOT


def _plant(workdir: Path, marker: Path) -> None:
    """Modules that write `marker` (with their own path) the moment they are imported."""
    plant = f"open({str(marker)!r}, 'a').write(__file__ + '\\n')\n"
    for module in ("agent/__init__.py", "agent/server/__init__.py", "agent/server/__main__.py"):
        (workdir / module).parent.mkdir(parents=True, exist_ok=True)
        (workdir / module).write_text(plant)
    for module in ("json.py", "re.py", "mcp.py"):
        (workdir / module).write_text(plant)


def test_a_planted_agent_package_in_the_working_directory_never_runs(tmp_path: Path) -> None:
    work = tmp_path / "project"
    work.mkdir()
    marker = tmp_path / "planted-code-ran"
    _plant(work, marker)
    (work / "notes.txt").write_text("the launch code is 4711\n")
    script = [
        tool_calls(("local__read_file", {"path": "notes.txt"})),
        tool_calls(("local__search_files", {"pattern": "launch", "path": "."})),
        text("It is 4711."),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "what is the code?", "--output", "json"], work, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    calls = json.loads(proc.stdout)["tool_calls"]
    assert [c["is_error"] for c in calls] == [False, False], calls
    assert "4711" in calls[0]["output"]
    assert "notes.txt:1:" in calls[1]["output"]  # the search worker ran, with the real `re`
    assert not marker.exists(), marker.read_text()
    llm.assert_complete()


def test_the_bundled_server_runs_the_code_of_the_agent_that_started_it(tmp_path: Path) -> None:
    """A plain copy of the agent (no install pointing at it): its server is the copy's own."""
    clone = tmp_path / "clone"
    shutil.copytree(REPO_ROOT / "agent", clone / "agent", ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(REPO_ROOT / "run_mcp.py", clone / "run_mcp.py")
    marker = tmp_path / "which-server"
    with (clone / "agent" / "server" / "__init__.py").open("a") as fh:
        fh.write(f"open({str(marker)!r}, 'a').write(__file__ + '\\n')\n")
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedLLM(tool_calls(("local__list_dir", {})), text("listed")) as llm:
        proc = run_cli(
            ["-p", "list", "--output", "json"],
            work,
            base_url=llm.base_url,
            run_mcp=clone / "run_mcp.py",
        )
    assert proc.returncode == 0, proc.stderr
    [call] = json.loads(proc.stdout)["tool_calls"]
    assert call["is_error"] is False
    # (the agent itself may import it too: the same file)
    assert set(marker.read_text().splitlines()) == {str(clone / "agent" / "server" / "__init__.py")}
