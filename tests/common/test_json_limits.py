"""JSON from others read within a depth limit (agent/common/json_limits.py): nesting a
thousand deep is one error of that input, never a RecursionError's traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.common import json_limits
from tests.support.cli import run_cli


@pytest.mark.parametrize("depth", [65, 5_000])
def test_too_deep_is_a_json_error_every_caller_already_catches(depth: int) -> None:
    text = "[" * depth + "]" * depth
    with pytest.raises(json.JSONDecodeError, match="nested deeper than 64 levels"):
        json_limits.loads(text)
    assert json_limits.loads("[" * 64 + "]" * 64) is not None


def test_a_servers_file_nested_thousands_deep_is_one_line(tmp_path: Path) -> None:
    """A JSON-with-comments file (Zed's, VS Code's) read by the clients' reader: before,
    a RecursionError ended the run with a traceback."""
    deep = tmp_path / "settings.json"
    deep.write_text('{"context_servers": ' + "[" * 5_000 + "]" * 5_000 + "}")
    proc = run_cli(["--mcp-config", str(deep), "-p", "hi"], tmp_path, base_url=None)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line == f"error: {deep}: JSON nested deeper than 64 levels", line
