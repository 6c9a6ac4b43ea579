"""The bundled server's tools are bounded in time and memory whatever the input.

In-process through the real SDK client: the server shares the test's event loop, so a tool
that froze the server (a regex holding the GIL, a FIFO open blocking a thread forever)
would freeze the test too; every wait is bounded by anyio.fail_after.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent.server.app import build_server
from tests.support.servers import call

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    async with Client(build_server(tmp_path)) as c:
        yield c


async def test_a_catastrophic_regex_is_stopped_and_never_freezes_the_server(
    client: Client, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("found here\n" + "a" * 64 + "!\n")
    outcome: list[tuple[str, bool]] = []

    async def search() -> None:
        outcome.append(await call(client, "search_files", pattern="(a+)+$|found", timeout=2))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(search)
            now, is_error = await call(client, "get_current_time", timezone="UTC")
            assert not is_error and "UTC" in now
            assert not outcome, "the server answered only after the search ended"
    [(text, is_error)] = outcome
    assert not is_error
    assert text.startswith("a.txt:1: found here")  # what it found before the deadline
    assert "search stopped after 2 s" in text and "(a+)+" in text


async def test_read_file_reads_only_the_range_of_a_huge_file(
    client: Client, tmp_path: Path
) -> None:
    big = tmp_path / "big.log"
    with big.open("wb") as fh:
        fh.write(b"".join(b"line %d\n" % n for n in range(1, 3001)))
        fh.truncate(4 * 1024**3)  # 4 GB, sparse: read whole it would not fit in memory
    with anyio.fail_after(60):
        text, is_error = await call(client, "read_file", path="big.log", offset=3, limit=2)
    assert not is_error
    assert text == "line 3\nline 4\n\n[lines 3-4 of more than 4; next: offset=5]"


async def test_read_file_of_a_long_line_is_cut_not_read_whole(
    client: Client, tmp_path: Path
) -> None:
    (tmp_path / "one.txt").write_text("x" * 1_000_000 + "\nsecond\n")
    with anyio.fail_after(30):
        text, is_error = await call(client, "read_file", path="one.txt", limit=1)
    assert not is_error and "[cut at 200000 characters" in text
    assert len(text) < 200_100


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {}),
        ("edit_file", {"old_text": "a", "new_text": "b"}),
        ("write_file", {"content": "data"}),
    ],
)
async def test_a_fifo_is_refused_never_waited_on(
    client: Client, tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    os.mkfifo(tmp_path / "pipe")
    with anyio.fail_after(30):
        text, is_error = await call(client, tool, path="pipe", **arguments)
    assert is_error and "not a regular file" in text


async def test_search_passes_over_a_fifo(client: Client, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "notes.txt").write_text("needle\n")
    with anyio.fail_after(30):
        text, is_error = await call(client, "search_files", pattern="needle")
    assert (text, is_error) == ("notes.txt:1: needle", False)


async def test_a_bad_pattern_is_a_clear_error(client: Client) -> None:
    text, is_error = await call(client, "search_files", pattern="(unclosed")
    assert is_error and "invalid regular expression: missing )" in text
