"""OAuth end to end, no mocks of our stack: a real protected MCP server (the SDK's server
auth), `run_mcp.py --login` with `$BROWSER` following the authorization URL, then headless
runs that use, refresh and finally lose the stored tokens."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.oauth_server import FOLLOW_BROWSER, run_login, serve_protected, vault_config

pytestmark = pytest.mark.slow
HOW = "needs a login: run `run_mcp.py --login vault` at a terminal"


def ask_secret(tmp_path: Path, config: Path, *, calls: bool = True) -> tuple[int, str, str]:
    """A headless -p run whose model calls the protected tool once."""
    script = [tool_calls(("vault__secret_number", {})), text("It is 4217.")] if calls else []
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            ["--mcp-config", str(config), "-p", "what is the secret number?"],
            tmp_path,
            base_url=llm.base_url,
        )
        seen = json.dumps(llm.requests)
    return proc.returncode, proc.stderr, seen


def test_login_once_then_headless_runs_refresh_and_ask_again_when_revoked(tmp_path: Path) -> None:
    with serve_protected() as (url, authority):
        config = vault_config(tmp_path, url)

        # Headless with no tokens: one line naming the server, no browser, no wait; with
        # no server left the run fails before the model is asked (exit 1).
        code, stderr, _ = ask_secret(tmp_path, config, calls=False)
        # Said once: the run's error line (no warning line repeating it).
        assert stderr.count(HOW) == 1 and code == 1 and authority.authorizations == 0

        login = run_login(config, tmp_path, FOLLOW_BROWSER)
        assert login.returncode == 0, login.stderr
        assert "logged in to 'vault' (logged in, expires at" in login.stderr
        assert login.stderr.rstrip().endswith("; 1 tool")
        assert authority.authorizations == 1

        store = tmp_path / "state" / "oauth"
        (token_file,) = store.glob("*.json")
        assert stat.S_IMODE(store.stat().st_mode) == 0o700
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

        code, stderr, seen = ask_secret(tmp_path, config)
        assert code == 0, stderr
        assert "the secret number is 4217" in seen

        authority.expire_access_tokens()  # the server stops taking the access token
        code, stderr, seen = ask_secret(tmp_path, config)
        assert code == 0 and "the secret number is 4217" in seen, stderr
        assert authority.refreshes == 1 and authority.authorizations == 1

        authority.revoke_refresh_tokens()
        code, stderr, seen = ask_secret(tmp_path, config, calls=False)
        assert stderr.count(HOW) == 1
        assert f"error: no tool server is available: 'vault': {HOW}" in stderr
        assert code == 1  # its only server is gone: status error, before the model is asked
        assert authority.authorizations == 1  # headless never opened a browser

        written = [p for p in tmp_path.rglob("*") if p.is_file() and store not in p.parents]
        for path in written:
            content = path.read_text(errors="replace")
            for issued in authority.issued:
                assert issued not in content, f"a token leaked into {path}"


def test_logout_removes_the_stored_tokens(tmp_path: Path) -> None:
    with serve_protected() as (url, _authority):
        config = vault_config(tmp_path, url)
        login = run_login(config, tmp_path, FOLLOW_BROWSER)
        assert login.returncode == 0, login.stderr
        store = tmp_path / "state" / "oauth"
        assert list(store.glob("*.json"))
        with ScriptedLLM() as llm:
            repl = run_cli(
                ["--mcp-config", str(config), "-i"],
                tmp_path,
                base_url=llm.base_url,
                stdin="/servers\n/logout vault\n/servers\n",
            )
        assert repl.returncode == 0, repl.stderr
        assert "logged out of 'vault': tokens removed" in repl.stdout
        assert "needs login" in repl.stdout.split("logged out")[1]
        assert not list(store.glob("*.json"))
