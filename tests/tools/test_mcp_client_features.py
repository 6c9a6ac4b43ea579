"""The whole MCP client against real server-everything: sampling answered by the scripted
model, elicitation answered in the (headless) REPL or declined without one, roots, progress,
resources (/resources, `@server:uri`, the model's read_resource) and prompts.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from agent.common.memory import Memory
from agent.config.settings import ServerConfig, Settings
from agent.loop.approval import ApprovalPolicy
from agent.loop.events import ToolProgress
from agent.loop.react import Agent
from agent.model.llm import OpenAIModel
from agent.model.model_types import Usage
from agent.tools.catalog import Catalog
from agent.tools.registry import ToolRegistry
from agent.tools.results import strip_marker
from agent.tools.server_requests import (
    ELICITATION_PER_MINUTE,
    SAMPLING_MAX_TOKENS,
    SAMPLING_PER_MINUTE,
    SAMPLING_PROMPT_TOKENS,
    ElicitAnswer,
    ServerRequests,
)
from agent.ui.input import prompt_session
from agent.ui.render import EventRenderer
from agent.ui.repl import Repl
from tests.support.fake_llm import ScriptedLLM, delayed, text
from tests.support.fake_model import FakeModel, answer, calls
from tests.support.servers import everything_stdio_command

pytestmark = pytest.mark.anyio


@pytest.fixture
async def llm() -> AsyncIterator[ScriptedLLM]:
    with ScriptedLLM() as scripted:
        yield scripted


@pytest.fixture
async def requests(llm: ScriptedLLM, tmp_path: Path) -> AsyncIterator[ServerRequests]:
    model = OpenAIModel(base_url=llm.base_url, api_key="sk-test", model="scripted")
    yield ServerRequests(model)
    await model.aclose()


@pytest.fixture
def registry_settings(tmp_path: Path) -> Settings:
    command, args = everything_stdio_command()
    return Settings(
        servers=(ServerConfig(name="main", type="stdio", command=command, args=tuple(args)),),
        state_dir=tmp_path / "state",
    )


@pytest.fixture
def registry_options(requests: ServerRequests) -> dict[str, Any]:
    return {"callbacks": requests.callbacks}


async def test_sampling_is_answered_by_our_model_with_the_servers_limits(
    registry: ToolRegistry, requests: ServerRequests, llm: ScriptedLLM
) -> None:
    requests.auto_approve = True  # --yes
    spent: list[tuple[str, Usage]] = []
    requests.on_sampled = lambda server, usage: spent.append((server, usage))
    llm.add(text("a haiku about tests"))
    observation = await registry.call(
        "main__trigger-sampling-request", {"prompt": "write a haiku", "maxTokens": 64}
    )
    assert not observation.is_error
    assert "a haiku about tests" in observation.text
    sent = llm.requests[0]
    assert sent["max_tokens"] == 64
    assert sent["messages"][0]["role"] == "system"  # the server's system prompt
    assert "write a haiku" in sent["messages"][-1]["content"]
    assert spent == [("main", Usage(12, 7))]  # counted with the run (JSON usage, /usage)
    llm.assert_complete()


async def test_sampling_is_bounded_in_tokens_and_rate_even_under_yes(
    requests: ServerRequests, llm: ScriptedLLM
) -> None:
    requests.auto_approve = True
    llm.add(*[text("ok")] * SAMPLING_PER_MINUTE)
    message = types.SamplingMessage(role="user", content=types.TextContent(text="burn"))
    params = types.CreateMessageRequestParams(messages=[message], max_tokens=100_000)
    answers = [await requests.sample("greedy", None, params) for _ in range(SAMPLING_PER_MINUTE)]
    assert all(isinstance(a, types.CreateMessageResult) for a in answers)
    assert {r["max_tokens"] for r in llm.requests} == {SAMPLING_MAX_TOKENS}
    refused = await requests.sample("greedy", None, params)
    assert isinstance(refused, types.ErrorData) and "too many sampling requests" in refused.message
    llm.add(text("fine"))  # the limit is per server: another one is still answered
    other = await requests.sample("modest", None, params.model_copy(update={"max_tokens": 5}))
    assert isinstance(other, types.CreateMessageResult)
    assert llm.requests[-1]["max_tokens"] == 5  # a smaller request is honoured as is
    llm.assert_complete()


async def test_a_sampling_prompt_over_the_cap_is_refused_unasked_even_under_yes(
    registry: ToolRegistry, requests: ServerRequests, llm: ScriptedLLM
) -> None:
    requests.auto_approve = True
    big = "x" * (SAMPLING_PROMPT_TOKENS * 4 + 400)  # just over the default cap
    message = types.SamplingMessage(role="user", content=types.TextContent(text=big))
    params = types.CreateMessageRequestParams(messages=[message], max_tokens=10)
    refused = await requests.sample("greedy", None, params)
    assert isinstance(refused, types.ErrorData)
    assert "sampling prompt too large" in refused.message
    assert f"at most {SAMPLING_PROMPT_TOKENS:,} tokens" in refused.message
    requests.max_prompt_tokens = 5  # [llm] sampling_max_prompt_tokens, through a real server
    observation = await registry.call(
        "main__trigger-sampling-request", {"prompt": "a prompt of more than twenty characters"}
    )
    assert "sampling prompt too large" in observation.text
    assert llm.requests == []  # the model was never asked


async def test_a_cancelled_turn_stops_the_sampling_it_caused(
    requests: ServerRequests, llm: ScriptedLLM
) -> None:
    requests.auto_approve = True
    llm.add(delayed(2, text("too late")))
    message = types.SamplingMessage(role="user", content=types.TextContent(text="slow"))
    params = types.CreateMessageRequestParams(messages=[message], max_tokens=10)
    answers: list[object] = []
    with anyio.fail_after(3):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: _collect(requests.sample("s", None, params), answers))
            while not llm.requests:  # noqa: ASYNC110 -- the request is on its way
                await anyio.sleep(0.02)
            requests.cancel_in_flight()  # what the REPL does when the user cancels the turn
    [answer] = answers
    assert isinstance(answer, types.ErrorData) and "cancelled" in answer.message


async def _collect(awaitable: Any, into: list[object]) -> None:
    into.append(await awaitable)


async def test_sampling_without_approval_is_refused_and_the_model_not_called(
    registry: ToolRegistry, llm: ScriptedLLM
) -> None:
    observation = await registry.call(
        "main__trigger-sampling-request", {"prompt": "hi", "maxTokens": 10}
    )
    assert "rerun with --yes" in observation.text
    assert llm.requests == []


async def test_elicitation_without_a_terminal_is_declined(registry: ToolRegistry) -> None:
    observation = await registry.call("main__trigger-elicitation-request", {})
    assert "declined" in observation.text.lower()


async def test_roots_are_offered_only_when_configured(
    registry: ToolRegistry, requests: ServerRequests, tmp_path: Path
) -> None:
    assert "main__get-roots-list" not in registry.tools  # no roots capability declared
    command, args = everything_stdio_command()
    server = ServerConfig(
        name="rooted", type="stdio", command=command, args=tuple(args), roots=(str(tmp_path),)
    )
    settings = Settings(servers=(server,), state_dir=tmp_path / "state")
    async with ToolRegistry(settings, callbacks=requests.callbacks) as rooted:
        assert await rooted.connect_all() == []
        observation = await rooted.call("rooted__get-roots-list", {})
    assert tmp_path.as_uri() in observation.text


async def test_progress_notifications_become_events(registry: ToolRegistry) -> None:
    model = FakeModel(
        [calls(("main__trigger-long-running-operation", {"duration": 1, "steps": 4})), answer("ok")]
    )
    agent = Agent(model, registry, Memory())
    with anyio.fail_after(30):
        events = [event async for event in agent.run("go")]
    progress = [(e.progress, e.total) for e in events if isinstance(e, ToolProgress)]
    assert progress == [(1, 4), (2, 4), (3, 4), (4, 4)]


async def drive_repl(
    registry: ToolRegistry,
    requests: ServerRequests,
    model: FakeModel,
    keys: str,
    approval: ApprovalPolicy | None = None,
) -> tuple[str, Repl]:
    """The REPL with its answers typed ahead into a pipe, as a person would type them.

    Tool approval is "yes" unless given, so typed lines answer only the server's questions."""
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False, color_system=None)
    with create_pipe_input() as pipe:
        session = prompt_session(InMemoryHistory(), input=pipe, output=DummyOutput())
        catalog = Catalog(registry)
        await catalog.refresh()
        agent = Agent(
            model,
            registry,
            Memory(),
            approval=approval or ApprovalPolicy(mode="yes"),
            agent_tools=catalog.agent_tools,
        )
        renderer = EventRenderer(console, stream_answer=True)
        repl = Repl(console, session, agent, registry, Settings(), renderer, catalog=catalog)
        requests.ui = repl
        agent.approval.ask = repl.ask
        pipe.send_text(keys + "/exit\r")
        with anyio.fail_after(30):
            assert await repl.loop() == 0
    return out.getvalue(), repl


