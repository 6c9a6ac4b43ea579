"""Fault injection against real servers: every failure becomes an observation or a status.

Each test starts its own server processes (stdio children, or HTTP servers on ports the
OS picked) in temp dirs and stops them; waits are polls bounded by anyio.fail_after.

Covered elsewhere, not repeated here: invalid JSON arguments and unknown tools become
observations (tests/loop/test_react.py::test_invalid_json_and_unknown_tool_become_observations);
429 twice then success is one answer after two retries
(tests/model/test_llm.py::test_429_twice_then_success_honours_retry_after); a corrupted last
transcript line is skipped with a warning on resume
(tests/common/test_memory_and_transcript.py::test_transcript_round_trip_and_corrupt_last_line).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from hypothesis import given
from hypothesis import settings as fuzz_settings
from hypothesis import strategies as st

from agent.common.errors import ConfigError
from agent.common.memory import Memory
from agent.config.build import build_settings, load_toml
from agent.config.servers import load_mcp_config
from agent.config.settings import ServerConfig
from agent.tools.base import MAX_RESTARTS
from agent.tools.declarations import openai_tool
from agent.tools.registry import ToolRegistry
from agent.tools.results import strip_marker, to_observation
from agent.tools.toolspec import ToolSpec
from tests.support.processes import alive
from tests.support.servers import (
    REPO_ROOT,
    SUPPORT,
    fault_server_command,
    free_port,
    http_server_on,
    once_server_command,
    settings_for,
    stdio,
    time_server_command,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def bundled(name: str, root: Path, **kw: Any) -> ServerConfig:
    command = (sys.executable, ["-m", "agent.server", "--root", str(root)])
    return stdio(name, command, env={"PYTHONPATH": str(REPO_ROOT)}, **kw)


async def wait_for_state(registry: ToolRegistry, server: str, state: str) -> None:
    with anyio.fail_after(10):
        while registry.servers[server].status.state != state:  # noqa: ASYNC110 - polled
            await anyio.sleep(0.02)


async def server_pid(registry: ToolRegistry, server: str) -> int:
    """The bundled server runs bash as its direct child, so $PPID is the server."""
    obs = await registry.call(f"{server}__bash", {"command": "echo $PPID"})
    assert not obs.is_error, obs.text
    return int(obs.text.split("\n")[1])


# --------------------------------------------------------------------------- reconnect


async def test_stdio_server_killed_between_calls_is_restarted_on_the_next_call(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path, bundled("local", tmp_path))
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            pid = await server_pid(registry, "local")
            os.kill(pid, signal.SIGKILL)
            await wait_for_state(registry, "local", "lost")  # noticed before any call
            obs = await registry.call("local__get_current_time", {"timezone": "UTC"})
            assert not obs.is_error, obs.text
            assert '"timezone": "UTC"' in obs.text
            status = registry.servers["local"].status
            assert status.state == "ready" and status.restarts == 1
            assert status.last_restart is not None and "stopped" in (status.error or "")
            assert await server_pid(registry, "local") != pid


async def test_call_in_flight_when_the_server_dies_says_it_stopped(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, stdio("f", fault_server_command(tmp_path)))
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            obs = await registry.call("f__die", {})
            assert obs.is_error
            assert "stopped while running tool 'die'" in obs.text
            assert "restarted on the next call" in obs.text
            assert registry.servers["f"].status.state == "lost"
            again = await registry.call("f__echo", {"text": "back again"})
            assert not again.is_error and "back again" in again.text
            assert registry.servers["f"].status.restarts == 1
    log = (tmp_path / "state" / "logs" / "f.log").read_text()
    assert "dying on purpose" in log  # stderr reached the log through the pump


async def test_server_that_keeps_dying_is_marked_down_and_others_keep_working(
    tmp_path: Path,
) -> None:
    settings = settings_for(
        tmp_path,
        stdio("f", fault_server_command(tmp_path)),
        stdio("time", time_server_command()),
    )
    with anyio.fail_after(90):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            for restarts in range(MAX_RESTARTS + 1):
                obs = await registry.call("f__die", {})
                assert obs.is_error and "stopped while running tool 'die'" in obs.text
                assert registry.servers["f"].status.restarts == restarts
            status = registry.servers["f"].status
            assert status.state == "down", status
            assert "now down" in obs.text and "stopped 4 times" in obs.text
            assert status.stderr_tail and "dying on purpose" in status.stderr_tail[-1]
            refused = await registry.call("f__echo", {"text": "hello?"})
            assert refused.is_error and "unavailable" in refused.text and "down" in refused.text
            ok = await registry.call("time__get_current_time", {"timezone": "UTC"})
            assert not ok.is_error


async def test_server_that_cannot_restart_is_down_with_its_last_stderr_lines(
    tmp_path: Path,
) -> None:
    settings = settings_for(
        tmp_path,
        stdio("once", once_server_command(tmp_path, tmp_path), env={"PYTHONPATH": str(REPO_ROOT)}),
        bundled("local", tmp_path),
    )
    with anyio.fail_after(90):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            os.kill(await server_pid(registry, "once"), signal.SIGKILL)
            await wait_for_state(registry, "once", "lost")
            started = time.monotonic()
            obs = await registry.call("once__get_current_time", {})
            assert obs.is_error and "unavailable" in obs.text
            assert time.monotonic() - started < 10  # four attempts with short backoff
            status = registry.servers["once"].status
            assert status.state == "down" and status.restarts == 0
            assert "4 reconnect attempts failed" in (status.error or "")
            assert "locked by a previous run" in (status.error or "")
            assert any("locked by a previous run" in line for line in status.stderr_tail)
            ok = await registry.call("local__get_current_time", {})
            assert not ok.is_error


async def test_a_down_server_is_tried_again_once_its_cool_down_has_passed(
    tmp_path: Path,
) -> None:
    """Down is not forever: a server someone fixed (or redeployed) comes back in-session."""
    command = once_server_command(tmp_path, tmp_path)
    settings = settings_for(tmp_path, stdio("once", command, env={"PYTHONPATH": str(REPO_ROOT)}))
    with anyio.fail_after(90):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            server = registry.servers["once"]
            server.down_retry_after = 3.0  # room for the early call on a busy machine
            os.kill(await server_pid(registry, "once"), signal.SIGKILL)
            await wait_for_state(registry, "once", "lost")
            down = await registry.call("once__get_current_time", {})
            assert server.status.state == "down", down.text
            early = await registry.call("once__get_current_time", {})
            assert early.is_error and "tried again in" in early.text
            (tmp_path / "started.marker").unlink()  # the fault is fixed
            await anyio.sleep(3.1)
            back = await registry.call("once__get_current_time", {})
            assert not back.is_error, back.text
            status = server.status  # read anew: the "down" above no longer holds
            assert status.state == "ready" and status.restarts == 1


async def test_server_that_dies_at_start_fails_with_its_stderr_and_others_work(
    tmp_path: Path,
) -> None:
    crash = (sys.executable, ["-c", "import sys; sys.exit('fatal: no config file found')"])
    settings = settings_for(tmp_path, stdio("crash", crash), bundled("local", tmp_path))
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            failures = await registry.connect_all()
            assert [f.server for f in failures] == ["crash"]
            assert "fatal: no config file found" in failures[0].cause
            status = registry.servers["crash"].status
            assert status.state == "failed" and status.stderr_tail == [
                "fatal: no config file found"
            ]
            ok = await registry.call("local__get_current_time", {})
            assert not ok.is_error


@pytest.mark.parametrize("kind", ["bundled-sse", "bundled-http", "everything-http"])
async def test_network_server_restarted_on_the_same_port_resumes(kind: str, tmp_path: Path) -> None:
    port = free_port()
    transport = "sse" if kind.endswith("sse") else "http"
    tool, args = ("echo", {"message": "hi"}) if kind == "everything-http" else ("bash", {})
    tool, args = ("echo", {"message": "hi"}) if kind == "everything-http" else ("list_dir", {})
    with contextlib.ExitStack() as first:
        url = first.enter_context(http_server_on(kind, port, tmp_path, tmp_path / "1.log"))
        server = ServerConfig(name="net", type=transport, url=url)  # type: ignore[arg-type]
        async with ToolRegistry(settings_for(tmp_path, server)) as registry:
            with anyio.fail_after(30):
                assert await registry.connect_all() == []
                assert not (await registry.call(f"net__{tool}", args)).is_error
            first.close()  # the server stops ...
            with http_server_on(kind, port, tmp_path, tmp_path / "2.log"):  # ... and comes back
                with anyio.fail_after(30):
                    obs = await registry.call(f"net__{tool}", args)
                    if obs.is_error:  # the stop was seen during that call: it says so
                        assert "stopped while running" in obs.text, obs.text
                        obs = await registry.call(f"net__{tool}", args)
                    assert not obs.is_error, obs.text
                status = registry.servers["net"].status
                assert status.state == "ready" and status.restarts == 1, status


# --------------------------------------------------------------------------- timeouts


async def test_tool_sleeping_past_tool_timeout_returns_within_timeout_plus_one(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path, bundled("local", tmp_path, tool_timeout=1))
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            started = time.monotonic()
            obs = await registry.call("local__bash", {"command": "sleep 30"})
            elapsed = time.monotonic() - started
            assert obs.is_error and "timed out after 1 s" in obs.text
            assert elapsed < 2.0, elapsed
            again = await registry.call("local__get_current_time", {})
            assert not again.is_error and registry.servers["local"].status.state == "ready"


async def test_frozen_server_never_holds_a_call_beyond_timeout_plus_one(tmp_path: Path) -> None:
    """SIGSTOP: the process lives but answers nothing, not even cancellation."""
    settings = settings_for(tmp_path, bundled("local", tmp_path, tool_timeout=1))
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            pid = await server_pid(registry, "local")
            await assert_frozen_calls_time_out(registry, "local__get_current_time", pid, 1)


async def assert_frozen_calls_time_out(
    registry: ToolRegistry, tool: str, pid: int, calls: int
) -> None:
    """SIGSTOP the server: each call ends as a 1 s timeout within 2 s; thawed, it answers."""
    os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(calls):
            started = time.monotonic()
            obs = await registry.call(tool, {})
            assert time.monotonic() - started < 2.0
            assert obs.is_error and "timed out after 1 s" in obs.text
    finally:
        os.kill(pid, signal.SIGCONT)
    again = await registry.call(tool, {})
    assert not again.is_error, again.text


def pid_listening_on(port: int) -> int:
    """The test server started with `--port PORT` (its command line says so)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if f"--port\0{port}\0".encode() in cmdline.read_bytes():
                return int(cmdline.parent.name)
        except OSError:
            continue
    raise AssertionError(f"no process serves port {port}")


