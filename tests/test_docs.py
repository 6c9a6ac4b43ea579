"""The documentation a newcomer reads: a short README whose links all lead somewhere, and
generated reference pages (flags, modules) that match the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_generated_flag_and_module_pages_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr


def test_the_readme_is_short_and_keeps_the_two_setup_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200
    assert "pip install -e . && .venv/bin/python run_mcp.py" in readme
    assert "bash .ci/run" in readme


def test_every_relative_link_in_the_docs_leads_to_a_file() -> None:
    pages = [ROOT / "README.md", ROOT / "bench" / "README.md", ROOT / "tests" / "README.md"]
    pages += sorted((ROOT / "docs").glob("*.md"))
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)", page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_the_tests_readme_names_every_folder_of_tests() -> None:
    """A newcomer finds a module's tests through tests/README.md's table of folders."""
    readme = (ROOT / "tests" / "README.md").read_text(encoding="utf-8")
    folders = sorted({path.parent.name for path in (ROOT / "tests").glob("*/test_*.py")})
    assert [name for name in folders if f"]({name}/)" not in readme] == []


def test_every_test_docs_security_md_names_exists() -> None:
    """docs/security.md is the map of every way in and out and the test that proves its
    guard: a renamed or deleted test must not leave the map pointing at nothing."""
    page = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    missing = []
    for path, name in re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", page):
        file = ROOT / path
        if not file.is_file():
            missing.append(path)
        elif name and f"def {name}(" not in file.read_text(encoding="utf-8"):
            missing.append(f"{path}::{name}")
    assert missing == [], missing
