"""Tab completes prompt arguments and resource-template values through the server's own
`completion/complete` (server-everything's completable-prompt and dynamic templates)."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent.common.memory import Memory
from agent.config.settings import ServerConfig, Settings
from agent.loop.react import Agent
from agent.tools.catalog import Catalog
from agent.tools.registry import ToolRegistry
from agent.ui.input import ReplCompleter, prompt_session
from agent.ui.render import EventRenderer
from agent.ui.repl import Repl
from tests.support.fake_model import FakeModel
from tests.support.servers import everything_stdio_command

pytestmark = pytest.mark.anyio


async def test_tab_asks_the_server_for_prompt_and_template_values(tmp_path: Path) -> None:
    command, args = everything_stdio_command()
    server = ServerConfig(name="main", type="stdio", command=command, args=tuple(args))
    settings = Settings(servers=(server,), state_dir=tmp_path / "state")
    console = Console(file=io.StringIO())
    async with ToolRegistry(settings) as registry:
        assert await registry.connect_all() == []
        catalog = Catalog(registry)
        await catalog.refresh()
        with create_pipe_input() as pipe:
            session = prompt_session(InMemoryHistory(), input=pipe, output=DummyOutput())
            agent = Agent(FakeModel([]), registry, Memory())
            renderer = EventRenderer(console, stream_answer=True)
            repl = Repl(console, session, agent, registry, settings, renderer, catalog=catalog)
            completer = ReplCompleter(repl)

            async def complete(text: str) -> list[str]:
                with anyio.fail_after(10):
                    found = completer.get_completions_async(Document(text), CompleteEvent())
                    return [c.text async for c in found]

            assert await complete("/prompt completable-prompt department=E") == [
                "department=Engineering"
            ]
            context = "/prompt completable-prompt department=Sales name="
            assert await complete(context) == ["name=David", "name=Eve", "name=Frank"]
            ref = "see @main:demo://resource/dynamic/text/12"
            assert await complete(ref) == ["@main:demo://resource/dynamic/text/12"]
            assert await complete("/prompt completable-prompt nothing") == []