async def test_frozen_http_server_never_holds_a_call_beyond_timeout_plus_one(
    tmp_path: Path,
) -> None:
    """Over HTTP the SDK's courtesy cancel to a frozen server can block for 5 s more."""
    port = free_port()
    with http_server_on("bundled-http", port, tmp_path, tmp_path / "http.log") as url:
        server = ServerConfig(name="net", type="http", url=url, tool_timeout=1)
        async with ToolRegistry(settings_for(tmp_path, server)) as registry:
            with anyio.fail_after(60):
                assert await registry.connect_all() == []
                pid = pid_listening_on(port)
                # Two calls: the second meets the connection the first left stuck.
                await assert_frozen_calls_time_out(registry, "net__get_current_time", pid, 2)


RAW_SERVER = str(SUPPORT / "raw_server.py")


async def test_a_reply_that_is_not_utf8_does_not_stall_the_connection(tmp_path: Path) -> None:
    raw = stdio("raw", (sys.executable, [RAW_SERVER, "badutf8"]), tool_timeout=5)
    with anyio.fail_after(30):
        async with ToolRegistry(settings_for(tmp_path, raw)) as registry:
            assert await registry.connect_all() == []
            started = time.monotonic()
            for _ in range(2):
                obs = await registry.call("raw__echo", {})
                assert not obs.is_error and "bad \ufffd\ufffd bytes" in obs.text, obs.text
            assert time.monotonic() - started < 4  # not the 5 s tool timeout
            assert registry.servers["raw"].status.restarts == 0


