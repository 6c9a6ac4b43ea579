"""Both protocol eras with no `mode` in the config: legacy first, 2026-07-28 when refused."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from agent.config import ServerConfig
from agent.errors import ToolServerError
from agent.tools.mcp import MCPServerConnection
from tests import modern_server
from tests.asgi_thread import serve

pytestmark = pytest.mark.anyio
MODERN_STDIO = (sys.executable, [str(Path(modern_server.__file__))])


async def _greet(config: ServerConfig, tmp_path: Path) -> tuple[str | None, str]:
    """Connect, call greet, close: (negotiated protocol version, the tool's text)."""
    server = MCPServerConnection(config, connect_timeout=20, log_dir=tmp_path / "logs")
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            try:
                await server.start(tg)
                assert server._client is not None
                version = server._client.protocol_version
                result = await server.call_tool("greet", {"name": "ada"}, timeout=10)
            finally:
                await server.close()
    return version, result.content[0].text  # type: ignore[union-attr]


@pytest.fixture
def modern_http_url() -> object:
    with serve(modern_server.app(), lifespan="on") as port:
        yield f"http://127.0.0.1:{port}/mcp"


async def test_modern_only_server_over_http_connects_without_a_mode(
    tmp_path: Path, modern_http_url: str
) -> None:
    config = ServerConfig(name="modern", type="http", url=modern_http_url)
    assert await _greet(config, tmp_path) == ("2026-07-28", "hello ada")


async def test_modern_only_server_over_stdio_connects_without_a_mode(tmp_path: Path) -> None:
    command, args = MODERN_STDIO
    config = ServerConfig(name="modern", type="stdio", command=command, args=tuple(args))
    assert await _greet(config, tmp_path) == ("2026-07-28", "hello ada")


async def test_a_dual_era_server_keeps_the_legacy_handshake_by_default(tmp_path: Path) -> None:
    """The bundled server speaks both eras: with no mode it gets `initialize` (2025-11-25),
    so nothing changes for the servers that worked before."""
    config = ServerConfig(
        name="bundled", type="stdio", command=sys.executable, args=("-m", "agent.server")
    )
    server = MCPServerConnection(config, connect_timeout=20, log_dir=tmp_path / "logs")
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            try:
                await server.start(tg)
                assert server._client is not None
                assert server._client.protocol_version == "2025-11-25"
            finally:
                await server.close()


async def test_a_forced_legacy_mode_says_which_era_was_refused(
    tmp_path: Path, modern_http_url: str
) -> None:
    config = ServerConfig(name="modern", type="http", url=modern_http_url, mode="legacy")
    server = MCPServerConnection(config, connect_timeout=20, log_dir=tmp_path / "logs")
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            try:
                with pytest.raises(ToolServerError) as failed:
                    await server.start(tg)
            finally:
                await server.close()
    assert "legacy handshake (initialize)" in str(failed.value)
    assert "Unsupported protocol version" in str(failed.value)