async def test_elicitation_form_is_asked_field_by_field(
    registry: ToolRegistry, requests: ServerRequests
) -> None:
    model = FakeModel([calls(("main__trigger-elicitation-request", {})), answer("thanks")])
    clear = "\x15"  # Ctrl-U: clear the pre-filled default
    answers = [
        "please fill the form",  # the request to the agent
        "y",  # answer it
        "",  # name is required: asked again
        "Ada",
        "maybe",  # boolean: asked again
        "yes",
        "",  # firstLine: keep the default
        "ada-at-example",  # email format: asked again
        "ada@example.com",
        "",  # homepage
        "",  # birthdate
        clear + "seven",  # integer: asked again
        clear + "700",  # integer 1-100: asked again
        clear + "7",
        "",  # number: default 3.14
        clear + "Janice",  # not a choice: asked again
        clear + "Joey",
        clear + "Piano, Drums",  # multi-select
        clear + "green lantern",  # titled single select: answered by its title
        "",  # titled multi select: default
        clear + "Dogs",  # legacy titled enum (enumNames): by its title
    ]
    screen, _ = await drive_repl(registry, requests, model, "".join(a + "\r" for a in answers))
    assert "Server 'main' asks you:" in screen
    complaints = ("required", "answer yes or no", "enter a whole number", "choose from")
    for complaint in (*complaints, "enter a valid email", "at most 100"):
        assert complaint in screen
    result = strip_marker([m for m in model.requests[1] if m["role"] == "tool"][0]["content"])
    raw = json.loads(result[result.index("{", result.index("Raw result")) :])
    assert raw["action"] == "accept"
    assert raw["content"] == {
        "name": "Ada",
        "check": True,
        "firstLine": "It was a dark and stormy night.",
        "email": "ada@example.com",
        "integer": 7,
        "number": 3.14,
        "untitledSingleSelectEnum": "Joey",
        "untitledMultipleSelectEnum": ["Piano", "Drums"],
        "titledSingleSelectEnum": "hero-2",
        "titledMultipleSelectEnum": ["fish-1"],
        "legacyTitledEnum": "pet-2",
    }