async def test_what_one_server_puts_into_every_model_request_is_bounded(tmp_path: Path) -> None:
    """200 KB of instructions and a schema of 500 KB must not ride along in every request."""
    raw = stdio("raw", (sys.executable, [RAW_SERVER, "hostile"]))
    with anyio.fail_after(30):
        async with ToolRegistry(settings_for(tmp_path, raw)) as registry:
            assert await registry.connect_all() == []
            memory = Memory.with_instructions(None, registry.instructions())
            tools = registry.openai_tools()
    assert (
        len(memory.system_prompt) < 8000 and "more characters of notes cut" in memory.system_prompt
    )
    [tool] = tools
    assert len(json.dumps(tool)) < 25_000
    assert "was too large to send" in tool["function"]["description"]
    assert tool["function"]["parameters"] == {
        "type": "object",
        "additionalProperties": True,
        "properties": {},
    }


async def test_more_tools_than_an_endpoint_takes_is_a_warning_without_tool_search(
    tmp_path: Path,
) -> None:
    raw = stdio("raw", (sys.executable, [RAW_SERVER, "many"]))
    for search, warned in (("off", True), ("auto", False)):
        with anyio.fail_after(30):
            settings = settings_for(tmp_path, raw, tool_search=search)
            async with ToolRegistry(settings) as registry:
                assert await registry.connect_all() == []
        assert len(registry.tools) == 200
        if warned:  # with tool search the model never gets them all in one request
            [warning] = registry.warnings
            assert "200 tools" in warning and "include_tools" in warning
        else:
            assert registry.warnings == []


