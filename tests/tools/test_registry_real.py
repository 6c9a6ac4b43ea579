"""The registry against real MCP servers: every transport, failures, collisions."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent.config.settings import ServerConfig
from agent.tools.registry import ToolRegistry
from tests.support.asgi_thread import serve
from tests.support.servers import (
    SUPPORT,
    everything_stdio_command,
    free_port,
    settings_for,
    stdio,
    time_server_command,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_everything_over_stdio_sse_and_http(
    tmp_path: Path, everything_sse_url: str, everything_http_url: str
) -> None:
    settings = settings_for(
        tmp_path,
        stdio("ev_stdio", everything_stdio_command()),
        ServerConfig(name="ev_sse", type="sse", url=everything_sse_url),
        ServerConfig(name="ev_http", type="http", url=everything_http_url),
    )
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            for server in ("ev_stdio", "ev_sse", "ev_http"):
                obs = await registry.call(f"{server}__get-sum", {"a": 2, "b": 40})
                assert "42" in obs.text and not obs.is_error
                obs = await registry.call(f"{server}__echo", {"message": "hi there"})
                assert "hi there" in obs.text
                image = await registry.call(f"{server}__get-tiny-image", {})
                assert len(image.images) == 1 and "[image image/png" in image.text
                links = await registry.call(f"{server}__get-resource-links", {"count": 2})
                assert "resource link demo://resource/" in links.text
                embedded = await registry.call(
                    f"{server}__get-resource-reference", {"resourceType": "Text", "resourceId": 1}
                )
                assert "[resource demo://resource/dynamic/text/1" in embedded.text
                structured = await registry.call(
                    f"{server}__get-structured-content", {"location": "Chicago"}
                )
                assert "temperature" in structured.text
                bad = await registry.call(f"{server}__get-sum", {"a": "x"})
                assert bad.is_error


async def test_tool_filters_apply_and_a_misspelt_name_is_reported(tmp_path: Path) -> None:
    server = stdio(
        "time", time_server_command(), include_tools=("get_current_time", "get_curent_time")
    )
    with anyio.fail_after(60):
        async with ToolRegistry(settings_for(tmp_path, server)) as registry:
            assert await registry.connect_all() == []
            assert set(registry.tools) == {"time__get_current_time"}
    [warning] = registry.warnings
    assert "get_curent_time" in warning and "convert_time" in warning  # what it does have


async def test_time_server_over_stdio(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, stdio("time", time_server_command()))
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            obs = await registry.call("time__get_current_time", {"timezone": "Asia/Tokyo"})
            assert '"timezone": "Asia/Tokyo"' in obs.text and "+09:00" in obs.text
            bad = await registry.call("time__get_current_time", {"timezone": "Mars/Base"})
            assert bad.is_error and "Invalid timezone" in bad.text


async def test_dead_servers_are_reported_and_the_good_one_works(tmp_path: Path) -> None:
    hang = (sys.executable, ["-c", "import time; time.sleep(60)"])
    crash = (sys.executable, ["-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"])
    settings = settings_for(
        tmp_path,
        stdio("good", time_server_command()),
        stdio("missing", ("no-such-command-for-mcp-tests", [])),
        stdio("badcwd", time_server_command(), cwd=str(tmp_path / "no-such-dir")),
        stdio("crash", crash),
        stdio("hang", hang, timeout=2),
        ServerConfig(name="refused", type="http", url=f"http://127.0.0.1:{free_port()}/mcp"),
    )
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            failures = {f.server: f for f in await registry.connect_all()}
            assert set(failures) == {"missing", "badcwd", "crash", "hang", "refused"}
            assert "command not found" in failures["missing"].cause
            assert "working directory not found" in failures["badcwd"].cause
            assert "closed the connection" in failures["crash"].cause
            assert "no answer within 2 s" in failures["hang"].cause
            assert "connection refused" in failures["refused"].cause
            assert all(f.step == "connect" for f in failures.values())
            obs = await registry.call("good__get_current_time", {"timezone": "UTC"})
            assert not obs.is_error
            assert {s.name: s.state for s in registry.statuses()}["crash"] == "failed"
    log = (tmp_path / "state" / "logs" / "crash.log").read_text()
    assert "boom" in log


async def _unauthorized(request: Request) -> Response:
    return JSONResponse({"detail": "Missing or invalid Authorization header"}, 401)


async def test_an_http_server_that_refuses_us_is_reported_with_its_status(tmp_path: Path) -> None:
    """The SDK says only "Server returned an error response"; the status says what to fix."""
    app = Starlette(routes=[Route("/mcp", _unauthorized, methods=["GET", "POST", "DELETE"])])
    with serve(app) as port:
        server = ServerConfig(name="locked", type="http", url=f"http://127.0.0.1:{port}/mcp")
        async with ToolRegistry(settings_for(tmp_path, server)) as registry:
            with anyio.fail_after(30):
                [failure] = await registry.connect_all()
    assert failure.server == "locked" and failure.step == "connect"
    assert "HTTP 401" in failure.cause and "Authorization header" in failure.cause


async def test_sse_connect_errors_get_hints_like_http_ones(
    tmp_path: Path, everything_sse_url: str, everything_http_url: str
) -> None:
    """A wrong path, or a streamable HTTP endpoint given as SSE: the status and what to fix,
    not a raw HTTPStatusError."""
    wrong_path = everything_sse_url.rsplit("/", 1)[0] + "/nope"
    settings = settings_for(
        tmp_path,
        ServerConfig(name="wrong_path", type="sse", url=wrong_path),
        ServerConfig(name="not_sse", type="sse", url=everything_http_url),
    )
    async with ToolRegistry(settings) as registry:
        with anyio.fail_after(30):
            failures = {f.server: f.cause for f in await registry.connect_all()}
    assert "HTTP 404" in failures["wrong_path"]
    assert "SSE is usually served at /sse" in failures["wrong_path"]
    assert re.search(r"HTTP 4\d\d", failures["not_sse"]), failures["not_sse"]
    assert (
        "not an SSE endpoint" in failures["not_sse"] and "--connection http" in failures["not_sse"]
    )
    assert "HTTPStatusError" not in " ".join(failures.values())


async def test_same_tool_name_on_two_servers_is_callable_under_two_names(tmp_path: Path) -> None:
    settings = settings_for(
        tmp_path,
        stdio("one", everything_stdio_command(), include_tools=("echo",)),
        stdio("two", everything_stdio_command(), include_tools=("echo", "get-sum")),
    )
    with anyio.fail_after(60):
        async with ToolRegistry(settings, reserved_names={"terminate"}) as registry:
            assert await registry.connect_all() == []
            assert sorted(registry.tools) == ["one__echo", "two__echo", "two__get-sum"]
            a = await registry.call("one__echo", {"message": "from one"})
            b = await registry.call("two__echo", {"message": "from two"})
            assert "from one" in a.text and 'server="one"' in a.text
            assert "from two" in b.text and 'server="two"' in b.text
            names = [t["function"]["name"] for t in registry.openai_tools()]
            assert names == sorted(registry.tools) or sorted(names) == sorted(registry.tools)


async def test_tool_timeout_becomes_an_observation(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, stdio("ev", everything_stdio_command(), tool_timeout=1))
    with anyio.fail_after(30):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            obs = await registry.call(
                "ev__trigger-long-running-operation", {"duration": 5, "steps": 5}
            )
            assert obs.is_error and "timed out after 1 s" in obs.text
            again = await registry.call("ev__echo", {"message": "still alive"})
            assert "still alive" in again.text


async def test_list_changed_burst_causes_one_refresh(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, stdio("ev", everything_stdio_command()))
    with anyio.fail_after(30):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            while not registry.refreshes.get("ev"):  # noqa: ASYNC110 -- burst follows connect
                await anyio.sleep(0.05)
            await anyio.sleep(1.0)  # four debounce windows: no second refresh may follow
            assert registry.refreshes == {"ev": 1}
            assert "ev__echo" in registry.tools


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_tool_added_at_runtime_appears_on_both_protocols(tmp_path: Path, mode: str) -> None:
    """Legacy sessions get notifications/tools/list_changed; 2026-07-28 ones are subscribed."""
    dynamic = (sys.executable, [str(SUPPORT / "dynamic_server.py")])
    settings = settings_for(tmp_path, stdio("dyn", dynamic, mode=mode))
    with anyio.fail_after(30):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            protocol = registry.servers["dyn"]._client.protocol_version  # type: ignore[attr-defined]
            assert protocol == ("2026-07-28" if mode == "auto" else "2025-11-25")
            assert set(registry.tools) == {"dyn__add_tool", "dyn__add_things", "dyn__say"}
            assert "added" in (await registry.call("dyn__add_tool", {})).text
            while "dyn__dynamic_tool" not in registry.tools:  # noqa: ASYNC110 -- refreshed by the notification
                await anyio.sleep(0.05)
            assert "new!" in (await registry.call("dyn__dynamic_tool", {})).text


async def test_server_log_messages_reach_the_log_file_and_a_listener(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, stdio("ev", everything_stdio_command()))
    lines: list[tuple[str, str]] = []
    with anyio.fail_after(30):
        async with ToolRegistry(settings) as registry:
            registry.log_listener = lambda server, line: lines.append((server, line))
            assert await registry.connect_all() == []
            await registry.call("ev__toggle-simulated-logging", {})
            while not lines:  # noqa: ASYNC110 -- the server logs on its own timer
                await anyio.sleep(0.05)
    server, line = lines[0]
    assert server == "ev" and line.startswith("[")  # "[level] logger data"
    assert line in (tmp_path / "state" / "logs" / "ev.log").read_text()
