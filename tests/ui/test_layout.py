"""Layout on narrow and wide consoles: tables that stack, indents that survive wrapping,
answers whose single newlines stay line breaks."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from agent.tools.toolspec import ToolSpec
from agent.ui.layout import AnswerMarkdown, Column, Indented, show_table
from agent.ui.listings import find_tools, hint_words, own_name, show_tools


def render(width: int, *renderables: object, soft_wrap: bool = False) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None, soft_wrap=soft_wrap)
    for renderable in renderables:
        console.print(renderable)
    return out.getvalue()


def test_single_newlines_in_an_answer_stay_line_breaks() -> None:
    answer = "DONE 1 calls\nRESULT ok\n\nA **new** paragraph"
    assert render(80, Markdown(answer)).splitlines()[0].rstrip() == "DONE 1 calls RESULT ok"
    lines = [line.rstrip() for line in render(80, AnswerMarkdown(answer)).splitlines()]
    assert lines == ["DONE 1 calls", "RESULT ok", "", "A new paragraph"]


def test_wrapped_lines_keep_their_indent_and_have_no_trailing_padding() -> None:
    text = Text("alpha beta gamma delta " * 6 + "\nsecond line")
    lines = render(30, Indented(text, 4)).splitlines()
    assert len(lines) > 3 and all(line.startswith("    ") for line in lines)
    assert all(len(line) <= 30 and not line.endswith("  ") for line in lines)
    # into a pipe (soft wrap) a line is never cut, only indented
    piped = render(30, Indented(text, 4), soft_wrap=True).splitlines()
    assert piped == ["    " + ("alpha beta gamma delta " * 6).rstrip(" ") + " ", "    second line"]


COLUMNS = [
    Column("name", key=True),
    Column("hints", stacked="head"),
    Column("description"),
]
ROWS = [
    ["everything__trigger-long-running-operation", "read-only", "Demonstrates progress " * 4],
    ["time__get_current_time", "read-only", "Get current time in a specific timezone"],
]


def test_a_table_that_fits_is_a_table_and_keys_are_never_cut() -> None:
    out = io.StringIO()
    console = Console(file=out, width=150, color_system=None)
    show_table(console, COLUMNS, ROWS)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["name", "hints", "description"]
    assert "everything__trigger-long-running-operation  read-only" in lines[1]


def test_a_table_too_wide_stacks_each_row_under_its_whole_key() -> None:
    out = io.StringIO()
    console = Console(file=out, width=50, color_system=None)
    show_table(console, COLUMNS, ROWS)
    lines = out.getvalue().splitlines()
    assert lines[0] == "everything__trigger-long-running-operation"  # whole, on its own line
    assert lines[1] == "  read-only"  # no room beside it
    assert "time__get_current_time · read-only" in lines
    assert all(len(line) <= 50 for line in lines)
    assert all(line.startswith("  ") for line in lines if "Demonstrates" in line)


def spec(server: str, name: str, **hints: Any) -> ToolSpec:
    return ToolSpec(server=server, name=name, description="d", input_schema={}, **hints)


def test_a_renamed_tool_is_found_and_shown_by_its_servers_own_name() -> None:
    tools = {"db_x__db_query_1a2b3c4d": spec("db.x", "db.query"), "t__now": spec("t", "now")}
    assert find_tools(tools, "db.query") == [
        ("db_x__db_query_1a2b3c4d", tools["db_x__db_query_1a2b3c4d"])
    ]
    assert find_tools(tools, "t__now") == [("t__now", tools["t__now"])]
    assert own_name("t__now", tools["t__now"]) == ""
    out = io.StringIO()
    show_tools(Console(file=out, width=150, color_system=None), tools)
    assert out.getvalue().splitlines()[0].split()[:3] == ["name", "server's", "name"]
    assert "db_x__db_query_1a2b3c4d  db.query" in out.getvalue()


def test_hint_words_name_every_annotation() -> None:
    assert hint_words(spec("s", "t", read_only=True, idempotent=True, open_world=False)) == [
        "read-only",
        "idempotent",
        "closed world",
    ]
    assert hint_words(spec("s", "t", destructive=False)) == [
        "writes",
        "not destructive",
        "open world",
    ]