def test_schema_descriptions_and_depth_are_cut() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(500):
        deep = {"type": "object", "properties": {"x": deep}}
    spec = ToolSpec(
        "s",
        "t",
        "d",
        {
            "type": "object",
            "properties": {"q": {"type": "string", "description": "inject " * 1000}, "deep": deep},
        },
    )
    schema = openai_tool("s__t", spec)["function"]["parameters"]
    assert schema["properties"]["q"]["description"].endswith(" [...]")
    assert len(schema["properties"]["q"]["description"]) < 600
    json.dumps(schema)  # a 500-deep schema would break the encoder; the cut one does not


async def test_a_flooded_server_log_is_rotated_not_grown_without_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent.tools.server_log.LOG_LIMIT", 4000)
    settings = settings_for(tmp_path, stdio("f", fault_server_command(tmp_path)))
    log = tmp_path / "state" / "logs" / "f.log"
    with anyio.fail_after(30):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            for i in range(12):  # each call logs ~1 KB to stderr
                assert not (await registry.call("f__echo", {"text": f"{i}:" + "x" * 1000})).is_error
            logs = (log, log.with_name("f.log.1"))
            with anyio.fail_after(5):
                while not any(p.is_file() and "11:" in p.read_text() for p in logs):  # noqa: ASYNC110 -- the stderr pump is asynchronous
                    await anyio.sleep(0.05)
    assert log.with_name("f.log.1").is_file()
    assert log.stat().st_size <= 4000 + 1100 and log.stat().st_mode & 0o777 == 0o600


