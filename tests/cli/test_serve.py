"""`run_mcp.py serve` as another program meets it: the SDK's own client over stdio to a
real `run_mcp.py serve` subprocess (the bundled server as its tools), the scripted model
behind it."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, cast

import anyio
import mcp.types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext

from agent.cli import serve_conversations
from agent.loop.approval import ApprovalRequest
from agent.tools.mcp_tasks import send_raw
from tests.support.cli import RUN_MCP, cli_env, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import free_port, run_http_server

SECRET = "sk-e2e-secret"
DEAD_MODEL = "http://127.0.0.1:9/v1"  # never asked: these runs end before a request


def serve_params(workdir: Path, base_url: str, *args: str) -> StdioServerParameters:
    env = cli_env(workdir, base_url, SECRET)
    return StdioServerParameters(
        command=sys.executable, args=[RUN_MCP, "serve", *args], env=env, cwd=str(workdir)
    )


async def declined(
    ctx: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    asked.append(getattr(params, "message", ""))
    return types.ElicitResult(action="decline")


async def accepted(
    ctx: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    asked.append(getattr(params, "message", ""))
    return types.ElicitResult(action="accept", content={"always": True})


asked: list[str] = []


def serve(workdir: Path, llm: ScriptedLLM, calls: Any, **client: Any) -> Any:
    """Start `run_mcp.py serve`, connect the SDK's client, run `calls(client)`; stderr is
    kept in workdir/serve.log."""

    async def main() -> Any:
        with (workdir / "serve.log").open("w") as log:
            params = serve_params(workdir, llm.base_url)
            async with Client(stdio_client(params, errlog=log), **client) as c:
                with anyio.fail_after(60):
                    return await calls(c)

    return anyio.run(main)


def test_lists_ask_and_answers_with_structured_content(tmp_path: Path) -> None:
    said: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        said.append(message)

    async def calls(c: Client) -> tuple[list[types.Tool], types.CallToolResult]:
        tools = (await c.list_tools()).tools
        result = await c.call_tool("ask", {"prompt": "hello?"}, progress_callback=on_progress)
        return tools, result

    with ScriptedLLM(text(f"hi there {SECRET}")) as llm:
        tools, result = serve(tmp_path, llm, calls)
        llm.assert_complete()
    assert [t.name for t in tools] == ["ask"]
    assert set(tools[0].input_schema["properties"]) == {"prompt", "session_id"}
    assert not result.is_error
    structured = result.structured_content
    assert structured["answer"] == "hi there [REDACTED]" == result.content[0].text  # masked
    assert structured["status"] == "answered"
    assert structured["tool_calls"] == []
    assert set(structured) == {"answer", "status", "session_id", "tool_calls", "usage"}
    assert isinstance(structured["session_id"], str)
    assert "step 1 of at most" in (said[0] or "")
    assert llm.requests[0]["messages"][-1] == {"role": "user", "content": "hello?"}


def test_session_id_continues_the_conversation(tmp_path: Path) -> None:
    async def calls(c: Client) -> list[types.CallToolResult]:
        first = await c.call_tool("ask", {"prompt": "my name is Ada"})
        session_id = first.structured_content["session_id"]
        second = await c.call_tool("ask", {"prompt": "my name?", "session_id": session_id})
        fresh = await c.call_tool("ask", {"prompt": "my name?"})
        unknown = await c.call_tool("ask", {"prompt": "x", "session_id": "nope"})
        async with anyio.create_task_group() as tg:  # two at once on one conversation
            for word in ("one", "two"):
                tg.start_soon(c.call_tool, "ask", {"prompt": word, "session_id": session_id})
        return [first, second, fresh, unknown]

    with ScriptedLLM(text("noted"), text("Ada"), text("no idea"), text("1"), text("2")) as llm:
        first, second, fresh, unknown = serve(tmp_path, llm, calls)
        llm.assert_complete()
    later = [m.get("content") for m in llm.requests[4]["messages"]]  # after the other whole
    assert later[-5:-1] in (["my name?", "Ada", "one", "1"], ["my name?", "Ada", "two", "1"])
    saved = {p.stem for p in (tmp_path / "state" / "sessions").glob("*.jsonl")}
    transcript = first.structured_content["session_id"].partition(".")[0]
    assert transcript in saved  # --resume ID continues it (tests/cli/test_serve_callers.py)
    assert second.structured_content["answer"] == "Ada"
    assert second.structured_content["session_id"] == first.structured_content["session_id"]
    said = [(m["role"], m.get("content")) for m in llm.requests[1]["messages"][1:]]
    assert said == [("user", "my name is Ada"), ("assistant", "noted"), ("user", "my name?")]
    assert fresh.structured_content["session_id"] != first.structured_content["session_id"]
    assert [m["role"] for m in llm.requests[2]["messages"]] == ["system", "user"]
    assert unknown.is_error and unknown.content[0].text.startswith("unknown session_id: ")
    assert "call ask without session_id to start one" in unknown.content[0].text


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28's input_required; 2025's
def test_a_declined_approval_does_not_run_the_tool(tmp_path: Path, mode: str) -> None:
    asked.clear()
    write = tool_calls(("local__write_file", {"path": "x.txt", "content": "y"}))

    async def calls(c: Client) -> types.CallToolResult:
        return await c.call_tool("ask", {"prompt": "write x.txt"})

    with ScriptedLLM(write, text("not written")) as llm:
        result = serve(tmp_path, llm, calls, elicitation_callback=declined, mode=mode)
        llm.assert_complete()
    assert not (tmp_path / "x.txt").exists()
    assert len(asked) == 1 and "'write_file' on server 'local'" in asked[0]
    call = result.structured_content["tool_calls"][0]
    assert call["tool"] == "write_file" and call["is_error"]
    assert "declined to run 'write_file'" in llm.requests[1]["messages"][-1]["content"]


def test_an_accepted_approval_runs_and_no_elicitation_refuses(tmp_path: Path) -> None:
    asked.clear()
    write = tool_calls(("local__write_file", {"path": "x.txt", "content": "y"}))
    again = tool_calls(("local__write_file", {"path": "z.txt", "content": "z"}))

    async def calls(c: Client) -> types.CallToolResult:
        return await c.call_tool("ask", {"prompt": "write x.txt"})

    with ScriptedLLM(write, again, text("written")) as llm:  # "always": asked once
        serve(tmp_path, llm, calls, elicitation_callback=accepted)
        llm.assert_complete()
    assert (tmp_path / "x.txt").read_text() == "y" and (tmp_path / "z.txt").read_text() == "z"
    assert len(asked) == 1
    (tmp_path / "x.txt").unlink()
    with ScriptedLLM(write, text("not written")) as llm:  # a client that cannot be asked
        serve(tmp_path, llm, calls)
        llm.assert_complete()
    assert not (tmp_path / "x.txt").exists()
    # Nobody was asked: the model is told the run has no approval for it, not "declined".
    told = llm.requests[1]["messages"][-1]["content"]
    assert "no approval for it" in told and "declined" not in told


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_http_on_loopback_and_a_warning_elsewhere(tmp_path: Path, host: str) -> None:
    port = free_port()

    async def ask(url: str) -> types.CallToolResult:
        async with Client(url) as c:
            with anyio.fail_after(60):
                return await c.call_tool("ask", {"prompt": "hello?"})

    log = tmp_path / "serve.log"
    with ScriptedLLM(text("over http")) as llm:
        env = cli_env(tmp_path, llm.base_url, SECRET)
        command = [sys.executable, RUN_MCP, "serve", "--http", str(port), "--host", host]
        with run_http_server(command, port, env, "/mcp", log, cwd=tmp_path) as url:
            result = anyio.run(ask, url)
            headers = {"Host": f"evil.example:{port}", "Content-Type": "application/json"}
            rebinding = urllib.request.Request(url, b"{}", headers)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(rebinding, timeout=30)
        llm.assert_complete()
    assert result.structured_content["answer"] == "over http"
    warned = f"warning: serving on {host}:{port}: other machines can reach it"
    assert (warned in log.read_text()) == (host != "127.0.0.1")
    if host == "127.0.0.1":  # DNS rebinding: a page's request for another host name
        assert refused.value.code == 421  # "Invalid Host header"
    else:
        assert refused.value.code != 421


def test_host_without_http_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_cli(
        ["serve", "--host", "0.0.0.0"], tmp_path, base_url=DEAD_MODEL, api_key=SECRET, timeout=60
    )
    assert proc.returncode != 0
    assert "--host is the address of --http: pass --http PORT too" in proc.stderr


def test_at_most_32_conversations_are_kept_the_oldest_closed(tmp_path: Path) -> None:
    async def calls(c: Client) -> list[types.CallToolResult]:
        first = await c.call_tool("ask", {"prompt": "first"})
        second = await c.call_tool("ask", {"prompt": "second"})
        for n in range(31):  # 33 in all: the first (used least recently) is closed
            await c.call_tool("ask", {"prompt": f"more {n}"})
        ids = [r.structured_content["session_id"] for r in (first, second)]
        return [await c.call_tool("ask", {"prompt": "again", "session_id": i}) for i in ids]

    with ScriptedLLM(*[text("ok")] * 34) as llm:
        gone, kept = serve(tmp_path, llm, calls)
        llm.assert_complete()
    assert gone.is_error and "was closed as one of more than 32" in gone.content[0].text
    assert kept.structured_content["status"] == "answered"


def test_a_required_server_that_does_not_start_ends_serve_with_exit_1(tmp_path: Path) -> None:
    proc = run_cli(
        ["serve", "--server-command", "no-such-command-xyz"],
        tmp_path,
        base_url=DEAD_MODEL,
        api_key=SECRET,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "error: server 'main' is unavailable" in proc.stderr
    assert proc.stdout == ""  # stdout is the protocol's


def test_the_client_closing_ends_serve_with_exit_0_and_no_empty_session(tmp_path: Path) -> None:
    # stdin is /dev/null: the client closes at once
    proc = run_cli(["serve"], tmp_path, base_url=DEAD_MODEL, api_key=SECRET, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert not list((tmp_path / "state" / "sessions").glob("*.jsonl"))


def test_a_question_left_unanswered_is_a_no_and_ends_the_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The caller that never retries with its answer (2026-07-28): after ANSWER_WAIT (10
    minutes, as docs/programs.md says; shortened here) the call is refused, the turn ended."""
    assert serve_conversations.ANSWER_WAIT == 600
    monkeypatch.setattr(serve_conversations, "ANSWER_WAIT", 0.05)
    request = cast(ApprovalRequest, None)  # only carried to the caller

    async def main() -> tuple[str, Any, bool]:
        turn = serve_conversations.Turn(cast(Any, None), elicits=True)
        said = await turn.ask(request)
        return said, turn.out.receive_nowait(), turn.scope.cancel_called

    said, question, ended = anyio.run(main)
    assert said == "no" and isinstance(question, serve_conversations.Question) and ended


def test_a_client_without_the_tasks_extension_gets_no_task_methods(tmp_path: Path) -> None:
    """The SDK's client declares no tasks extension: `ask` is the plain call (the tests
    above) and the task methods answer -32021 (tests/cli/test_serve_tasks.py: with it)."""

    async def calls(c: Client) -> MCPError:
        with pytest.raises(MCPError) as refused:
            await send_raw(c.session, "tasks/get", {"taskId": "0" * 32}, 30)
        return refused.value

    with ScriptedLLM() as llm:
        refused = serve(tmp_path, llm, calls)
    assert refused.code == -32021 and "io.modelcontextprotocol/tasks" in refused.message
