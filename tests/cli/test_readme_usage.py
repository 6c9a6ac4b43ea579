"""The README's Usage is what a new user types after the two set-up commands (issue 32,
item 8): the installed `run-mcp` command exists beside the venv's python and runs, and
every flag the Usage block shows is one `--help` documents."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def usage_lines() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Usage", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if "run-mcp" in line]


def test_the_installed_run_mcp_command_runs() -> None:
    script = Path(sys.executable).parent / "run-mcp"
    assert script.is_file(), "pip install -e . puts run-mcp beside the venv's python"
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("run_mcp.py "), proc.stderr


def test_every_flag_in_the_readme_usage_is_a_real_flag() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run_mcp.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    documented = set(re.findall(r"(?<![\w-])(-{1,2}[A-Za-z][\w-]*)", proc.stdout))
    lines = usage_lines()
    assert len(lines) >= 10
    used = {
        word.split("=")[0]
        for line in lines
        for word in shlex.split(line.split("|")[-1])
        if word.startswith("-") and word != "-"
    }
    assert used and used <= documented, sorted(used - documented)
