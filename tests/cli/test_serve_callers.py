"""`run_mcp.py serve`: a conversation and a task belong to the caller that started them.

Real clients, as an attacker on the same machine would use them: the SDK's `Client` over
`serve --http` (two HTTP sessions of the handshake era, and a 2026-07-28 caller, which has
no session) and over stdio; the scripted model behind serve. A second caller presenting
another's `session_id` or `taskId` is told it is unknown, as for an ID that never existed,
and nothing reaches the model; an approval answered with anything but a well-formed
accepted form is a no.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.extension import advertise
from mcp.client.session import ClientRequestContext

from agent.tools.mcp_tasks import send_raw
from agent.tools.tasks import TASKS_EXTENSION as TASKS
from agent.tools.tasks import TasksExtension
from tests.support.cli import RUN_MCP, cli_env, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import free_port, run_http_server

SECRET = "sk-e2e-secret"
WRITE = tool_calls(("local__write_file", {"path": "x.txt", "content": "y"}))
UNKNOWN = "unknown session_id"


def over_http(workdir: Path, llm: ScriptedLLM, calls: Callable[[str], Awaitable[Any]]) -> Any:
    """`run_mcp.py serve --http PORT` in workdir; `calls(url)` run against it."""
    port = free_port()
    env = cli_env(workdir, llm.base_url, SECRET)
    command = [sys.executable, RUN_MCP, "serve", "--http", str(port)]
    with run_http_server(command, port, env, "/mcp", workdir / "serve.log", cwd=workdir) as url:

        async def main() -> Any:
            with anyio.fail_after(90):
                return await calls(url)

        return anyio.run(main)


def over_stdio(workdir: Path, llm: ScriptedLLM, calls: Any, **client: Any) -> Any:
    env = cli_env(workdir, llm.base_url, SECRET)
    params = StdioServerParameters(
        command=sys.executable, args=[RUN_MCP, "serve"], env=env, cwd=str(workdir)
    )

    async def main() -> Any:
        with (workdir / "serve.log").open("w") as log:
            async with Client(stdio_client(params, errlog=log), **client) as c:
                with anyio.fail_after(90):
                    return await calls(c)

    return anyio.run(main)


async def refused(c: Client, method: str, params: dict[str, Any]) -> str:
    """The error a task method answers with (it must answer with one)."""
    with pytest.raises(MCPError) as error:
        await send_raw(c.session, method, params, 30)
    return error.value.message


async def poll(c: Client, task_id: str, until: str) -> dict[str, Any]:
    """tasks/get at the task's own poll interval until its status is `until`."""
    while True:
        task = await send_raw(c.session, "tasks/get", {"taskId": task_id}, 30)
        if task["status"] == until:
            return task
        assert task["status"] in ("working", "input_required"), task
        await anyio.sleep(task["pollIntervalMs"] / 1000)


