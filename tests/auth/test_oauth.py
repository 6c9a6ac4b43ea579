"""OAuth against a real protected server in-process: the connection, the store, the words."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from agent.auth.login import LoginHost, may_open_browser
from agent.auth.provider import auth_words
from agent.auth.store import FileTokenStorage, canonical_url, token_file
from agent.common.errors import ConfigError, LoginNeededError, ToolServerError
from agent.config.settings import OAuthConfig, ServerConfig, Settings
from agent.tools.mcp import MCPServerConnection
from tests.support.cli import mcp_json
from tests.support.oauth_server import serve_protected

pytestmark = pytest.mark.anyio


async def follow(url: str) -> None:
    """A browser with no person in front of it: follow the redirects to the callback."""
    async with httpx2.AsyncClient(follow_redirects=True, timeout=20) as http:
        await http.get(url)


async def connect(config: ServerConfig, state: Path, host: LoginHost) -> MCPServerConnection:
    server = MCPServerConnection(config, connect_timeout=20, log_dir=state / "logs", login=host)
    return server


async def call_secret(server: MCPServerConnection) -> str:
    async with anyio.create_task_group() as tg:
        try:
            await server.start(tg)
            result = await server.call_tool("secret_number", {}, timeout=10)
        finally:
            await server.close()
    return result.content[0].text  # type: ignore[union-attr]


async def test_a_login_stores_private_tokens_that_the_next_connection_uses(tmp_path: Path) -> None:
    with serve_protected() as (url, authority):
        config = ServerConfig(name="vault", type="http", url=url)
        host = LoginHost(interactive=True, browser=follow, notify=lambda line: None)
        with anyio.fail_after(60):
            assert "4217" in await call_secret(await connect(config, tmp_path, host))
            headless = LoginHost(interactive=False)
            assert "4217" in await call_secret(await connect(config, tmp_path, headless))
        assert authority.authorizations == 1
    path = token_file(tmp_path, url)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    stored = json.loads(path.read_text())
    assert stored["server_url"] == canonical_url(url)
    assert stored["tokens"]["access_token"] in authority.issued
    assert stored["metadata"]["token_endpoint"].endswith("/token")
    assert stored["expires_at"] > 0
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]
    # Every stored token is a secret to the redactor of the next run.
    redact = Settings(state_dir=tmp_path).redactor()
    token = stored["tokens"]["access_token"]
    assert token not in redact(f"the token is {token}")


async def test_headless_without_tokens_fails_at_once_naming_the_login(tmp_path: Path) -> None:
    with serve_protected() as (url, authority):
        config = ServerConfig(name="vault", type="http", url=url)
        server = await connect(config, tmp_path, LoginHost(interactive=False))
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                with pytest.raises(LoginNeededError) as failed:
                    await server.start(tg)
                await server.close()
        assert authority.authorizations == 0
    assert str(failed.value) == (
        "server 'vault' needs a login: run `run_mcp.py --login vault` at a terminal"
    )


async def test_a_failed_token_exchange_names_the_step_and_the_answer(tmp_path: Path) -> None:
    with serve_protected() as (url, authority):
        authority.refuse_codes = True
        config = ServerConfig(name="vault", type="http", url=url)
        host = LoginHost(interactive=True, browser=follow, notify=lambda line: None)
        server = await connect(config, tmp_path, host)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                with pytest.raises(ToolServerError) as failed:
                    await server.start(tg)
                await server.close()
    message = str(failed.value)
    assert "login failed at token: Token exchange failed (400" in message
    assert "invalid_grant" in message and "404" not in message


async def test_a_401_with_oauth_off_says_how_to_turn_it_on(tmp_path: Path) -> None:
    with serve_protected() as (url, _):
        config = ServerConfig(name="vault", type="http", url=url, oauth=False)
        server = await connect(config, tmp_path, LoginHost(interactive=True, browser=follow))
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                with pytest.raises(ToolServerError) as failed:
                    await server.start(tg)
                await server.close()
    assert "HTTP 401" in str(failed.value) and "remove 'oauth': false" in str(failed.value)


async def test_a_login_slower_than_the_connect_timeout_still_connects(tmp_path: Path) -> None:
    """A person takes longer than a server's connect timeout: the clock stops meanwhile
    (and runs for discovery and registration before, which need no person)."""

    async def slow_person(url: str) -> None:
        await anyio.sleep(3)  # a person reading the consent page, not a synchronisation
        await follow(url)

    with serve_protected() as (url, _):
        config = ServerConfig(name="vault", type="http", url=url, timeout=2)
        host = LoginHost(interactive=True, browser=slow_person, notify=lambda line: None)
        server = MCPServerConnection(
            config, connect_timeout=2, log_dir=tmp_path / "logs", login=host
        )
        with anyio.fail_after(60):
            assert "4217" in await call_secret(server)


async def test_a_pasted_redirect_address_completes_the_login(tmp_path: Path) -> None:
    """The browser is elsewhere (SSH): the person pastes the address it ended on."""
    urls: list[str] = []
    shown = anyio.Event()

    async def remote_browser(url: str) -> None:
        urls.append(url)
        shown.set()

    async def paste() -> str:
        await shown.wait()
        async with httpx2.AsyncClient(timeout=20) as http:  # the browser's last stop
            answer = await http.get(urls[0])
        return answer.headers["location"]

    with serve_protected() as (url, authority):
        config = ServerConfig(name="vault", type="http", url=url)
        host = LoginHost(interactive=True, browser=remote_browser, paste=paste, notify=print)
        with anyio.fail_after(60):
            assert "4217" in await call_secret(await connect(config, tmp_path, host))
        assert authority.authorizations == 1


async def test_two_servers_needing_a_login_at_once_take_turns(tmp_path: Path) -> None:
    busy: list[int] = [0, 0]  # logins open now, most at once

    async def one_at_a_time(url: str) -> None:
        busy[0] += 1
        busy[1] = max(busy)
        await anyio.sleep(0.2)  # long enough for a second login to overlap, if it could
        await follow(url)
        busy[0] -= 1

    with serve_protected() as (url_a, _), serve_protected() as (url_b, _):
        host = LoginHost(interactive=True, browser=one_at_a_time, notify=lambda line: None)
        servers = [
            await connect(ServerConfig(name=n, type="http", url=u), tmp_path, host)
            for n, u in (("a", url_a), ("b", url_b))
        ]
        with anyio.fail_after(60):
            async with anyio.create_task_group() as owners:
                async with anyio.create_task_group() as starts:
                    for server in servers:
                        starts.start_soon(server.start, owners)
                for server in servers:
                    assert server.status.state == "ready"
                    await server.close()
    assert busy[1] == 1


def test_servers_show_how_they_log_in(tmp_path: Path) -> None:
    url = "https://mcp.example.com/mcp"
    store = FileTokenStorage(tmp_path, url)
    http = ServerConfig(name="h", type="http", url=url)
    assert auth_words(http, store) == "needs login"
    anyio.run(store.set_tokens, _token(expires_in=3600))
    assert auth_words(http, store).startswith("logged in, expires at ")
    header = ServerConfig(name="s", type="http", url=url, headers={"Authorization": "Bearer x"})
    assert auth_words(header, None) == "static header" and header.oauth_config() is None
    robot = ServerConfig(
        name="r",
        type="http",
        url=url,
        oauth=OAuthConfig(grant="client_credentials", client_id="c", client_secret="s3cret!"),
    )
    assert (
        auth_words(robot, FileTokenStorage(tmp_path, "https://other/mcp")) == "client credentials"
    )
    assert auth_words(ServerConfig(name="x", type="stdio", command="x"), None) == ""
    assert auth_words(ServerConfig(name="o", type="http", url=url, oauth=False), None) == "none"


def test_client_credentials_need_an_id_and_a_secret() -> None:
    with pytest.raises(ValueError, match="client_credentials needs client_id and client_secret"):
        OAuthConfig(grant="client_credentials", client_id="only-the-id")


def test_the_oauth_key_parses_from_mcp_json(tmp_path: Path) -> None:
    from agent.config.servers import load_mcp_config

    raw = {"oauth": {"client_id": "${CID}", "redirect_port": 8765, "scope": "a b"}}
    path = mcp_json(tmp_path, {"corp": {"url": "https://h/mcp", **raw}})
    (corp,) = load_mcp_config(path, {"CID": "client-123"})
    oauth = corp.oauth_config()
    assert oauth is not None and oauth.client_id == "client-123" and oauth.redirect_port == 8765
    path.write_text(json.dumps({"mcpServers": {"c": {"url": "https://h/mcp", "oauth": 3}}}))
    with pytest.raises(ConfigError, match="oauth"):
        load_mcp_config(path, {})


def test_a_browser_opens_only_where_one_can_show(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "SSH_TTY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    assert not may_open_browser()
    monkeypatch.setenv("DISPLAY", ":0")
    assert may_open_browser()
    monkeypatch.setenv("SSH_CONNECTION", "10.0.0.1 22 10.0.0.2 22")
    assert not may_open_browser()
    monkeypatch.setenv("BROWSER", "lynx")
    assert may_open_browser()


def _token(expires_in: int) -> Any:
    from mcp.shared.auth import OAuthToken

    return OAuthToken(access_token="at-xyz-123456", token_type="Bearer", expires_in=expires_in)


async def test_repl_login_and_logout_reconnect_and_drop_the_server(tmp_path: Path) -> None:
    from agent.tools.registry import ToolRegistry
    from tests.support.fake_model import FakeModel
    from tests.support.repl import drive

    with serve_protected() as (url, authority):
        settings = Settings(
            servers=(ServerConfig(name="vault", type="http", url=url),), state_dir=tmp_path
        )
        host = LoginHost(interactive=True, browser=follow, notify=lambda line: None)
        async with ToolRegistry(settings, login=host) as registry:
            with anyio.fail_after(60):
                assert await registry.connect_all() == []  # logs in at start: interactive
                out, _ = await drive(
                    registry,
                    FakeModel([]),
                    ["/login vault", "/servers", "/logout vault", "/tools"],
                    tmp_path,
                )
            assert "vault__secret_number" not in registry.tools
        assert authority.authorizations == 2  # at start, and the fresh /login
    assert "'vault': logged in, expires at" in out and "; 1 tools" in out
    assert "logged out of 'vault': tokens removed" in out
    assert not token_file(tmp_path, url).exists()
