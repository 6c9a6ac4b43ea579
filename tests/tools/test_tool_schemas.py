"""Tool input schemas with `$defs`/`$ref` (JSON Schema 2020-12), as the model gets them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text
from tests.support.servers import SUPPORT


def test_local_refs_are_inlined_and_a_cycle_or_a_bomb_skips_that_tool(tmp_path: Path) -> None:
    """`place_order` reaches the model with its `$ref`s expanded and no `$defs`; `tree`
    (a cycle) and `bomb` (2**20 nodes) are skipped, each named in a warning."""
    command = f"{sys.executable} {SUPPORT / 'raw_server.py'} refs"
    args = ["--server-command", command, "--server-name", "refs", "-p", "hi"]
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    offered = {t["function"]["name"]: t["function"] for t in llm.requests[0]["tools"]}
    assert sorted(offered) == ["refs__place_order", "task", "terminate", "update_plan"]
    schema = offered["refs__place_order"]["parameters"]
    assert "$ref" not in json.dumps(schema) and "$defs" not in schema
    line = schema["properties"]["lines"]["items"]
    assert line["properties"]["item"]["required"] == ["sku"]
    assert "skipped tool 'tree': its inputSchema refers to itself (#/$defs/Node)" in proc.stderr
    assert "skipped tool 'bomb': its inputSchema's $refs expand to more than" in proc.stderr