async def unused(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """Declares elicitation: a task's question comes as its inputRequests instead."""
    raise AssertionError("a task's question is not sent as elicitation/create")


def test_a_session_id_is_unguessable_and_names_its_transcript(tmp_path: Path) -> None:
    """>= 128 random bits after the transcript's ID: `--resume` with that ID (what the
    docs say) continues the conversation from the terminal."""

    async def calls(c: Client) -> list[str]:
        ids = []
        for prompt in ("the code is 4711", "hello"):
            result = await c.call_tool("ask", {"prompt": prompt})
            ids.append(result.structured_content["session_id"])
        return ids

    with ScriptedLLM(text("noted"), text("hi")) as llm:
        first, second = over_stdio(tmp_path, llm, calls)
        llm.assert_complete()
    transcript, _, key = first.partition(".")
    assert len(key) >= 22 and key != second.partition(".")[2]  # base64url: >= 132 bits
    saved = {p.stem for p in (tmp_path / "state" / "sessions").glob("*.jsonl")}
    assert transcript in saved and key not in "".join(saved)
    for resume in (transcript, first):  # the part before the dot, or the whole session_id
        with ScriptedLLM(text("4711")) as llm:
            argv = ["--resume", resume, "-p", "the code?"]
            proc = run_cli(argv, tmp_path, base_url=llm.base_url)
            llm.assert_complete()
        assert proc.returncode == 0, proc.stderr
        said = [m.get("content") for m in llm.requests[0]["messages"]]
        assert said[-1] == "the code?" and said.index("the code is 4711") == len(said) - (
            3 if resume == transcript else 5
        ), said


def test_another_http_caller_cannot_read_or_continue_a_conversation(tmp_path: Path) -> None:
    async def calls(url: str) -> dict[str, types.CallToolResult]:
        async with (
            Client(url, mode="legacy") as alice,
            Client(url, mode="legacy") as mallory,
            Client(url) as modern,  # 2026-07-28: no HTTP session at all
        ):
            first = await alice.call_tool("ask", {"prompt": "the code is 4711"})
            sid = first.structured_content["session_id"]
            got = {
                "stolen": await mallory.call_tool("ask", {"prompt": "code?", "session_id": sid}),
                "modern": await modern.call_tool("ask", {"prompt": "code?", "session_id": sid}),
                "wrong": await mallory.call_tool("ask", {"prompt": "x", "session_id": sid + "x"}),
                "own": await alice.call_tool("ask", {"prompt": "code?", "session_id": sid}),
            }
            return {"first": first, **got}

    with ScriptedLLM(text("noted"), text("4711")) as llm:  # nothing for mallory's turns
        got = over_http(tmp_path, llm, calls)
        llm.assert_complete()
    for who in ("stolen", "modern", "wrong"):
        assert got[who].is_error and got[who].structured_content is None
        assert got[who].content[0].text == got["wrong"].content[0].text  # nothing told apart
    assert got["wrong"].content[0].text.startswith(UNKNOWN)
    assert got["own"].structured_content["answer"] == "4711"
    said = [m.get("content") for m in llm.requests[1]["messages"]]
    assert said[-3:] == ["the code is 4711", "noted", "code?"]


def test_no_task_runs_on_another_callers_conversation_and_tasks_are_2026_only(
    tmp_path: Path,
) -> None:
    """A 2026-07-28 caller with the tasks extension presenting Alice's session_id starts
    no task on her conversation. A handshake-era caller that declares the extension gets
    the plain call (its wire cannot carry a task handle: the SDK used to answer "invalid
    result" while the turn ran on, unseen) and the task methods refuse it. Over HTTP a
    2026-07-28 request has no session, so a task's 128-bit taskId is its only key."""

    async def calls(url: str) -> list[Any]:
        async with (
            Client(url, mode="legacy") as alice,
            Client(url, extensions=[TasksExtension()], elicitation_callback=unused) as modern,
            Client(url, mode="legacy", extensions=[advertise(TASKS)]) as old,
        ):
            first = await alice.call_tool("ask", {"prompt": "the code is 4711"})
            sid = first.structured_content["session_id"]
            ask = {"name": "ask", "arguments": {"prompt": "code?", "session_id": sid}}
            stolen = await send_raw(modern.session, "tools/call", ask, 30)
            hello = {"name": "ask", "arguments": {"prompt": "hello"}}
            plain = await send_raw(old.session, "tools/call", hello, 30)
            methods = await refused(old, "tasks/get", {"taskId": "0" * 32})
            return [stolen, plain, methods]

    with ScriptedLLM(text("noted"), text("plain hello")) as llm:  # nothing for the theft
        stolen, plain, methods = over_http(tmp_path, llm, calls)
        llm.assert_complete()
    assert stolen.get("resultType") != "task" and stolen["isError"]
    assert stolen["content"][0]["text"].startswith(UNKNOWN)
    assert plain["structuredContent"]["answer"] == "plain hello"
    assert "tasks are served on the 2026-07-28 protocol only" in methods


async def accept_without_content(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    """A program that declares elicitation and says "accept" with no form filled in."""
    return types.ElicitResult(action="accept")


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # input_required; elicitation/create
def test_an_accept_without_its_form_does_not_approve(tmp_path: Path, mode: str) -> None:
    async def calls(c: Client) -> types.CallToolResult:
        return await c.call_tool("ask", {"prompt": "write x.txt"})

    with ScriptedLLM(WRITE, text("not written")) as llm:
        result = over_stdio(
            tmp_path, llm, calls, elicitation_callback=accept_without_content, mode=mode
        )
        llm.assert_complete()
    assert not (tmp_path / "x.txt").exists()
    assert result.structured_content["tool_calls"][0]["is_error"]
    assert "declined to run 'write_file'" in llm.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize(
    "answer",
    [{"action": "accept"}, {"action": "accept", "content": {"always": "sure"}}, "yes", None],
)
def test_a_task_answer_that_is_no_accepted_form_does_not_approve(
    tmp_path: Path, answer: Any
) -> None:
    async def calls(c: Client) -> dict[str, Any]:
        ask = {"name": "ask", "arguments": {"prompt": "write x.txt"}}
        handle = await send_raw(c.session, "tools/call", ask, 30)
        asking = await poll(c, handle["taskId"], "input_required")
        (key,) = asking["inputRequests"]
        update = {"taskId": handle["taskId"], "inputResponses": {key: answer}}
        await send_raw(c.session, "tasks/update", update, 30)
        return await poll(c, handle["taskId"], "completed")

    with ScriptedLLM(WRITE, text("not written")) as llm:
        done = over_stdio(
            tmp_path, llm, calls, extensions=[TasksExtension()], elicitation_callback=unused
        )
        llm.assert_complete()
    assert not (tmp_path / "x.txt").exists()
    assert done["result"]["structuredContent"]["tool_calls"][0]["is_error"]
