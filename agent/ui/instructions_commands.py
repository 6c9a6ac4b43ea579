"""`/memory` and `/init`: the instructions files (AGENTS.md) of this session, and a starting
`AGENTS.md` for the project, written from what the model reads of it.

`/memory` shows what agent/extensions/instructions.py put in the system prompt at the
session's start (path, size, cut or whole), and the project's files left unread because the
folder is not trusted. `/init` is a normal turn with a fixed request (Codex's /init): the
model reads the project with its tools and answers with the file; the answer is written to
the working directory's `AGENTS.md` (a new file put in place whole: a link of that name is
replaced, never written through), after asking when one is already there.

May import: the loop and everything below it (the ui layer).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from rich.console import Console
from rich.text import Text

from agent.common.memory import Memory, Message
from agent.config.files import user_config_dir
from agent.config.instruction_files import USER_FILE, workspace_files
from agent.config.settings import Settings
from agent.extensions.instructions import cap_bytes
from agent.loop.tool_offer import TERMINATE
from agent.ui.safe import clean

Handler = Callable[[str], Awaitable[None]]
Question = Callable[[str], Awaitable[str | None]]
INIT_REQUEST = """\
Write this project's AGENTS.md: the instructions a coding agent needs to work here. \
First read the project with your tools: its README, its build, package and CI files, and \
how its source and tests are laid out. Then answer with the content of the file only: \
Markdown, under 200 lines, no preface and no code fence around it. Where they apply, use \
these sections: Project structure; Build, test and run (the exact commands); Code style; \
Testing; Commits and pull requests. Be specific to this project, short and direct; never \
invent a command you did not see. Your answer is saved as {path}."""


def table(
    console: Console,
    memory: Memory,
    settings: Settings,
    question: Question,
    run_turn: Callable[[str], Awaitable[None]],
) -> tuple[tuple[str, str, Handler], ...]:
    """(name, help, handler) of /memory and /init, for the REPL's command table."""

    async def memory_command(arg: str) -> None:
        show_memory(console, memory, settings)

    async def init_command(arg: str) -> None:
        await init(console, memory, settings.workspace, question, run_turn)

    return (
        ("memory", "the instructions files (AGENTS.md) in force, and skipped ones", memory_command),
        ("init", "write a starting AGENTS.md for this project (the model reads it)", init_command),
    )


def show_memory(console: Console, memory: Memory, settings: Settings) -> None:
    """Each file in the system prompt (whole, cut, unreadable), then the skipped ones."""
    for found in memory.files:
        if found.problem:
            said = f"not read: {found.problem}"
        elif found.kept < found.size:
            said = f"{found.size} bytes, cut: the first {found.kept} are in the prompt"
        else:
            said = f"{found.size} bytes, whole"
        console.print(Text(clean(f"{found.path}  {said}")))
    if memory.files:
        cap = cap_bytes(settings.llm.context_window)
        console.print(Text(f"in the system prompt, {cap} bytes at most in all", style="dim"))
    skipped = () if settings.workspace_trusted else workspace_files(settings.workspace)
    for path in skipped:
        said = f"{path}  skipped: this folder is not trusted (run_mcp.py trust)"
        console.print(Text(clean(said), style="yellow"))
    if not memory.files and not skipped:
        folder = user_config_dir(os.environ)
        yours = folder / USER_FILE if folder else f"$XDG_CONFIG_HOME/mcp-agent/{USER_FILE}"
        said = f"no instructions files: /init writes this project's AGENTS.md; yours go in {yours}"
        console.print(Text(clean(said), style="dim"))


async def init(
    console: Console,
    memory: Memory,
    workspace: Path,
    question: Question,
    run_turn: Callable[[str], Awaitable[None]],
) -> None:
    """The turn that writes AGENTS.md; an existing one is replaced only on a "y"."""
    target = workspace / "AGENTS.md"
    if await anyio.to_thread.run_sync(os.path.lexists, target):
        reply = await question(f"{target} exists: replace it with a new one? [y/N] ")
        if (reply or "").strip().lower() not in ("y", "yes"):
            console.print(Text(clean(f"kept {target} as it is"), style="dim"))
            return
    before = len(memory.messages)
    await run_turn(INIT_REQUEST.format(path=target))
    content = _unfenced(_answer(memory.messages[before:]))
    if not content:
        console.print(Text("no AGENTS.md written: the turn ended without an answer", "yellow"))
        return
    try:
        await anyio.to_thread.run_sync(_write_whole, target, content + "\n")
    except OSError as exc:
        console.print(Text(clean(f"cannot write {target}: {exc.strerror}"), style="yellow"))
        return
    console.print(
        Text(
            clean(
                f"wrote {target} ({len(content.encode()) + 1} bytes): review it; the sessions "
                "started here put it in the system prompt"
            ),
            style="dim",
        )
    )


def _answer(messages: list[Message]) -> str:
    """The turn's answer: its last assistant message's text, or its `terminate` answer."""
    for message in reversed(messages):
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name") == TERMINATE:
                try:
                    answer = json.loads(function.get("arguments") or "{}").get("answer")
                except (ValueError, AttributeError):
                    answer = None
                return answer if isinstance(answer, str) else ""
        return "" if message.get("tool_calls") else str(message.get("content") or "")
    return ""


def _unfenced(text: str) -> str:
    """The answer without a code fence around all of it (models add one when told not to)."""
    text = text.strip()
    lines = text.splitlines()
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1]).strip()
    return text


def _write_whole(target: Path, content: str) -> None:
    """A new file put in place at once: a reader never sees half of it, and a link named
    AGENTS.md is replaced rather than followed to wherever it points."""
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".AGENTS.md.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
