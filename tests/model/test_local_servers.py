"""What local model servers do to the agent, replayed without a model (the fast suite).

llama-server's error event inside a stream and its context-overflow body, llama-cpp-python's
interop needs (tool_choice, content "" beside tool calls), servers that report no usage,
small context windows, and finding a local server when nothing is configured. The same
behaviours against a real model: tests/e2e/test_real_model.py.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from agent.common.errors import ConfigError, ContextOverflowError, ModelError
from agent.common.memory import Memory
from agent.config.settings import Settings
from agent.loop.events import Event, Notice, RunFinished
from agent.loop.react import Agent
from agent.model.local import find_local_server, foreign_ports, listener_owners
from agent.model.model_types import Reply, RetryNotice, Usage
from agent.session.startup import make_model
from agent.tools.declarations import openai_tool
from agent.tools.toolspec import ToolSpec
from agent.ui.output import RunRecord
from agent.ui.render import NORMAL, QUIET, EventRenderer
from tests.support.asgi_thread import serve
from tests.support.cli import run_cli
from tests.support.fake_llm import (
    TOOL,
    ScriptedLLM,
    Turn,
    collect,
    delayed,
    error,
    llama_overflow,
    model_for,
    stream_error,
    text,
)
from tests.support.fake_model import FakeModel, FakeTools, answer, calls, drain
from tests.support.servers import free_port, time_server_command


def notices(events: list[Event]) -> list[str]:
    return [e.message for e in events if isinstance(e, Notice)]


# -- the model client: every error a local server sends ---------------------------------


@pytest.mark.anyio
async def test_an_error_event_inside_the_stream_is_retried_and_its_text_discarded() -> None:
    with ScriptedLLM(stream_error("Let me think"), text("whole answer")) as llm:
        items = await collect(model_for(llm))
    [notice] = [i for i in items if isinstance(i, RetryNotice)]
    assert notice.discarded_text and "peg-native" in notice.reason
    assert items[-1].content == "whole answer"
    llm.assert_complete()


@pytest.mark.anyio
async def test_an_error_event_every_time_ends_as_a_model_error_not_a_crash() -> None:
    with (
        ScriptedLLM(*[stream_error()] * 2) as llm,
        pytest.raises(ModelError, match="failed after 2 attempts: error event 500"),
    ):
        await collect(model_for(llm, max_retries=1))
    llm.assert_complete()


@pytest.mark.anyio
async def test_a_4xx_error_event_in_the_stream_is_not_retried() -> None:
    with (
        ScriptedLLM(stream_error(code=400, message="bad grammar")) as llm,
        pytest.raises(ModelError, match="bad grammar") as info,
    ):
        await collect(model_for(llm))
    assert not isinstance(info.value, ContextOverflowError)
    assert len(llm.requests) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_llama_server_overflow_is_recognised_with_its_counts(stream: bool) -> None:
    with (
        ScriptedLLM(llama_overflow(5367, 2048)) as llm,
        pytest.raises(ContextOverflowError) as info,
    ):
        await collect(model_for(llm, stream=stream))
    assert (info.value.context_window, info.value.request_tokens) == (2048, 5367)
    assert len(llm.requests) == 1


@pytest.mark.anyio
async def test_overflow_is_recognised_by_its_type_alone() -> None:
    body = {"error": {"message": "nope", "type": "exceed_context_size_error", "code": 400}}
    with (
        ScriptedLLM(Turn("error", status=400, body=body)) as llm,
        pytest.raises(ContextOverflowError),
    ):
        await collect(model_for(llm))


@pytest.mark.anyio
async def test_openai_wording_gives_the_window_and_the_messages_tokens() -> None:
    message = (
        "This model's maximum context length is 2048 tokens. However, you requested 2400 "
        "tokens (2300 in the messages, 100 in the completion)."
    )
    with (
        ScriptedLLM(error(400, message, code="context_length_exceeded")) as llm,
        pytest.raises(ContextOverflowError) as info,
    ):
        await collect(model_for(llm))
    assert (info.value.context_window, info.value.request_tokens) == (2048, 2300)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 422, 500])
async def test_a_validation_error_is_not_retried(status: int) -> None:
    # llama-cpp-python answers a request it cannot validate with a 500 and pydantic's text.
    message = (
        "1 validation error for ChatCompletionRequestAssistantMessage content: "
        "Input should be a valid string"
    )
    with (
        ScriptedLLM(error(status, message)) as llm,
        pytest.raises(ModelError, match="Input should be a valid string"),
    ):
        await collect(model_for(llm))
    assert len(llm.requests) == 1


@pytest.mark.anyio
async def test_an_empty_stream_is_asked_again_without_streaming_from_then_on() -> None:
    with ScriptedLLM(Turn("empty"), text("unstreamed answer"), text("later")) as llm:
        model = model_for(llm)
        items = await collect(model, [TOOL])
        await collect(model)
    [notice] = [i for i in items if isinstance(i, RetryNotice)]
    assert "without streaming" in notice.reason and not notice.discarded_text
    assert items[-1].content == "unstreamed answer"
    assert [r.get("stream", False) for r in llm.requests] == [True, False, False]
    llm.assert_complete()


@pytest.mark.anyio
async def test_tools_go_with_tool_choice_auto_and_none_without_tools() -> None:
    with ScriptedLLM(text("a"), text("b")) as llm:
        await collect(model_for(llm), [TOOL])
        await collect(model_for(llm))
    assert llm.requests[0]["tool_choice"] == "auto"
    assert "tool_choice" not in llm.requests[1] and "tools" not in llm.requests[1]


@pytest.mark.anyio
async def test_usage_the_server_does_not_report_is_unknown_not_zero() -> None:
    with ScriptedLLM(Turn("text", content="hi", finish_reason="stop", usage=None)) as llm:
        items = await collect(model_for(llm))
    usage = items[-1].usage
    assert not usage.known and usage.shown(usage.prompt_tokens) == "unknown"
    record = RunRecord(RunFinished("answered", "hi", 1, usage))
    assert record.to_json()["usage"] == {
        "prompt_tokens": None,
        "completion_tokens": None,
        "cached_tokens": None,
        "cost_usd": "unknown",
    }
    partial = Usage(10, 5) + usage  # one request of two reported: a lower bound
    assert partial.known and partial.shown(15) == "15+"


@pytest.mark.anyio
async def test_a_model_that_wants_max_completion_tokens_gets_it_at_once() -> None:
    refusal = (
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead."
    )
    with ScriptedLLM(error(400, refusal), text("ok"), text("again")) as llm:
        model = model_for(llm, max_tokens=300)
        items = await collect(model)
        await collect(model)
    assert items[-1].content == "ok" and not any(isinstance(i, RetryNotice) for i in items)
    assert llm.requests[0]["max_tokens"] == 300
    for request in llm.requests[1:]:  # remembered for later requests too
        assert request["max_completion_tokens"] == 300 and "max_tokens" not in request


def test_the_default_model_client_caps_replies() -> None:
    settings = Settings.model_validate({"llm": {"api_key": "sk-1"}})
    assert make_model(settings).max_tokens == 4096


# -- the loop: small windows, overflow, what is shown ----------------------------------


def history_agent(script: list[Any], **kw: Any) -> tuple[Agent, FakeModel]:
    model = FakeModel(script)
    memory = Memory()
    for i in range(20):  # ~20 turns of ~300 tokens each
        memory.add_user(f"question {i} " + "x" * 1200)
        memory.add_assistant(f"answer {i} " + "y" * 1200)
    return Agent(model, FakeTools({}), memory, **kw), model


@pytest.mark.anyio
async def test_a_small_window_keeps_what_fits_and_says_what_was_left_out() -> None:
    agent, model = history_agent([answer("ok")], context_window=4096, reserve_tokens=4096)
    events = await drain(agent, "now")
    sent = model.requests[0]
    assert sent[-1]["content"] == "now" and len(sent) > 3  # recent history was kept
    assert sum(len(json.dumps(m)) for m in sent) // 4 < 4096
    [notice] = notices(events)
    assert f"left {41 - len(sent) + 1} older messages" in notice and "4096" in notice


@pytest.mark.anyio
async def test_overflow_resends_smaller_and_later_turns_use_the_learnt_window() -> None:
    overflow = ContextOverflowError("too big", context_window=2048, request_tokens=9000)
    agent, model = history_agent([overflow, answer("fits"), answer("again")])
    events = await drain(agent, "first")
    assert isinstance(events[-1], RunFinished) and events[-1].answer == "fits"
    first, resent = model.requests[0], model.requests[1]
    assert len(resent) < len(first)
    assert any("did not fit the model's context (2048 tokens)" in n for n in notices(events))
    await drain(agent, "second")  # no overflow this time: the window was learnt
    assert len(model.requests) == 3 and len(model.requests[2]) <= len(resent) + 2
    model.assert_complete()


@pytest.mark.anyio
async def test_overflow_with_nothing_left_to_drop_is_one_clear_error() -> None:
    agent = Agent(FakeModel([ContextOverflowError("too big")]), FakeTools({}), Memory())
    done = (await drain(agent, "a question"))[-1]
    assert isinstance(done, RunFinished) and done.status == "error"
    assert "even with the older history left out" in (done.error or "")
    assert "include_tools" in (done.error or "")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("max_tokens", "completion", "says"),
    [
        (None, 50, "cut short by the server"),
        (4096, 50, "server's context limit"),
        (100, 100, "max_tokens limit (100"),
    ],
)
async def test_a_cut_reply_names_the_limit_that_cut_it(
    max_tokens: int | None, completion: int, says: str
) -> None:
    model = FakeModel([Reply("partial", (), Usage(10, completion), "length")])
    model.max_tokens = max_tokens  # type: ignore[attr-defined]
    events = await drain(Agent(model, FakeTools({}), Memory()), "x")
    assert any(says in n for n in notices(events)), notices(events)


@pytest.mark.anyio
async def test_an_assistant_tool_call_message_carries_empty_content_not_null() -> None:
    async def echo(args: dict[str, Any]) -> str:
        return "echoed"

    model = FakeModel([calls(("echo", {})), answer("done")])
    await drain(Agent(model, FakeTools({"echo": echo}), Memory()), "go")
    [assistant] = [m for m in model.requests[1] if m["role"] == "assistant"]
    assert assistant["content"] == "" and assistant["tool_calls"]


@pytest.mark.anyio
@pytest.mark.parametrize("verbosity", [QUIET, NORMAL])
async def test_the_repl_shows_a_terminate_answer_once(verbosity: int) -> None:
    final = {"status": "success", "answer": "The capital is Paris."}
    model = FakeModel([calls(("terminate", final)), answer("Plain answer here.")])
    agent = Agent(model, FakeTools({}), Memory())
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False, color_system=None)
    renderer = EventRenderer(console, verbosity=verbosity, stream_answer=True)
    for request in ("capital?", "again"):
        for event in await drain(agent, request):
            renderer.handle(event)
    lines = [line.strip() for line in out.getvalue().splitlines()]
    assert lines.count("The capital is Paris.") == 1  # a line of its own: the answer
    assert lines.count("Plain answer here.") == 1


# -- a local server found with no configuration -----------------------------------------


def test_the_first_listed_port_that_answers_wins_and_dead_ports_are_skipped() -> None:
    with ScriptedLLM() as first, ScriptedLLM() as second:
        first.models, second.models = ["qwen2.5:0.5b", "other"], ["second"]
        found = find_local_server((free_port(), first.port, second.port))
    assert found is not None
    assert found.base_url == first.base_url and found.models == ("qwen2.5:0.5b", "other")


def test_a_port_that_accepts_but_never_answers_does_not_hold_the_probe() -> None:
    with socket.socket() as silent, ScriptedLLM() as llm:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts connections (the backlog), never answers
        found = find_local_server((silent.getsockname()[1], llm.port))
    assert found is not None and found.base_url == llm.base_url


@pytest.mark.parametrize(
    "response",
    [
        HTMLResponse("<h1>my dev site</h1>"),
        JSONResponse({"detail": "Not Found"}, 404),
        JSONResponse({"models": ["not the OpenAI shape"]}),
    ],
)
def test_a_web_server_that_is_not_a_model_server_is_not_taken(response: Response) -> None:
    app = Starlette(routes=[Route("/v1/models", lambda request: response)])
    with serve(app) as port:
        assert find_local_server((port,)) is None


def test_no_key_and_no_local_server_names_the_options() -> None:
    with pytest.raises(ConfigError) as info:
        make_model(Settings())
    message = info.value.message
    assert "OPENAI_API_KEY" in message and "--base-url" in message
    for name in ("Ollama 11434", "llama.cpp 8080", "LM Studio 1234", "vLLM"):
        assert name in message


def config_with_ports(tmp_path: Path, *ports: int) -> list[str]:
    path = tmp_path / "config.toml"
    path.write_text(f"[llm]\nlocal_ports = {list(ports)}\n")
    command, args = time_server_command()
    return ["--config", str(path), "--server-command", " ".join([command, *args])]


def test_with_nothing_configured_a_local_server_and_its_model_are_used(tmp_path: Path) -> None:
    with ScriptedLLM(text("local answer")) as llm:
        llm.models = ["smollm2-135m"]
        args = config_with_ports(tmp_path, free_port(), llm.port)
        proc = run_cli([*args, "-p", "hi"], tmp_path, base_url=None, api_key=None)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "local answer"
    assert f"using port {llm.port} at {llm.base_url} (model 'smollm2-135m')" in proc.stderr
    assert llm.requests[0]["model"] == "smollm2-135m"


def test_a_configured_model_is_kept_on_a_found_local_server(tmp_path: Path) -> None:
    with ScriptedLLM(text("ok")) as llm:
        args = config_with_ports(tmp_path, llm.port)
        argv = [*args, "--model", "mine", "-p", "hi"]
        proc = run_cli(argv, tmp_path, base_url=None, api_key=None)
    assert proc.returncode == 0, proc.stderr
    assert llm.requests[0]["model"] == "mine"


def test_with_nothing_found_the_no_key_error_says_where_it_looked(tmp_path: Path) -> None:
    dead = free_port()
    args = config_with_ports(tmp_path, dead)
    proc = run_cli([*args, "-p", "hi"], tmp_path, base_url=None, api_key=None)
    assert proc.returncode == 2 and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert "no API key" in line and f"no local server answered on port {dead}" in line


def test_declarations_leave_out_generated_titles_but_keep_names_and_values() -> None:
    schema = {
        "title": "createArguments",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},  # a parameter named "title"
            "meta": {"type": "object", "default": {"title": "kept: a value, not a schema"}},
        },
    }
    spec = ToolSpec(server="s", name="create", description="", input_schema=schema, title="Make")
    declared = openai_tool("s__create", spec)["function"]
    assert declared["parameters"] == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "meta": {"type": "object", "default": {"title": "kept: a value, not a schema"}},
        },
    }
    assert declared["description"].endswith("] Make")  # a title only when nothing else


def test_an_error_event_mid_stream_in_the_repl_ends_that_turn_not_the_session(
    tmp_path: Path,
) -> None:
    script = [stream_error()] * 4 + [text("second answer")]  # the first turn's 4 attempts
    with ScriptedLLM(*script) as llm:
        args = [*config_with_ports(tmp_path), "-i"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url, stdin="first\nsecond\n")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "peg-native" in proc.stderr and "second answer" in proc.stdout
    llm.assert_complete()


@pytest.mark.anyio
async def test_a_slow_unstreamed_reply_is_waited_for_and_never_sent_twice() -> None:
    # llama-cpp-python after the fall back to unstreamed requests: nothing arrives until
    # the CPU has computed the whole reply. request_timeout (a silence limit) must not cut
    # it, and no copy may queue behind it: one request, one answer.
    with ScriptedLLM(delayed(1.5, text("computed slowly"))) as llm:
        model = model_for(llm, stream=False, request_timeout=0.3, request_deadline=20)
        items = await collect(model, [TOOL])
    assert isinstance(items[-1], Reply) and items[-1].content == "computed slowly"
    assert not [i for i in items if isinstance(i, RetryNotice)]
    assert len(llm.requests) == 1
    llm.assert_complete()


@pytest.mark.anyio
async def test_an_unstreamed_reply_past_the_deadline_is_an_error_not_a_resend() -> None:
    with ScriptedLLM(delayed(3, text("too late"))) as llm:
        model = model_for(llm, stream=False, request_timeout=0.2, request_deadline=1)
        with pytest.raises(ModelError, match="did not finish within 1 s"):
            await collect(model, [TOOL])
    assert len(llm.requests) == 1


def test_the_owner_of_a_loopback_listener_is_read_from_proc() -> None:
    with socket.socket() as mine:
        mine.bind(("127.0.0.1", 0))
        mine.listen()
        port = mine.getsockname()[1]
        if not Path("/proc/net/tcp").exists():
            pytest.skip("no /proc/net/tcp here: the OS does not say who listens")
        assert listener_owners(port) == {os.getuid()}
        assert foreign_ports((port,)) == {}
        assert foreign_ports((port,), uid=os.getuid() + 1) == {port: os.getuid()}


FOREIGN_MODEL_SERVER = """
import http.server, json, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("asked", self.path, flush=True)
        body = json.dumps({"data": [{"id": "theirs"}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    do_POST = do_GET
    def log_message(self, *args): pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="starting another user's listener needs root")
def test_a_model_server_of_another_user_gets_no_prompt(tmp_path: Path) -> None:
    """On a shared machine anyone can listen on 11434: such a listener is never asked."""
    server = subprocess.Popen(
        ["/usr/bin/python3", "-c", FOREIGN_MODEL_SERVER],
        user=65534,
        cwd="/",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        config = tmp_path / "config.toml"
        config.write_text(f"[llm]\nlocal_ports = [{port}]\n")
        proc = run_cli(["--config", str(config), "-p", "hi"], tmp_path, base_url=None, api_key=None)
    finally:
        server.terminate()
        rest, _ = server.communicate(timeout=10)
    assert proc.returncode == 2
    assert (
        f"warning: port {port} is listened on by another user (uid 65534): not used as the "
        f"model; pass --base-url http://127.0.0.1:{port}/v1 to use it anyway"
    ) in proc.stderr
    assert "error: no API key" in proc.stderr
    assert "asked" not in rest  # not even its model list was asked for
