"""Scale: a server announcing far more tools than anyone needs is cut to a configurable
maximum with a warning naming it, and listing stops there (time in bench/run.py)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest

from agent.tools.mcp_stdio import WholeLines as _WholeLines
from agent.tools.registry import ToolRegistry
from agent.tools.toolcap import cut_tool_list
from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.processes import alive
from tests.support.servers import SUPPORT, fault_server_command, settings_for, stdio

MANY_SERVER = str(SUPPORT / "many_tools_server.py")


def many(count: int, page: int | None = None, **kw: object) -> object:
    args = [MANY_SERVER, str(count), *([str(page)] if page else [])]
    return stdio("many", (sys.executable, args), **kw)


@pytest.mark.anyio
async def test_a_50000_tool_server_is_cut_to_the_maximum_with_a_warning(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, many(50_000), max_tools_per_server=300)  # type: ignore[arg-type]
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            # the cut list still works: a tool from it is called through the server
            result = await registry.call("many__list_issue", {"id": "7"})
    assert len(registry.tools) == 300
    assert registry.servers["many"].status.tool_count == 300
    # the first 300 the server lists (verb x noun, no numbered variants), not its last one
    assert not any(name[-1].isdigit() for name in registry.tools)
    assert "many__translate_klingon" not in registry.tools
    [warning] = registry.warnings
    assert "server 'many' announced 50000 tools" in warning
    assert "only the first 300" in warning and "max_tools_per_server" in warning
    assert 'called list_issue with {"id": "7"}' in result.text


@pytest.mark.anyio
async def test_listing_stops_paginating_at_the_maximum(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, many(5_000, page=100), max_tools_per_server=250)  # type: ignore[arg-type]
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
    assert len(registry.tools) == 250
    [warning] = registry.warnings
    assert "announced more than 250 tools" in warning
    log = (tmp_path / "state" / "logs" / "many.log").read_text()
    assert "tools/list page 3" in log and "tools/list page 4" not in log


@pytest.mark.anyio
async def test_include_tools_reach_past_the_maximum(tmp_path: Path) -> None:
    wanted = ("translate_klingon", "get_issue")
    server = many(3_000, include_tools=wanted)
    settings = settings_for(tmp_path, server, max_tools_per_server=100)  # type: ignore[arg-type]
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
    assert sorted(registry.tools) == ["many__get_issue", "many__translate_klingon"]
    assert registry.warnings == []


@pytest.mark.anyio
async def test_under_the_maximum_nothing_is_cut(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, many(1_000, page=300))  # type: ignore[arg-type]
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
    assert len(registry.tools) == 1_000 and registry.warnings == []


@pytest.mark.anyio
async def test_stdout_is_handed_over_in_whole_lines() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](10)
    chunks = [b'{"a":', b" 1}\n{", b'"b": 2}\n{"c": 3}\n{"d"', b": 4}\n", b"tail"]
    async with send:
        for chunk in chunks:
            await send.send(chunk)
    stream = _WholeLines(receive)
    pieces = [piece async for piece in stream]
    assert pieces == ['{"a": 1}\n', '{"b": 2}\n{"c": 3}\n', '{"d": 4}\n', "tail"]


def test_after_the_answer_the_process_ends_with_its_servers_and_their_children(
    tmp_path: Path,
) -> None:
    """The answer is out (a whole JSON object, flushed) before the servers close, the process
    then ends at once (os._exit) and the server's process group is gone with it."""
    python, args = fault_server_command(tmp_path)
    command = " ".join([python, *args])
    script = [tool_calls(("f__spawn_child", {}), ("f__big", {"chars": 300_000})), text("done")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            [
                "--server-command",
                command,
                "--server-name",
                "f",
                "-y",
                "-p",
                "go",
                "--output",
                "json",
            ],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # all of it reached the pipe
    assert report["answer"] == "done" and report["tool_calls"][1]["output"].endswith("END")
    child = int(report["tool_calls"][0]["output"].splitlines()[-1])
    deadline = time.monotonic() + 5  # the group got SIGTERM; init may take a moment to reap
    while alive(child):
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            raise AssertionError(f"child {child} of the server outlived the agent")
        time.sleep(0.05)


def test_a_huge_tool_list_is_cut_while_it_is_decoded() -> None:
    schema = {"a": ']}, [ \\ "', "b": [1, {"c": None}]}
    tools = [{"name": f"t{i}", "inputSchema": schema} for i in range(9)]
    message = {"jsonrpc": "2.0", "id": 7, "result": {"tools": tools, "nextCursor": "9"}}
    cut = cut_tool_list(json.dumps(message, indent=1), 4)
    assert cut == ({**message, "result": {"tools": tools[:4], "nextCursor": "9"}}, 9)
    assert cut_tool_list('{"id": 1, "result": {"content": []}}', 4) is None  # not a tool list
    assert cut_tool_list('{"id": 1, "result": {"tools": [{}]', 4) is None  # cut short
    assert cut_tool_list('{"id": 1} trailing', 4) is None