KEY = "sk-proj-abcdefgh12345678"


async def test_sampling_is_shown_and_approved_in_the_repl(
    registry: ToolRegistry, requests: ServerRequests, llm: ScriptedLLM
) -> None:
    llm.add(text("sampled by the scripted model"))
    model = FakeModel(
        [
            calls(
                (
                    "main__trigger-sampling-request",
                    {"prompt": f"tell a joke {KEY}", "maxTokens": 20},
                )
            ),
            answer("done"),
        ]
    )
    policy = ApprovalPolicy(mode="ask")
    # "y" to run the tool, then "y" to send the server's request to the model
    screen, _ = await drive_repl(registry, requests, model, "joke please\ry\ry\r", policy)
    assert "Server 'main' asks the model" in screen and "tell a joke [REDACTED]" in screen
    asked = screen[screen.index("Server 'main' asks the model") :]
    assert KEY not in asked[: asked.index("✓")]  # masked when asked
    assert re.search(r"asks the model.*, ~\d+ tokens \(\d+ characters\):", screen)  # its size
    tool_result = [m for m in model.requests[1] if m["role"] == "tool"][0]["content"]
    assert "sampled by the scripted model" in tool_result
    llm.assert_complete()


async def test_approve_ask_in_the_repl_brings_back_the_sampling_question(
    registry: ToolRegistry, requests: ServerRequests, llm: ScriptedLLM
) -> None:
    """Started with --yes, then /approve ask: servers' sampling requests are asked again."""
    requests.auto_approve = True
    sample = calls(("main__trigger-sampling-request", {"prompt": "tell a joke", "maxTokens": 20}))
    model = FakeModel([sample, answer("done")])
    # /approve ask; the request; "y" to run the tool; "n" to the server's sampling request
    keys = "/approve ask\rjoke please\ry\rn\r"
    screen, _ = await drive_repl(registry, requests, model, keys, ApprovalPolicy(mode="yes"))
    assert "Server 'main' asks the model" in screen
    tool_result = [m for m in model.requests[1] if m["role"] == "tool"][0]["content"]
    assert "declined" in tool_result
    assert llm.requests == []  # the model was never asked on the server's behalf


STATIC_DOC = "demo://resource/static/document/architecture.md"


async def test_resources_are_listed_and_attached_with_at_references(
    registry: ToolRegistry, requests: ServerRequests
) -> None:
    model = FakeModel([answer("read it")])
    screen, repl = await drive_repl(
        registry, requests, model, f"/resources\rsummarise @main:{STATIC_DOC} please\r"
    )
    assert STATIC_DOC in screen and "(template)" in screen
    assert "attach one to a request with @server:uri" in screen
    request = model.requests[0][-1]["content"]
    assert request.startswith(f"summarise @main:{STATIC_DOC} please\n\n")
    assert '<untrusted-data server="main"' in request and "# " in request  # enveloped markdown
    assert f"main:{STATIC_DOC}" in repl.resource_refs()


