"""One copy of each result for the model: server-filesystem returns a file as text and as
structuredContent; the request the model receives holds it once, while --output json and
the transcript keep both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import npm_server_js

pytestmark = pytest.mark.slow


def test_a_file_read_reaches_the_model_once_and_the_record_keeps_both(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    marker = "UNIQUE-MARKER-41"
    (docs / "notes.txt").write_text(f'{marker} with "quotes"\n' * 200)
    server = {"command": "node", "args": [str(npm_server_js("server-filesystem")), str(docs)]}
    config = mcp_json(tmp_path, {"files": server})
    script = [
        tool_calls(("files__read_text_file", {"path": str(docs / "notes.txt")})),
        text("read it"),
    ]
    with ScriptedLLM(*script) as llm:
        args = ["--mcp-config", str(config), "-p", "read notes", "--output", "json"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    sent = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert sent[0].count(marker) == 200  # once per line of the file, not twice
    assert "structured content" not in sent[0]
    call = json.loads(proc.stdout)["tool_calls"][0]
    assert call["output"].count(marker) == 200
    assert call["structured_content"]["content"].count(marker) == 200
    transcript = next((tmp_path / "state" / "sessions").glob("*.jsonl")).read_text()
    tool_record = next(
        json.loads(line)["message"] for line in transcript.splitlines() if '"role": "tool"' in line
    )
    assert tool_record["content"].count(marker) == 200
    assert tool_record["structured_content"]["content"].count(marker) == 200
    llm.assert_complete()
