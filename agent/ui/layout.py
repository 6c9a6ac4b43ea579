"""Layout that stays readable on any width: tables that stack, indents that survive wrapping,
answers whose line breaks stay line breaks.

A table is shown as columns only when every column gets room to be read; otherwise each row
becomes a small block. Either way, what a user has to type (a tool name, `server:uri`) is
never cut: in a table its column keeps its full width, and stacked it heads its block.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markdown import Markdown
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

READABLE = 16  # the narrowest a wrapping column may get before the table stacks instead
INDENT = 2  # of the lines under a stacked row's head


class AnswerMarkdown(Markdown):
    """The model's answer as Markdown, except that a single newline stays a line break.

    CommonMark joins the lines of a paragraph ("soft breaks"); models write line-oriented
    text (`DONE 1 calls` / `RESULT …`) and mean every line, as chat front ends show it.
    """

    def __init__(self, markup: str, **options: Any) -> None:
        super().__init__(markup, **options)
        for token in self.parsed:
            for child in token.children or ():
                if child.type == "softbreak":
                    child.type = "hardbreak"


def wrap_words(text: str, width: int) -> str:
    """`text` with line breaks at spaces so that no line is wider than `width`: for a
    question handed to the input line, which would otherwise break it mid-word. A word wider
    than the line (a long path, an argument) stays whole and the terminal wraps it; the
    trailing space before the answer is kept."""
    if width < 10 or all(len(line) < width for line in text.split("\n")):
        return text
    tail = text[len(text.rstrip(" ")) :]
    lines = [
        "\n".join(
            textwrap.wrap(
                line,
                width - 1,
                break_long_words=False,
                break_on_hyphens=False,
                replace_whitespace=False,
                drop_whitespace=True,
            )
            or [""]
        )
        for line in text.rstrip(" ").split("\n")
    ]
    return "\n".join(lines) + tail


def print_path(console: Console, label: str, path: str, style: str = "") -> None:
    """`label path` on one line when it fits, else the label, then the path alone on its
    line and never broken by us (the terminal wraps a path wider than itself, and copying
    it gives it back whole): a path is something a person copies. Into a pipe or a file
    nothing wraps, so it stays one line there, for the programs that read it."""
    if not console.is_terminal or len(label) + 1 + len(path) <= console.width:
        console.print(Text(f"{label} {path}", style=style), soft_wrap=True)
        return
    console.print(Text(label, style=style))
    console.print(Text(path, style=style), soft_wrap=True)


class Indented:
    """`renderable` moved right by `indent` columns, also on the lines wrapping makes (rich's
    Padding would pad every line to the full width with trailing spaces)."""

    def __init__(self, renderable: RenderableType, indent: int = 4) -> None:
        self.renderable = renderable
        self.indent = indent

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if options.no_wrap:  # soft wrap (into a pipe or file): every line stays whole
            lines = list(Segment.split_lines(console.render(self.renderable, options)))
        else:
            width = max(1, options.max_width - self.indent)
            lines = console.render_lines(self.renderable, options.update_width(width), pad=False)
        for line in lines:
            yield Segment(" " * self.indent)
            yield from line
            yield Segment.line()


@dataclass(frozen=True)
class Column:
    """`key`: typed by the user, never cut or wrapped. `stacked` says where the cell goes
    when rows stack: on the head line after the keys (`head`), or on a line of its own
    (`line`); `label` names the value there (`tools 3`, `last error: …`)."""

    heading: str
    key: bool = False
    stacked: Literal["head", "line"] = "line"
    label: str = ""
    style: str = ""


Cell = str | Text


def show_table(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[Cell]]) -> None:
    """Columns when they all fit readably in the console's width, else one block per row."""
    cells = [[c if isinstance(c, Text) else Text(c) for c in row] for row in rows]
    if fits(console.width, columns, cells):
        console.print(_table(columns, cells))
        return
    for row in cells:
        for renderable in _stacked(columns, row, console.width):
            console.print(renderable)


def fits(width: int, columns: Sequence[Column], rows: Sequence[Sequence[Text]]) -> bool:
    """Keys at full width, every other column at least READABLE (or its longest cell)."""
    need = 0
    for i, column in enumerate(columns):
        longest = max([len(column.heading), *(row[i].cell_len for row in rows)])
        need += (longest if column.key else min(longest, READABLE)) + 2  # padding
    return need <= width


def _table(columns: Sequence[Column], rows: Sequence[Sequence[Text]]) -> Table:
    table = Table(box=None)
    for i, column in enumerate(columns):
        if column.key:
            longest = max([len(column.heading), *(row[i].cell_len for row in rows)])
            table.add_column(column.heading, no_wrap=True, min_width=longest, style=column.style)
        else:
            table.add_column(column.heading, overflow="fold", style=column.style)
    for row in rows:
        table.add_row(*row)
    return table


def _stacked(columns: Sequence[Column], row: Sequence[Text], width: int) -> list[RenderableType]:
    """The keys on a line, then the short `head` cells after a · (on a line of their own
    when the keys leave no room), then the other cells, each on its own line."""
    head, short = Text(), Text()
    for column, cell in zip(columns, row, strict=True):
        if not cell.plain.strip() or not (column.key or column.stacked == "head"):
            continue
        part = head if column.key else short
        if part:
            part.append("  " if column.key else " · ", style="dim")
        if column.label:
            part.append(f"{column.label} ", style="dim")
        part.append_text(_styled(cell, "bold" if column.key else column.style))
    out: list[RenderableType] = [head]
    if short and head.cell_len + 3 + short.cell_len <= width:
        head.append(" · ", style="dim")
        head.append_text(short)
    elif short:
        out.append(Indented(short, INDENT))
    for column, cell in zip(columns, row, strict=True):
        if column.key or column.stacked == "head" or not cell.plain.strip():
            continue
        line = Text(f"{column.label}: ", style="dim") if column.label else Text()
        line.append_text(_styled(cell, column.style))
        out.append(Indented(line, INDENT))
    return out


def _styled(cell: Text, style: str) -> Text:
    """The cell with `style` as its base (its own spans and style still win)."""
    if not style or cell.style:
        return cell
    styled = cell.copy()
    styled.style = style
    return styled
