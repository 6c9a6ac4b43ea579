"""OAuth against a hostile or broken login server (issue 19, items 3-6), through the paths a
user takes: `run_mcp.py --login` and headless `-p` runs, against the repository's real
protected test server with its fault switches."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from agent.auth.login import LoginHost
from agent.common.errors import ToolServerError
from agent.config.settings import OAuthConfig, ServerConfig
from agent.tools.mcp import MCPServerConnection
from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.oauth_server import FOLLOW_BROWSER, run_login, serve_protected, vault_config

pytestmark = pytest.mark.slow
ELSEWHERE = "http://login.example.com"


def recording_browser(tmp_path: Path) -> tuple[str, Path]:
    """A `$BROWSER` that only notes that it was opened."""
    opened = tmp_path / "browser-opened"
    script = tmp_path / "browser.py"
    script.write_text(f"import sys; open({str(opened)!r}, 'a').write(sys.argv[1] + '\\n')\n")
    return f"{sys.executable} {script} %s", opened


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    ("field", "words"),
    [("token_endpoint", "token endpoint"), ("authorization_endpoint", "authorization endpoint")],
)
def test_login_refuses_a_plain_http_endpoint_elsewhere_before_any_browser_opens(
    tmp_path: Path, field: str, words: str
) -> None:
    browser, opened = recording_browser(tmp_path)
    with serve_protected() as (url, authority):
        authority.metadata_patch = {field: f"{ELSEWHERE}/{field}"}
        login = run_login(vault_config(tmp_path, url), tmp_path, browser)
    assert login.returncode == 1
    assert error_lines(login.stderr) == [
        "error: server 'vault': connect failed: login refused at metadata discovery: the "
        f"server's metadata names the {words} {ELSEWHERE}/{field}, which is not https; a login "
        "server must use https (plain http only on 127.0.0.1 or localhost)"
    ]
    assert not opened.exists() and "Log in to" not in login.stderr
    assert authority.authorizations == 0 and not authority.clients  # nothing was sent to it
    assert "Traceback" not in login.stderr


@pytest.mark.anyio
async def test_a_pre_registered_client_is_refused_before_the_authorization_url_is_shown(
    tmp_path: Path,
) -> None:
    """No registration step between metadata and browser: the check still comes first."""
    opened: list[str] = []

    async def browser(url: str) -> None:
        opened.append(url)

    with serve_protected() as (url, authority):
        authority.metadata_patch = {"authorization_endpoint": f"{ELSEWHERE}/authorize"}
        oauth = OAuthConfig(client_id="pre-registered")
        config = ServerConfig(name="vault", type="http", url=url, oauth=oauth)
        shown: list[str] = []
        host = LoginHost(interactive=True, browser=browser, notify=shown.append)
        server = MCPServerConnection(
            config, connect_timeout=20, log_dir=tmp_path / "logs", login=host
        )
        with anyio.fail_after(30):
            failure = await _start_failing(server)
    assert "login refused at metadata discovery" in failure
    assert f"{ELSEWHERE}/authorize" in failure
    assert opened == [] and shown == []


async def _start_failing(server: MCPServerConnection) -> str:
    async with anyio.create_task_group() as tg:
        try:
            await server.start(tg)
        except ToolServerError as exc:
            return str(exc)
        finally:
            await server.close()
    raise AssertionError("the server connected")


def test_a_metadata_reply_at_one_byte_a_second_ends_login_at_the_connect_timeout(
    tmp_path: Path,
) -> None:
    browser, opened = recording_browser(tmp_path)
    with serve_protected() as (url, authority):
        authority.trickle_metadata = True
        started = time.monotonic()
        login = run_login(vault_config(tmp_path, url, timeout=2), tmp_path, browser, timeout=60)
        took = time.monotonic() - started
    assert login.returncode == 1, login.stderr
    assert error_lines(login.stderr) == [
        "error: server 'vault': connect failed: no answer within 2 s "
        "(login step: metadata discovery (authorization server))"
    ]
    assert took < 30  # the metadata alone would take minutes at this pace
    assert not opened.exists() and authority.authorizations == 0


def test_login_failing_at_the_token_step_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with serve_protected() as (url, authority):
        authority.refuse_codes = True
        login = run_login(vault_config(tmp_path, url), tmp_path, FOLLOW_BROWSER)
    assert login.returncode == 1
    assert "Traceback" not in login.stderr and "ExceptionGroup" not in login.stderr
    assert error_lines(login.stderr) == [
        "error: server 'vault': connect failed: login failed at token: Token exchange failed "
        '(400): {"error":"invalid_grant","error_description":"the code was refused"}'
    ]
    assert len(login.stderr.strip().splitlines()) == 2  # the URL shown, then the error


def test_two_headless_runs_refreshing_at_once_with_rotating_tokens_both_answer(
    tmp_path: Path,
) -> None:
    """The server takes each refresh token once; both runs start with the same one."""
    with serve_protected() as (url, authority):
        config = vault_config(tmp_path, url)
        login = run_login(config, tmp_path, FOLLOW_BROWSER)
        assert login.returncode == 0, login.stderr
        authority.expire_access_tokens()  # both runs' first request gets a 401
        authority.hold_refreshes = 2  # the first refresh waits for the second (if it comes)
        results: list[tuple[int, str, str]] = []

        def one_run() -> None:
            script = [tool_calls(("vault__secret_number", {})), text("It is 4217.")]
            with ScriptedLLM(*script) as llm:
                proc = run_cli(
                    ["--mcp-config", str(config), "-p", "what is the secret number?"],
                    tmp_path,
                    base_url=llm.base_url,
                )
                results.append((proc.returncode, proc.stderr, json.dumps(llm.requests)))

        runs = [threading.Thread(target=one_run) for _ in range(2)]
        for run in runs:
            run.start()
        for run in runs:
            run.join(timeout=120)
    assert len(results) == 2
    for code, stderr, seen in results:
        assert code == 0, stderr
        assert "needs a login" not in stderr
        assert "the secret number is 4217" in seen
    assert authority.refused_refreshes == 0 and authority.refreshes == 2
    assert authority.authorizations == 1


def test_login_whose_token_endpoint_is_unreachable_names_it_and_not_the_same_login(
    tmp_path: Path,
) -> None:
    """The browser step succeeds, the code exchange cannot reach the token endpoint: the
    error says which URL failed and how, not the MCP endpoint's 401, and it does not tell
    the user to run the `--login` that just failed."""
    with socket.socket() as probe:  # a free port nothing listens on
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/token"
    with serve_protected() as (url, authority):
        authority.metadata_patch = {"token_endpoint": dead}
        login = run_login(vault_config(tmp_path, url), tmp_path, FOLLOW_BROWSER)
    assert login.returncode == 1, login.stderr
    assert "Traceback" not in login.stderr
    [line] = error_lines(login.stderr)
    assert line.startswith(
        "error: server 'vault': connect failed: login failed at token: "
        f"could not reach {dead} (ConnectError: "
    ), line
    assert "401" not in line and "--login" not in line, line
