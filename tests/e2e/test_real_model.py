"""The agent against a real model server: llama-cpp-python serving SmolLM2-135M-Instruct.

These check the agent's behaviour (exit codes, what is sent and accepted, trimming, usage),
never the model's wording: a 135M model says odd things, but greedy decoding (temperature 0)
makes it say the same odd things every run. One server per test module and worker
(tests/support/local_model.py); CI installs it, elsewhere these skip until
scripts/install_llama.sh ran.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.common.memory import Memory
from agent.config.settings import Settings
from agent.loop.events import Event, Notice, RunFinished, ToolCallFinished
from agent.loop.react import Agent
from agent.model.llm import OpenAIModel
from agent.model.model_types import Reply, RetryNotice
from agent.tools.registry import ToolRegistry
from tests.support.cli import run_cli
from tests.support.local_model import N_CTX, PLAIN, TOOLS, LocalServer, llama_server
from tests.support.servers import stdio, time_server_command

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    with llama_server(tmp_path_factory.mktemp("llama")) as running:
        yield running


@pytest.fixture
def server(local: LocalServer) -> Iterator[str]:
    """The server's URL; a test during which it died fails saying how (a signal, its log)."""
    if (death := local.death()) is not None:
        pytest.fail(death)
    yield local.url
    if (death := local.death()) is not None:
        pytest.fail(death)


