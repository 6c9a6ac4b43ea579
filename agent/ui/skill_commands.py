"""`/skills` and `/skill NAME [request]`: the skills of this session, and one loaded into a
turn (its full text travels with the request, as if the model had loaded it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rich.console import Console
from rich.text import Text

from agent.extensions.skill_files import one_line
from agent.extensions.skills import SkillRefused, Skills
from agent.ui.layout import Column, show_table

DEFAULT_REQUEST = "Follow this skill."


async def refresh_and_list(console: Console, skills: Skills) -> None:
    """`/skills`: every skill with where it comes from (servers are asked again)."""
    with console.status(Text("listing…", style="dim")):
        await skills.refresh()
    for server, error in skills.errors.items():
        console.print(Text(f"{server}: {error}", style="yellow"))
    if not skills.all:
        console.print(
            Text(
                "no skills (put one in <config>/skills/NAME/SKILL.md, or in the project's "
                ".mcp-agent/skills or .claude/skills once the folder is trusted)",
                style="dim",
            )
        )
        return
    columns = [
        Column("skill", key=True),
        Column("source", stacked="head", style="dim"),
        Column("description"),
    ]
    rows = [
        [
            s.handle,
            s.source + (" (loaded)" if s.handle in skills.held else ""),
            one_line(s.description),
        ]
        for s in skills.all
    ]
    show_table(console, columns, rows)
    console.print(Text("use one in a turn with /skill NAME [request]", style="dim"))


async def use_skill(
    console: Console, skills: Skills, arg: str, run_turn: Callable[[str], Awaitable[None]]
) -> None:
    """`/skill NAME [request]`: load the skill (checked like the model's own loads) and run
    the request (or "Follow this skill.") with its text attached."""
    name, _, request = arg.partition(" ")
    if not name:
        console.print(Text("usage: /skill NAME [request]", style="yellow"))
        return
    if skills.find(name) is None:
        await skills.refresh()  # maybe published since
    try:
        text = await skills.load(name)
    except SkillRefused as exc:
        console.print(Text(str(exc), style="red"))
        return
    await run_turn(f"{request.strip() or DEFAULT_REQUEST}\n\n{text}")
