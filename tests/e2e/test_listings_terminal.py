"""/tools, /resources, /prompts and /servers in a real terminal (tmux) 60 and 150 columns
wide: readable at both, and never a cut name or URI (what a user has to type)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.support.fake_llm import ScriptedLLM
from tests.support.servers import REPO_ROOT, everything_stdio_command
from tests.support.terminal import (
    HEIGHT,
    PROMPT,
    Terminal,
    agent_env,
    needs_tmux,
    terminals,
    workspace,
)

__all__ = ["terminals", "workspace"]  # the shared fixtures
pytestmark = needs_tmux

LONG_TOOL = "everything__trigger-long-running-operation"
DOC = "@everything:demo://resource/static/document/architecture.md"


def open_repl(
    terminals: list[Terminal], workspace: Path, columns: int, llm: ScriptedLLM, rows: int = HEIGHT
) -> Terminal:
    command, args = everything_stdio_command()
    config = workspace.parent / "mcp.json"
    bundled = [sys.executable, "-m", "agent.server", "--root", str(workspace)]
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "everything": {"command": command, "args": args},
                    "local": {"command": bundled[0], "args": bundled[1:]},
                }
            }
        )
    )
    terminal = Terminal(
        [sys.executable, str(REPO_ROOT / "run_mcp.py"), "--mcp-config", str(config)],
        cwd=workspace,
        env=agent_env(llm.base_url, workspace.parent / "state"),
        log=workspace.parent / f"listings-{columns}x{rows}.screen.txt",
        width=columns,
        height=rows,
    )
    terminals.append(terminal)
    terminal.wait_for(r"tools from 2 server", timeout=60)
    terminal.wait_for(PROMPT)
    return terminal


def command_output(terminal: Terminal, command: str) -> list[str]:
    """The screen lines a command printed, up to the next prompt."""
    mark = terminal.mark()
    terminal.type(command)
    terminal.wait_for(re.escape(command) + r"\n(.|\n)*" + PROMPT, after=mark)
    text = terminal.screen()[mark:]
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.endswith(command))
    end = next(i for i in range(start + 1, len(lines)) if re.fullmatch(r"› ?", lines[i]))
    return lines[start + 1 : end]


@pytest.mark.parametrize("columns", [60, 150])
def test_listings_fit_the_terminal_and_never_cut_a_name(
    workspace: Path, terminals: list[Terminal], columns: int
) -> None:
    with ScriptedLLM() as llm:
        term = open_repl(terminals, workspace, columns, llm)
        tools = command_output(term, "/tools")
        resources = command_output(term, "/resources")
        prompts = command_output(term, "/prompts")
        servers = command_output(term, "/servers")
        term.leave()
    for lines in (tools, resources, prompts, servers):
        assert lines and all(len(line) <= columns for line in lines), "\n".join(lines)
        assert not any("…" in line and "everything__" in line for line in lines)
    if columns == 60:  # the full listing would be taller than the screen: names only
        assert "everything · 16 tools · /tools everything for details" in tools
        assert "local · 7 tools · /tools local for details" in tools
        words = " ".join(tools).split()
        assert "trigger-long-running-operation" in words and "write_file" in words
    else:
        starts = [line.strip().split(" ")[0] for line in tools]
        assert LONG_TOOL in starts and "local__write_file" in starts  # whole, at line start
    assert any(line.strip().startswith(DOC) for line in resources)
    assert any(
        "@everything:demo://resource/dynamic/text/{resourceId}" in line for line in resources
    )
    if columns == 60:  # stacked: the name heads each block
        joined = " ".join(" ".join(servers).split())
        assert "everything stdio · ready" in joined and "local · stdio · ready" in joined
    else:
        server_rows = [line.split() for line in servers]
        assert server_rows[1][:3] == ["everything", "stdio", "ready"]
        assert server_rows[2][:3] == ["local", "stdio", "ready"]
    if columns == 60:  # stacked: a block per row, details indented under the whole name
        assert resources[resources.index(DOC) + 1] == "  architecture.md · text/markdown"
        assert "args-prompt · everything" in prompts
        assert "  arguments: city state?" in prompts
    else:  # columns, one row per line
        assert tools[0].split() == ["name", "title", "hints", "description"]
        assert re.search(
            rf"^ {LONG_TOOL}\s+Trigger Long Running Operation Tool\s+read-only\s+Demo",
            "\n".join(tools),
            re.M,
        )
        assert re.search(
            rf"^ {re.escape(DOC)}\s+architecture\.md\s+text/markdown", "\n".join(resources), re.M
        )
        assert re.search(
            r"^ args-prompt\s+everything\s+city state\?\s+A prompt", "\n".join(prompts), re.M
        )


@pytest.mark.parametrize("size", [(60, 20), (100, 30)], ids=["60x20", "100x30"])
def test_tools_fits_the_screen_pages_the_rest_and_says_when_there_are_none(
    workspace: Path, terminals: list[Terminal], size: tuple[int, int]
) -> None:
    """`/tools` never scrolls past the screen: the full table when it fits, else each
    server's names with `/tools SERVER` for details; a listing taller than the screen goes
    through the pager. With every server off it says so, and how to turn one on."""
    columns, rows = size
    with ScriptedLLM() as llm:
        term = open_repl(terminals, workspace, columns, llm, rows)
        tools = command_output(term, "/tools")
        mark = term.mark()
        term.type("/tools everything")  # 16 tools with descriptions: taller than the screen
        term.wait_for(r"\n:[ ]*$", after=mark)  # less, at its first page
        paged = term.visible()
        term.send("q")
        term.wait_for(PROMPT, after=mark)
        command_output(term, "/servers disable everything")
        command_output(term, "/servers disable local")
        none = command_output(term, "/tools")
        term.leave()
    assert 0 < len(tools) <= rows - 2, "\n".join(tools)
    assert tools[0] == "everything · 16 tools · /tools everything for details"
    assert "local · 7 tools · /tools local for details" in tools
    assert all(len(line) <= columns for line in tools)
    words = " ".join(tools).split()
    assert "trigger-long-running-operation" in words and "write_file" in words
    assert "everything__echo" in paged and "everything__get-env" in paged, paged
    said = " ".join(" ".join(none).split())
    assert said == (
        "no tools: every server is off (everything, local); /servers enable NAME turns one on"
    ), none