async def test_children_a_server_leaves_behind_are_stopped_with_it(tmp_path: Path) -> None:
    """A server that exits promptly on stdin EOF is never signalled by the SDK; its
    children (same process group) would outlive the agent."""
    settings = settings_for(tmp_path, stdio("f", fault_server_command(tmp_path)))
    with anyio.fail_after(30):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            child = int(
                strip_marker((await registry.call("f__spawn_child", {})).text).splitlines()[-1]
            )
            os.kill(child, 0)  # alive while the server is
        deadline = time.monotonic() + 5
        while alive(child):
            if time.monotonic() > deadline:
                os.kill(child, signal.SIGKILL)
                raise AssertionError(f"child {child} of the server outlived it")
            await anyio.sleep(0.05)


# --------------------------------------------------------------------------- what comes back


async def test_five_megabyte_result_is_cut_to_max_observe_stating_the_size(
    tmp_path: Path,
) -> None:
    settings = settings_for(tmp_path, stdio("f", fault_server_command(tmp_path)), max_observe=4000)
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            obs = await registry.call("f__big", {"chars": 5_000_000})
    size = 5_000_003
    assert obs.truncated_chars == size - 4000
    assert f"{size - 4000} characters cut (output was {size} characters)" in obs.text
    assert strip_marker(obs.text).rstrip().endswith("END")
    assert len(obs.text) < 4000 + 400  # the budget plus marker and note


async def test_markup_and_ansi_escapes_stay_literal_in_the_observation(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, stdio("f", fault_server_command(tmp_path)))
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            obs = await registry.call("f__markup", {})
    assert "[bold red]x[/] \x1b[31mred\x1b[0m [link=http://evil]click[/link]" in obs.text
    assert obs.text.startswith('<untrusted-data server="f" id=')
    assert strip_marker(obs.text) != obs.text  # a whole envelope, begin and end


async def test_colliding_tool_names_get_distinct_public_names_and_never_shadow_terminate(
    tmp_path: Path,
) -> None:
    command = fault_server_command(tmp_path)
    settings = settings_for(
        tmp_path,
        stdio("a", command, env={"FAULT_SERVER_NAME": "server-a"}),
        stdio("b", command, env={"FAULT_SERVER_NAME": "server-b"}),
    )
    with anyio.fail_after(60):
        async with ToolRegistry(settings, reserved_names={"terminate"}) as registry:
            assert await registry.connect_all() == []
            names = set(registry.tools)
            assert {"a__terminate", "b__terminate", "a__read_file", "b__read_file"} <= names
            assert "terminate" not in names and "read_file" not in names
            for server in ("a", "b"):
                obs = await registry.call(f"{server}__terminate", {})
                assert f"server-{server} terminate" in obs.text
                obs = await registry.call(f"{server}__read_file", {"path": "x"})
                assert f"server-{server} read_file x" in obs.text
            declared = {t["function"]["name"]: t["function"] for t in registry.openai_tools()}
            assert "terminate" not in declared
            description = declared["a__terminate"]["description"]
            assert description.startswith("[external: a] ")


# --------------------------------------------------------------------------- fuzz

toml_scalars = (
    st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
toml_keys = st.sampled_from(
    ["model", "api_key", "base_url", "max_steps", "max_observe", "tool_timeout", "quiet",
     "approval", "temperature", "stream", "context_window", "verbose", "x"]
)  # fmt: skip
toml_sections = st.sampled_from(["llm", "agent", "ui", "tools", "llm.extra"])


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.encode("unicode_escape").decode().replace('"', '\\"') + '"'
    return repr(value)


toml_docs = st.dictionaries(
    toml_sections, st.dictionaries(toml_keys, toml_scalars, max_size=4), max_size=3
).map(
    lambda doc: "\n".join(
        f"[{section}]\n" + "\n".join(f"{k} = {toml_value(v)}" for k, v in table.items())
        for section, table in doc.items()
    )
)


@fuzz_settings(max_examples=150, deadline=None)
@given(st.one_of(toml_docs, st.text(max_size=200)))
def test_config_toml_fuzz_gives_settings_or_config_error(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    path = tmp_path_factory.mktemp("toml") / "config.toml"
    path.write_text(text, encoding="utf-8")
    with contextlib.suppress(ConfigError):
        load_toml(path)
    with contextlib.suppress(ConfigError):
        build_settings(
            config_path=path,
            mcp_config_path=None,
            cli_server=None,
            environ={},
            workspace=path.parent,
        )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=16),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(
        st.sampled_from(["mcpServers", "command", "args", "url", "type", "env", "headers",
                         "timeout", "enabled", "include_tools", "a", "${X}"]) | st.text(max_size=6),
        children,
        max_size=5,
    ),
    max_leaves=25,
)  # fmt: skip


