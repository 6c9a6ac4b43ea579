"""The REPL driven headless, as the tests of its commands and turns run it: prompt-toolkit
pipe input (the lines typed), a rich console on a StringIO (what was shown)."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent.common.memory import Memory
from agent.common.transcript import Transcript
from agent.config.settings import Settings
from agent.loop.approval import ApprovalPolicy
from agent.loop.react import Agent
from agent.tools.registry import ToolRegistry
from agent.tools.search import ToolSearch
from agent.ui.input import prompt_session
from agent.ui.render import EventRenderer
from agent.ui.repl import Repl
from tests.support.fake_model import FakeModel


async def drive(
    registry: ToolRegistry,
    model: FakeModel,
    lines: list[str],
    tmp_path: Path,
    approval: ApprovalPolicy | None = None,
    tool_search: ToolSearch | None = None,
    settings: Settings | None = None,
) -> tuple[str, Repl]:
    """Type LINES (then /exit) into a REPL over REGISTRY and MODEL; what it showed, and it."""
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False, color_system=None)
    transcript = Transcript.create(tmp_path, {})
    memory = Memory(sink=transcript.append)
    with create_pipe_input() as pipe:
        session = prompt_session(InMemoryHistory(), input=pipe, output=DummyOutput())
        agent = Agent(model, registry, memory, approval=approval, tool_search=tool_search)
        repl = Repl(
            console,
            session,
            agent,
            registry,
            settings or Settings(),
            EventRenderer(console, stream_answer=True),
            transcript,
        )
        if approval is not None and approval.ask is None:
            approval.ask = repl.ask
        for line in [*lines, "/exit"] if lines[-1:] != ["/exit"] else lines:
            pipe.send_text(line + "\r")
        with anyio.fail_after(30):
            code = await repl.loop()  # ends at /exit
    transcript.close()
    assert code == 0
    return out.getvalue(), repl