def config(tmp_path: Path, **llm: Any) -> list[str]:
    """--config with a greedy, short-replying model and the time server as the only tools."""
    values = {"model": PLAIN, "temperature": 0, "max_tokens": 48, "context_window": N_CTX, **llm}
    lines = [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path = tmp_path / "config.toml"
    path.write_text("[llm]\n" + "\n".join(lines) + "\n")
    command, args = time_server_command()
    return ["--config", str(path), "--server-command", " ".join([command, *args])]


def test_a_single_shot_run_answers_with_usage(server: str, tmp_path: Path) -> None:
    args = [*config(tmp_path, stream=False), "-p", "Say hello.", "--output", "json"]
    proc = run_cli(args, tmp_path, base_url=server, api_key=None, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "answered" and result["answer"].strip()
    assert result["usage"]["prompt_tokens"] > 0 and result["usage"]["completion_tokens"] > 0


def test_a_two_turn_piped_run_answers_both_and_says_usage_is_unknown(
    server: str, tmp_path: Path
) -> None:
    # Streaming: llama-cpp-python sends no usage in a stream, so /usage must say so.
    turns = "Say hello.\nSay goodbye.\n/usage\n"
    proc = run_cli([*config(tmp_path), "-i"], tmp_path, base_url=server, api_key=None,
                   stdin=turns, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr.lower()
    [session] = (tmp_path / "state" / "sessions").glob("*.jsonl")
    records = [json.loads(line) for line in session.read_text().splitlines()]
    messages = [r.get("message", r) for r in records]
    users = [m for m in messages if m.get("role") == "user"]
    answers = [m for m in messages if m.get("role") == "assistant" and m.get("content")]
    assert len(users) == 2 and len(answers) >= 2
    assert "unknown" in proc.stdout  # the /usage table


class ForceFirstCall:
    """The real client, with the first request forced to call `tool` (a 135M model rarely
    chooses a tool on its own); every request's messages are kept."""

    def __init__(self, inner: OpenAIModel, tool: str) -> None:
        self.inner, self.tool, self.model = inner, tool, inner.model
        self.max_tokens = inner.max_tokens
        self.sent: list[list[dict[str, Any]]] = []

    async def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[str | RetryNotice | Reply]:
        self.sent.append(json.loads(json.dumps(messages)))
        force = {"type": "function", "function": {"name": self.tool}}
        overrides = {"tool_choice": force} if len(self.sent) == 1 else None
        async for item in self.inner.stream(messages, tools, overrides=overrides):
            yield item


async def run_agent(agent: Agent, request: str) -> list[Event]:
    with anyio.fail_after(240):
        return [event async for event in agent.run(request)]


@pytest.mark.anyio
async def test_a_forced_tool_call_is_run_and_its_result_accepted(
    server: str, tmp_path: Path
) -> None:
    settings = Settings(servers=(stdio("time", time_server_command()),), state_dir=tmp_path)
    client = OpenAIModel(base_url=server, api_key="x", model=TOOLS, temperature=0, max_tokens=48)
    model = ForceFirstCall(client, "time__get_current_time")
    try:
        async with ToolRegistry(settings, reserved_names={"terminate"}) as registry:
            assert await registry.connect_all() == []
            agent = Agent(model, registry, Memory(), max_steps=2, context_window=N_CTX)
            events = await run_agent(agent, "What time is it in Tokyo?")
    finally:
        await client.aclose()
    [call] = [e for e in events if isinstance(e, ToolCallFinished)][:1]
    # Parsed (the schema's argument, as a dict) and run by the server: its answer, or its own
    # complaint about the zone the model picked, is in the output; never a refusal of ours.
    assert call.server == "time" and isinstance(call.arguments.get("timezone"), str)
    assert 'server="time"' in call.output and "not valid JSON" not in call.output
    done = events[-1]
    assert isinstance(done, RunFinished)
    assert done.status != "error", done.error
    second = model.sent[1]  # the call and its result went back, and the server took them
    [assistant] = [m for m in second if m["role"] == "assistant"]
    assert assistant["content"] == "" and assistant["tool_calls"][0]["id"]
    assert [m["tool_call_id"] for m in second if m["role"] == "tool"] == [
        assistant["tool_calls"][0]["id"]
    ]


@pytest.mark.anyio
async def test_a_long_history_in_a_2048_context_is_trimmed_and_answered(
    server: str,
) -> None:
    client = OpenAIModel(base_url=server, api_key="x", model=PLAIN, temperature=0, max_tokens=32)
    memory = Memory()
    for i in range(12):  # ~4,500 real tokens of earlier turns: two windows' worth
        memory.add_user(f"Note {i}: " + "the quick brown fox jumps over the lazy dog " * 36)
        memory.add_assistant(f"Noted {i}.")
    # The agent believes the default 128k window: only the server's error can tell it.

    class NoTools:
        tools: dict[str, Any] = {}

        def openai_tools(self) -> list[dict[str, Any]]:
            return []

        async def settle(self) -> None:
            return None

        async def call(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("no tools here")

    agent = Agent(client, NoTools(), memory, max_steps=1)
    try:
        first = await run_agent(agent, "Say hello.")
        second = await run_agent(agent, "Say goodbye.")
    finally:
        await client.aclose()
    for events in (first, second):
        done = events[-1]
        assert isinstance(done, RunFinished) and done.status in ("answered", "max_steps"), done
    overflow = [n.message for n in first if isinstance(n, Notice) and "did not fit" in n.message]
    assert overflow, first
    assert f"({N_CTX} tokens)" in overflow[0]  # learnt from the server's error
    assert agent.context_window == N_CTX
    assert not [n for n in second if isinstance(n, Notice) and "did not fit" in n.message]


# SmolLM2-135M does not choose a tool on its own (checked: asked for Tokyo's time it writes a
# bash snippet). It copies text faithfully at temperature 0, so the request dictates the
# call's markup: what is tested is the agent — the real model's reply parsed as a call, run,
# and its result sent back in the Hermes format through the model's own chat template.
DICTATED_CALL = (
    "Reply with exactly this text and nothing else:\n<tool_call>\n"
    '{"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}\n</tool_call>'
)


def test_a_call_the_real_model_writes_as_text_is_parsed_and_run(
    server: str, tmp_path: Path
) -> None:
    # The README's advice for llama-cpp-python: the model's own template, tool_calls = "text".
    args = [*config(tmp_path, tool_calls="text", max_tokens=64), "--server-name", "time"]
    args += ["--max-steps", "2"]
    args += ["-p", DICTATED_CALL, "--output", "json"]
    proc = run_cli(args, tmp_path, base_url=server, api_key=None, timeout=300)
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] in ("answered", "max_steps"), result["error"]
    [call, *_] = result["tool_calls"]
    assert not call["is_error"], call["output"]
    assert (call["name"], call["arguments"], call["is_error"]) == (
        "time__get_current_time",
        {"timezone": "Asia/Tokyo"},
        False,
    )
    assert "+09:00" in call["output"]
    [session] = (tmp_path / "state" / "sessions").glob("*.jsonl")
    messages = [json.loads(line).get("message", {}) for line in session.read_text().splitlines()]
    assert any(m.get("role") == "tool" and "+09:00" in m["content"] for m in messages)
    # The second step was asked with the result in it: the run took a second request.
    assert result["steps"] == 2
