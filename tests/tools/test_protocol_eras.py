"""Both protocol eras, through the CLI as a user runs it.

A server that speaks only 2026-07-28 must offer everything it has: with no `mode` (legacy
first, 2026-07-28 when refused) and with `"mode": "2026-07-28"` pinned, over stdio and
streamable HTTP. What counts is what the scripted model is offered and what the calls
return, not what a client object holds.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.tools.extensions import declared_names
from tests.support import modern_server
from tests.support.asgi_thread import serve
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls

MODERN_SCRIPT = str(Path(modern_server.__file__))


@pytest.fixture(scope="module")
def modern_http_url() -> Iterator[str]:
    with serve(modern_server.app(), lifespan="on") as port:
        yield f"http://127.0.0.1:{port}/mcp"


def _write_config(tmp_path: Path, entry: dict[str, Any]) -> list[str]:
    return ["--mcp-config", str(mcp_json(tmp_path, {"modern": entry}))]


def _modern_entry(transport: str, mode: str | None, url: str) -> dict[str, Any]:
    entry: dict[str, Any] = (
        {"command": sys.executable, "args": [MODERN_SCRIPT]}
        if transport == "stdio"
        else {"type": "http", "url": url}
    )
    return entry | ({"mode": mode} if mode else {})


def _tool_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


@pytest.mark.parametrize("mode", [None, "2026-07-28"], ids=["default-mode", "pinned"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_modern_only_server_offers_its_tools_resources_templates_and_prompts(
    tmp_path: Path, modern_http_url: str, transport: str, mode: str | None
) -> None:
    """One piped REPL run: /servers names the era; the first request offers `greet` and
    `read_resource` (naming the resource and the template); calling them returns their
    text; `/prompt welcome` sends the prompt's text as the turn."""
    args = _write_config(tmp_path, _modern_entry(transport, mode, modern_http_url))
    script = [
        tool_calls(
            ("modern__greet", {"name": "ada"}),
            ("read_resource", {"server": "modern", "uri": "notes://today"}),
            ("read_resource", {"server": "modern", "uri": "notes://day/monday"}),
        ),
        text("greeted"),
        text("welcomed"),
    ]
    lines = "/servers\ngreet ada\n/prompt welcome who=grace\n"
    with ScriptedLLM(*script) as llm:
        proc = run_cli([*args, "-i", "--yes"], tmp_path, base_url=llm.base_url, stdin=lines)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    first = llm.requests[0]
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert "modern__greet" in offered
    described = offered["read_resource"]["description"]
    assert "modern:notes://today" in described and "modern:notes://day/{day}" in described
    answers = _tool_texts(llm.requests[1]["messages"])
    wanted = ["hello ada", "the note of today", "the note of monday"]
    assert len(answers) == 3 and all(w in a for w, a in zip(wanted, answers, strict=True))
    prompt_turn = [m["content"] for m in llm.requests[2]["messages"] if m["role"] == "user"]
    assert "Please welcome grace warmly." in prompt_turn[-1]
    assert "modern speaks MCP 2026-07-28" in proc.stdout  # /servers shows the era


def test_a_dual_era_server_keeps_the_legacy_handshake_by_default(tmp_path: Path) -> None:
    """The bundled server speaks both eras: with no mode it gets `initialize` (2025-11-25),
    so nothing changes for the servers that worked before."""
    with ScriptedLLM() as llm:
        proc = run_cli(["-i"], tmp_path, base_url=llm.base_url, stdin="/servers\n")
    assert proc.returncode == 0, proc.stderr
    assert "local speaks MCP 2025-11-25" in proc.stdout and "2026-07-28" not in proc.stdout


def test_a_forced_legacy_mode_says_which_era_was_refused(
    tmp_path: Path, modern_http_url: str
) -> None:
    args = _write_config(tmp_path, _modern_entry("http", "legacy", modern_http_url))
    with ScriptedLLM() as llm:
        proc = run_cli([*args, "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 1  # no tool server is available
    assert "legacy handshake (initialize)" in proc.stderr
    assert "Unsupported protocol version" in proc.stderr
    assert llm.requests == []


def test_a_modern_server_sees_exactly_the_declared_extensions(tmp_path: Path) -> None:
    """What a 2026-07-28 server reads in the request's `_meta` is the agent's one list."""
    args = _write_config(tmp_path, _modern_entry("stdio", None, ""))
    script = [tool_calls(("modern__client_extensions", {})), text("listed")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli([*args, "-p", "which?", "--yes"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    (answer,) = _tool_texts(llm.requests[1]["messages"])
    assert json.dumps(declared_names()) in answer
