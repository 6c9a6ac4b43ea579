"""The bundled server (`python -m agent.server`): its tools, their limits, every transport.

Most tests talk to the server in-process through the real SDK client (`Client(server)`), which
runs the full MCP protocol without a subprocess; the transport tests start the real process.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client

from agent.server.app import OUTPUT_CAP, build_server
from agent.server.shell import run_bash
from agent.server.workspace import Workspace
from tests.support.processes import alive
from tests.support.servers import REPO_ROOT, bundled_server, call

pytestmark = pytest.mark.anyio

READ_ONLY_TOOLS = {"read_file", "list_dir", "search_files", "get_current_time"}
CHANGING_TOOLS = {"bash", "write_file", "edit_file"}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("def main():\n    return 42\n")
    (tmp_path / "secret.txt").write_text("outside the workspace\n")
    return root


@pytest.fixture
async def client(workspace: Path) -> AsyncIterator[Client]:
    async with Client(build_server(workspace)) as c:
        yield c


async def test_tools_have_titles_and_honest_annotations(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == READ_ONLY_TOOLS | CHANGING_TOOLS
    for name, tool in tools.items():
        assert tool.title and tool.description, name
        hints = tool.annotations
        assert hints is not None
        assert hints.read_only_hint is (name in READ_ONLY_TOOLS), name
        assert hints.destructive_hint is (name in CHANGING_TOOLS), name
    assert tools["bash"].annotations.open_world_hint is True  # type: ignore[union-attr]
    assert tools["bash"].input_schema["required"] == ["command"]
    assert "Paths are relative to it" in (client.instructions or "")


async def test_read_file_whole_and_in_ranges(client: Client, workspace: Path) -> None:
    assert await call(client, "read_file", path="notes.txt") == ("alpha\nbeta\ngamma\n", False)
    text, is_error = await call(client, "read_file", path="notes.txt", offset=2, limit=1)
    assert not is_error
    assert text == "beta\n\n[lines 2-2 of 3; next: offset=3]"
    text, _ = await call(client, "read_file", path=str(workspace / "src" / "main.py"))
    assert "return 42" in text  # an absolute path inside the workspace is fine


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("missing.txt", "'missing.txt' does not exist"),
        ("src", "is a directory"),
        ("blob.bin", "binary file"),
    ],
)
async def test_read_file_refusals_say_why(
    client: Client, workspace: Path, path: str, expected: str
) -> None:
    (workspace / "blob.bin").write_bytes(b"\x89PNG\x00\x00binary")
    text, is_error = await call(client, "read_file", path=path)
    assert is_error and expected in text


@pytest.mark.parametrize("tool", ["read_file", "write_file", "edit_file", "list_dir"])
@pytest.mark.parametrize("escape", ["../secret.txt", "src/../../secret.txt", "ABS", "LINK"])
async def test_file_tools_refuse_paths_outside_the_workspace(
    client: Client, workspace: Path, tool: str, escape: str
) -> None:
    outside = workspace.parent / "secret.txt"
    (workspace / "link").symlink_to(outside)
    path = {"ABS": str(outside), "LINK": "link"}.get(escape, escape)
    arguments = {
        "read_file": {"path": path},
        "write_file": {"path": path, "content": "pwned"},
        "edit_file": {"path": path, "old_text": "outside", "new_text": "pwned"},
        "list_dir": {"path": path},
    }[tool]
    text, is_error = await call(client, tool, **arguments)
    assert is_error
    assert "outside the workspace" in text
    assert outside.read_text() == "outside the workspace\n"


async def test_symlinked_directory_out_of_the_workspace_is_refused(
    client: Client, workspace: Path
) -> None:
    (workspace / "escape").symlink_to(workspace.parent, target_is_directory=True)
    text, is_error = await call(client, "write_file", path="escape/new.txt", content="x")
    assert is_error and "outside the workspace" in text
    assert not (workspace.parent / "new.txt").exists()
    listing, _ = await call(client, "list_dir")
    assert "escape@" in listing  # shown as a link, its target never stat'ed


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(["..", ".", "src", "a", "b", "~"]), min_size=1, max_size=6))
def test_every_resolved_path_is_inside_the_root_or_refused(
    tmp_path: Path, parts: list[str]
) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    root = tmp_path / "root"
    (root / "src").mkdir(parents=True, exist_ok=True)
    ws = Workspace.at(root)
    try:
        resolved = ws.resolve("/".join(parts))
    except ToolError as exc:
        assert "outside the workspace" in str(exc)
    else:
        assert resolved == ws.root or resolved.is_relative_to(ws.root)


async def test_write_file_creates_parents_and_reports(client: Client, workspace: Path) -> None:
    text, is_error = await call(client, "write_file", path="deep/er/new.txt", content="héllo")
    assert not is_error and text == "created deep/er/new.txt (6 bytes)"
    assert (workspace / "deep" / "er" / "new.txt").read_text() == "héllo"
    text, _ = await call(client, "write_file", path="deep/er/new.txt", content="again")
    assert text.startswith("overwrote")


async def test_edit_file_replaces_exact_unique_text(client: Client, workspace: Path) -> None:
    target = workspace / "src" / "main.py"
    text, is_error = await call(
        client, "edit_file", path="src/main.py", old_text="return 42", new_text="return 43"
    )
    assert (text, is_error) == ("replaced 1 occurrence in src/main.py", False)
    assert target.read_text() == "def main():\n    return 43\n"

    text, is_error = await call(
        client, "edit_file", path="src/main.py", old_text="nope", new_text=""
    )
    assert is_error and "not found" in text

    target.write_text("x = 1\nx = 1\n")
    text, is_error = await call(
        client, "edit_file", path="src/main.py", old_text="x = 1", new_text="y"
    )
    assert is_error and "appears 2 times" in text
    assert target.read_text() == "x = 1\nx = 1\n"  # an ambiguous edit changes nothing
    text, is_error = await call(
        client, "edit_file", path="src/main.py", old_text="x = 1", new_text="y", replace_all=True
    )
    assert not is_error and target.read_text() == "y\ny\n"


async def test_list_dir_and_search_files(client: Client, workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("return 42 in git internals\n")
    listing, is_error = await call(client, "list_dir")
    assert not is_error
    assert listing.splitlines()[:2] == [".git/", "src/"]  # directories first
    assert "notes.txt  17 B" in listing

    found, _ = await call(client, "search_files", pattern=r"return \d+")
    assert found == "src/main.py:2:     return 42"  # .git is skipped
    found, _ = await call(client, "search_files", pattern="a$", glob="*.txt")
    assert found.splitlines() == ["notes.txt:1: alpha", "notes.txt:2: beta", "notes.txt:3: gamma"]
    assert await call(client, "search_files", pattern="zzz") == ("no matches", False)
    text, is_error = await call(client, "search_files", pattern="(unclosed")
    assert is_error and "invalid regular expression" in text


async def test_get_current_time_names_the_zone(client: Client) -> None:
    result = await client.call_tool("get_current_time", {"timezone": "Asia/Tokyo"})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["timezone"] == "Asia/Tokyo"
    assert result.structured_content["datetime"].endswith("+09:00")
    default = await client.call_tool("get_current_time", {})
    assert default.structured_content and default.structured_content["timezone"]
    text, is_error = await call(client, "get_current_time", timezone="Mars/Olympus")
    assert is_error and "unknown time zone 'Mars/Olympus'" in text


async def test_bash_runs_in_the_workspace_and_reports_the_exit_code(client: Client) -> None:
    text, is_error = await call(
        client, "bash", command="cat notes.txt | wc -l; echo oops >&2; exit 3"
    )
    assert not is_error
    assert text == "3\noops\n[exit code 3]"


async def _wait_dead(pid: int) -> None:
    with anyio.fail_after(5):
        while alive(pid):  # noqa: ASYNC110 - no event to wait on for a foreign pid
            await anyio.sleep(0.02)


async def test_bash_timeout_kills_the_whole_process_group(client: Client, workspace: Path) -> None:
    command = "sleep 60 & echo $! > child.pid; echo started; wait"
    with anyio.fail_after(10):
        text, is_error = await call(client, "bash", command=command, timeout=0.5)
    assert is_error and "timed out after 0.5 s" in text and "started" in text
    await _wait_dead(int((workspace / "child.pid").read_text()))


async def test_cancelled_bash_kills_the_whole_process_group(tmp_path: Path) -> None:
    with anyio.move_on_after(0.5):
        await run_bash("sleep 60 & echo $! > child.pid; wait", tmp_path, 60, OUTPUT_CAP)
    await _wait_dead(int((tmp_path / "child.pid").read_text()))


async def test_bash_output_is_capped_keeping_head_and_tail(tmp_path: Path) -> None:
    result = await run_bash(
        "echo START; head -c 300000 /dev/zero | tr '\\0' x; echo; echo END", tmp_path, 30, 1000
    )
    assert result.exit_code == 0
    assert result.output.startswith("START") and result.output.rstrip().endswith("END")
    assert result.cut_bytes > 290_000
    assert f"[… {result.cut_bytes} bytes of output cut …]" in result.output


async def test_bash_background_job_does_not_hold_the_call(tmp_path: Path) -> None:
    with anyio.fail_after(5):
        result = await run_bash("sleep 30 & echo $! > bg.pid; echo quick", tmp_path, 30, OUTPUT_CAP)
    assert result.output == "quick\n" and result.exit_code == 0
    os.kill(int((tmp_path / "bg.pid").read_text()), signal.SIGKILL)


# -- the real process over every transport ----------------------------------------------------


async def _exercise(c: Client, workspace: Path) -> None:
    names = {tool.name for tool in (await c.list_tools()).tools}
    assert names == READ_ONLY_TOOLS | CHANGING_TOOLS
    text, is_error = await call(c, "read_file", path="notes.txt")
    assert (text, is_error) == ("alpha\nbeta\ngamma\n", False)
    text, is_error = await call(c, "read_file", path="../secret.txt")
    assert is_error and "outside the workspace" in text
    text, _ = await call(c, "bash", command="pwd")
    assert text.splitlines()[0] == str(workspace)  # tmp_path is already resolved


async def test_stdio_transport(workspace: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent.server", "--root", str(workspace)],
        env={"PYTHONPATH": str(REPO_ROOT)},
    )
    with open(tmp_path / "stderr.log", "w") as errlog, anyio.fail_after(30):  # noqa: ASYNC230
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as c:
            await _exercise(c, workspace)


@pytest.mark.parametrize("transport", ["sse", "http"])
async def test_network_transports(transport: str, workspace: Path, tmp_path: Path) -> None:
    with bundled_server(transport, REPO_ROOT, tmp_path, workspace=workspace) as url:  # type: ignore[arg-type]
        server = sse_client(url) if transport == "sse" else url
        with anyio.fail_after(30):
            async with Client(server, mode="legacy") as c:
                await _exercise(c, workspace)


def test_a_root_that_is_not_a_directory_is_a_clear_error(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "agent.server", "--root", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: workspace root {tmp_path / 'nope'} is not a directory"