async def test_a_bad_reference_is_reported_and_the_request_still_runs(
    registry: ToolRegistry, requests: ServerRequests
) -> None:
    model = FakeModel([answer("ok")])
    screen, _ = await drive_repl(registry, requests, model, "see @main:demo://nope\r")
    assert "cannot read demo://nope from 'main'" in screen
    assert model.requests[0][-1]["content"] == "see @main:demo://nope"


async def test_the_model_reads_resources_through_the_agents_tool(
    registry: ToolRegistry, requests: ServerRequests
) -> None:
    model = FakeModel(
        [
            calls(("read_resource", {"server": "main", "uri": STATIC_DOC})),
            calls(("read_resource", {"server": "nope", "uri": STATIC_DOC})),
            answer("done"),
        ]
    )
    await drive_repl(registry, requests, model, "read the architecture doc\r")
    offered = {t["function"]["name"] for t in model.tools_seen[0]}
    assert "read_resource" in offered and "main__echo" in offered
    first, second = [
        [m for m in request if m["role"] == "tool"][-1]["content"] for request in model.requests[1:]
    ]
    assert '<untrusted-data server="main"' in first and "#" in first
    assert "no MCP server named 'nope'" in second


async def test_prompts_are_listed_and_run_as_the_next_turn(
    registry: ToolRegistry, requests: ServerRequests
) -> None:
    model = FakeModel([answer("weather given"), answer("simple done")])
    keys = "/prompts\r/prompt args-prompt\rParis\r/simple-prompt\r"
    screen, _ = await drive_repl(registry, requests, model, keys)
    assert "args-prompt" in screen and "city state?" in screen  # required and optional args
    first = model.requests[0][-1]
    assert first["role"] == "user" and "Paris" in first["content"]  # asked for, then sent
    assert model.requests[1][-1]["role"] == "user"
    model.assert_complete()


async def test_prompt_arguments_on_the_command_line(
    registry: ToolRegistry, requests: ServerRequests
) -> None:
    model = FakeModel([answer("ok")])
    await drive_repl(registry, requests, model, '/prompt args-prompt city="New York" state=NY\r')
    assert "New York" in model.requests[0][-1]["content"]
    assert "NY" in model.requests[0][-1]["content"]


SAMPLE_ARGUMENTS = {"resourceType": "Text", "resourceId": "1", "department": "Engineering"}


async def test_every_resource_template_and_prompt_of_server_everything(
    registry: ToolRegistry,
) -> None:
    catalog = Catalog(registry)
    await catalog.refresh()
    assert catalog.errors == {}
    assert len(catalog.resources) >= 7 and len(catalog.templates) >= 2
    assert {p.name for _, p in catalog.prompts} >= {"simple-prompt", "args-prompt"}
    for server, resource in catalog.resources:
        assert (await catalog.read(server, str(resource.uri))).strip(), resource.uri
    for server, template in catalog.templates:
        uri = template.uri_template.replace("{resourceId}", "1")
        assert (await catalog.read(server, uri)).strip(), uri
    for server, prompt in catalog.prompts:
        arguments = {
            a.name: SAMPLE_ARGUMENTS.get(a.name, "Paris")
            for a in prompt.arguments or []
            if a.required
        }
        messages = await catalog.get_prompt(server, prompt.name, arguments)
        assert messages and all(text for _, text in messages), prompt.name


async def test_url_elicitation_shows_the_link_and_can_be_declined(
    registry: ToolRegistry, requests: ServerRequests
) -> None:
    link = "https://example.com/authorize?state=42"
    arguments = {"url": link, "message": "Sign in to continue", "elicitationId": "el-1"}
    model = FakeModel([calls(("main__trigger-url-elicitation", arguments)), answer("ok")])
    screen, _ = await drive_repl(registry, requests, model, "sign me in\rn\r")
    assert "Server 'main' asks you to open a link:" in screen
    assert "Sign in to continue" in screen and link in screen
    result = [m for m in model.requests[1] if m["role"] == "tool"][0]["content"]
    assert "decline" in result.lower()


async def test_a_server_that_keeps_asking_is_declined_without_a_question(
    requests: ServerRequests,
) -> None:
    asked: list[str] = []

    class Counting:
        async def approve_sampling(self, request: Any) -> bool:
            return False

        async def elicit_form(self, server: str, message: str, schema: Any) -> ElicitAnswer:
            asked.append(message)
            return ElicitAnswer("accept", {})

        async def elicit_url(self, server: str, message: str, url: str) -> ElicitAnswer:
            return ElicitAnswer("decline")

    requests.ui = Counting()
    params = types.ElicitRequestFormParams(
        message="again?", requested_schema={"type": "object", "properties": {}}
    )
    actions = [(await requests.elicit("pest", None, params)).action for _ in range(8)]
    assert actions == ["accept"] * ELICITATION_PER_MINUTE + ["decline"] * 3
    assert len(asked) == ELICITATION_PER_MINUTE
