"""`agent.api.open_agent` as a program uses it: the documented example run as written, and
the API in this process against the bundled server and the scripted model."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from agent.api import AgentError, ApprovalRequest, Result, ServerUnavailable, open_agent
from agent.common.redact import MASK
from agent.loop.events import RunFinished, ToolCallFinished
from tests.support.cli import cli_env
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import REPO_ROOT

pytestmark = pytest.mark.anyio
DOC = REPO_ROOT / "docs" / "python-api.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_documented_example_runs_as_written(tmp_path: Path) -> None:
    example, expected = blocks("python")[0], blocks("text")[0]
    (tmp_path / "example.py").write_text(example)
    (tmp_path / "notes.txt").write_text("milk, stamps, call Ana\n")
    script = [
        tool_calls(("local__read_file", {"path": "notes.txt"})),
        text("It lists three errands."),
        tool_calls(("local__write_file", {"path": "summary.txt", "content": "three errands"})),
        text("Done: summary.txt holds the summary."),
    ]
    with ScriptedLLM(*script) as llm:
        env = {**cli_env(tmp_path, llm.base_url, "sk-api"), "PYTHONPATH": str(REPO_ROOT)}
        proc = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=90)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected
    assert (tmp_path / "summary.txt").read_text() == "three errands"
    assert "milk, stamps" in str(llm.requests[1]["messages"])


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as a program in its own folder would run: state and config there."""
    for name in [k for k in os.environ if k.startswith(("OPENAI_", "MCP_AGENT_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MCP_AGENT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-api-secret")
    monkeypatch.chdir(tmp_path)
    return tmp_path


async def test_turns_share_one_session_and_ask_returns_the_typed_result(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("hello\n")
    script = [tool_calls(("local__read_file", {"path": "notes.txt"})),
              text("hello it says, sk-api-secret"),
              text("you asked about notes.txt, sk-api-secret")]  # fmt: skip
    with ScriptedLLM(*script) as llm:
        async with open_agent(base_url=llm.base_url, max_steps=4) as agent:
            first = await agent.ask("read notes.txt")
            events = [event async for event in agent.stream("what did I ask?")]
            assert "local__read_file" in agent.tools
        llm.assert_complete()
    assert isinstance(first, Result) and first.status == "answered"
    assert first.answer == f"hello it says, {MASK}" and first.steps == 2  # masked like -p
    [call] = first.tool_calls
    assert (call.server, call.tool, call.output, call.is_error) == ("local", "read_file",
                                                                    "hello\n", False)  # fmt: skip
    assert first.usage.prompt_tokens == 24 and first.json["status"] == "answered"
    assert isinstance(events[-1], RunFinished) and events[-1].status == "answered"
    said = [m["content"] for m in llm.messages(-1) if m["role"] == "user"]
    assert said == ["read notes.txt", "what did I ask?"]  # one conversation


async def test_approval_comes_from_the_callback_and_is_refused_without_one(
    workspace: Path,
) -> None:
    write = tool_calls(("local__write_file", {"path": "out.txt", "content": "x"}))
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    with ScriptedLLM(write, text("refused"), write, text("written")) as llm:
        async with open_agent(base_url=llm.base_url) as agent:
            refused = await agent.ask("write it")
        assert not (workspace / "out.txt").exists()
        async with open_agent(base_url=llm.base_url, approve=approve) as agent:
            finished = [
                e async for e in agent.stream("write it") if isinstance(e, ToolCallFinished)
            ]
        llm.assert_complete()
    assert refused.tool_calls[0].is_error and "rerun with --yes" in refused.tool_calls[0].output
    assert [(r.server, r.tool) for r in asked] == [("local", "write_file")]
    assert finished[0].denied is False and (workspace / "out.txt").read_text() == "x"


async def test_an_unknown_option_names_the_close_one(workspace: Path) -> None:
    with pytest.raises(TypeError, match="'max_step'.*did you mean 'max_steps'"):
        async with open_agent(max_step=3):
            pass
    with pytest.raises(AgentError, match="--connection 'ftp'"):
        async with open_agent(connection="ftp"):
            pass


def test_the_keywords_are_the_command_line_s_options_that_shape_a_session() -> None:
    """The API's keywords live below the CLI (agent.session.run_settings, so agent.api never
    imports agent.cli): every option of `run` but those about one run's input and output is
    one of them, with the same default, and nothing else is."""
    from agent.cli.main import run
    from agent.cli.subcommands import ONE_RUN_OPTIONS
    from agent.session.run_settings import SESSION_OPTIONS

    one_run = set(ONE_RUN_OPTIONS) - {"resume"}  # a session's ID is a keyword
    flags = inspect.signature(run).parameters.items()
    shared = {name: p.default for name, p in flags if name not in one_run}
    keywords = {k: list(v) if isinstance(v, tuple) else v for k, v in SESSION_OPTIONS.items()}
    assert keywords == shared


async def test_a_second_turn_asked_meanwhile_waits_for_the_first(workspace: Path) -> None:
    results: list[Result] = []
    with ScriptedLLM(text("first answer", pace=0.05), text("second answer")) as llm:
        async with open_agent(base_url=llm.base_url) as agent:

            async def ask(text: str) -> None:
                results.append(await agent.ask(text))

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "one")  # tasks start in order: "one" takes the turn
                tg.start_soon(ask, "two")
        llm.assert_complete()
    assert [r.answer for r in results] == ["first answer", "second answer"]
    said = [m["content"] for m in llm.messages(-1) if m["role"] != "system"]
    assert said == ["one", "first answer", "two"]  # the second saw the first, whole


async def test_a_required_server_that_fails_raises_server_unavailable(workspace: Path) -> None:
    with ScriptedLLM() as llm, pytest.raises(ServerUnavailable, match="'main' is unavailable"):
        async with open_agent(base_url=llm.base_url, server_command="/nonexistent/server"):
            pass


async def test_an_exception_of_the_caller_s_block_comes_out_as_raised(workspace: Path) -> None:
    with ScriptedLLM() as llm, pytest.raises(ValueError, match="the caller's own"):
        async with open_agent(base_url=llm.base_url):
            raise ValueError("the caller's own")