@fuzz_settings(max_examples=200, deadline=None)
@given(st.one_of(json_values, st.dictionaries(st.just("mcpServers"), json_values)))
def test_mcp_config_fuzz_of_whole_documents_gives_servers_or_config_error(
    tmp_path_factory: pytest.TempPathFactory, doc: Any
) -> None:
    path = tmp_path_factory.mktemp("mcp") / "mcp.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with contextlib.suppress(ConfigError):
        load_mcp_config(path, {"X": "1"})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


blobs = st.one_of(st.binary(max_size=64).map(_b64), st.text(max_size=40))  # valid or not
uris = st.sampled_from(["file:///a", "mem://x", "demo://r/1", "https://h/p?q=1"])
mimes = st.one_of(st.none(), st.sampled_from(["text/plain", "image/png", "application/zip"]))
blocks = st.one_of(
    st.builds(types.TextContent, text=st.text(max_size=200)),
    st.builds(types.ImageContent, data=blobs, mime_type=st.sampled_from(["image/png", "x/y"])),
    st.builds(types.AudioContent, data=blobs, mime_type=st.just("audio/wav")),
    st.builds(types.ResourceLink, uri=uris, name=st.text(max_size=20), mime_type=mimes,
              description=st.one_of(st.none(), st.text(max_size=20))),
    st.builds(types.EmbeddedResource, resource=st.one_of(
        st.builds(types.TextResourceContents, uri=uris, mime_type=mimes, text=st.text(max_size=50)),
        st.builds(types.BlobResourceContents, uri=uris, mime_type=mimes, blob=blobs),
    )),
)  # fmt: skip


@fuzz_settings(max_examples=300, deadline=None)
@given(
    st.lists(blocks, max_size=6),
    st.one_of(st.none(), json_values),
    st.booleans(),
    st.integers(min_value=101, max_value=3000),
)
def test_result_converter_fuzz_never_crashes(
    content: list[Any], structured: Any, is_error: bool, limit: int
) -> None:
    if structured is not None and not isinstance(structured, dict):
        structured = {"value": structured}
    result = types.CallToolResult(content=content, structured_content=structured, is_error=is_error)
    obs = to_observation(result, "srv", limit)
    prefix = "The tool reported an error:\n" if is_error else ""
    assert obs.text.startswith(prefix + '<untrusted-data server="srv" id=')
    assert strip_marker(obs.text) != obs.text
    assert obs.is_error == is_error
    assert obs.truncated_chars >= 0


async def test_closing_during_a_hung_reconnect_neither_hangs_nor_leaks(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(REPO_ROOT), "ONCE_SERVER_HANG": "1"}
    settings = settings_for(
        tmp_path, stdio("once", once_server_command(tmp_path, tmp_path), env=env)
    )
    results: list[Any] = []
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            os.kill(await server_pid(registry, "once"), signal.SIGKILL)
            await wait_for_state(registry, "once", "lost")

            async def call() -> None:
                results.append(await registry.call("once__get_current_time", {}))

            registry._tg.start_soon(call)  # type: ignore[union-attr]
            await wait_for_state(registry, "once", "reconnecting")
            log = tmp_path / "state" / "logs" / "once.log"
            with anyio.fail_after(10):  # the new process is up and hanging
                while "locked" not in log.read_text():  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            closing_started = time.monotonic()
        assert time.monotonic() - closing_started < 8  # not the 30 s connect timeout
    assert registry.servers["once"].status.state == "closed"
    assert results and results[0].is_error and "unavailable" in results[0].text
