"""Where servers come from, as a user types it (issue 31 #3, #4, #7): `mcp search` and
`mcp add REGISTRY-NAME` against a stand-in of the MCP Registry API
(tests/support/registry_server.py), `mcp add-json` with a README's block, and what
`mcp list` says of unread files and failed servers."""

from __future__ import annotations

import copy
import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.support import registry_server
from tests.support.asgi_thread import serve
from tests.support.cli import RUN_MCP, cli_env, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages
from tests.support.servers import SUPPORT

ENV_SERVER = str(SUPPORT / "env_server.py")
SECRET = "wx-secret-4f2a91"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    servers = copy.deepcopy(registry_server.SERVERS)
    boxed = servers[3]
    boxed["postInstallInstructions"] = boxed["postInstallInstructions"].format(
        marker=tmp_path / "ran"
    )
    app, requests = registry_server.app(servers)
    with serve(app) as port:
        yield f"http://127.0.0.1:{port}", requests


def mcp(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    proc = run_cli(["mcp", *args], tmp_path, base_url=None, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def user_file(tmp_path: Path) -> Path:
    return tmp_path / "xdg-config" / "mcp-agent" / "mcp.json"


def test_search_lists_the_registrys_matches_with_their_text_shown_inert(
    tmp_path: Path, registry: tuple[str, list[str]]
) -> None:
    url, requests = registry
    rc, out, err = mcp(tmp_path, "search", "example", "--registry", url)
    assert rc == 0, err
    assert "io.example/weather 2.0.0 [remote, npm]" in out
    assert "io.example/pytime 0.9.1 [pypi]" in out
    assert "In a container \\x1b]0;pwned\\x07" in out and "\x1b" not in out
    assert requests == ["/v0.1/servers?search=example&version=latest&limit=20"]
    rc, out, _ = mcp(tmp_path, "search", "nothing-like-it", "--registry", url)
    assert rc == 1 and f"no server in {url} matches 'nothing-like-it'" in out


def test_the_registry_comes_from_the_users_config_key(
    tmp_path: Path, registry: tuple[str, list[str]]
) -> None:
    url, requests = registry
    settings = tmp_path / "xdg-config" / "mcp-agent" / "config.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text(f'[registry]\nurl = "{url}"\n')
    rc, out, err = mcp(tmp_path, "search", "weather")
    assert rc == 0, err
    assert "io.example/weather" in out and requests


def test_add_prefers_the_remote_and_keeps_its_secret_header_unechoed(
    tmp_path: Path, registry: tuple[str, list[str]]
) -> None:
    url, _ = registry
    rc, out, err = mcp(
        tmp_path, "add", "io.example/weather", "--registry", url, "-e", f"X-Api-Key={SECRET}"
    )
    assert rc == 0, err
    assert "from the registry: remote (http) https://weather.example.com/eu/mcp" in out
    assert SECRET not in out + err
    path = user_file(tmp_path)
    assert json.loads(path.read_text())["mcpServers"]["weather"] == {
        "type": "http",
        "url": "https://weather.example.com/eu/mcp",
        "headers": {"X-Api-Key": SECRET},
    }
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_add_a_package_pinned_to_its_version_with_its_variables(
    tmp_path: Path, registry: tuple[str, list[str]]
) -> None:
    url, _ = registry
    rc, _, err = mcp(tmp_path, "add", "io.example/notes", "--registry", url)
    assert rc == 2
    assert (
        "error: needs NOTES_TOKEN (Token for the notes service): give it with -e NOTES_TOKEN=VALUE"
        in err
    )
    rc, out, err = mcp(
        tmp_path,
        "add",
        "io.example/notes",
        "--registry",
        url,
        "-e",
        "folder=/srv/notes",
        "-e",
        f"NOTES_TOKEN={SECRET}",
        "--secrets",
        "env",
    )
    assert rc == 0, err
    entry = json.loads(user_file(tmp_path).read_text())["mcpServers"]["notes"]
    assert entry == {
        "type": "stdio",
        "command": "npx",
        "args": ["-y", "@example/notes-mcp@1.4.2", "/srv/notes", "--mode", "readonly"],
        "env": {"NOTES_TOKEN": "${NOTES_TOKEN}", "NOTES_LOG": "info"},
    }
    assert "set in your environment: NOTES_TOKEN (not written)" in out
    assert SECRET not in out + err + user_file(tmp_path).read_text()


def test_pypi_and_oci_packages_and_instructions_shown_never_run(
    tmp_path: Path, registry: tuple[str, list[str]]
) -> None:
    url, _ = registry
    rc, out, err = mcp(tmp_path, "add", "io.example/pytime", "--registry", url)
    assert rc == 0, err
    rc, out, err = mcp(tmp_path, "add", "io.example/boxed", "--registry", url, "--name", "box")
    assert rc == 0, err
    servers = json.loads(user_file(tmp_path).read_text())["mcpServers"]
    assert servers["pytime"]["args"] == ["example-time-mcp==0.9.1"]
    assert servers["box"]["command"] == "docker"
    assert servers["box"]["args"] == [
        "run",
        "-i",
        "--rm",
        "-e",
        "BOX_MODE",
        "docker.io/example/boxed:3.1.0",
    ]
    assert "its publisher's instructions (shown, not run):" in out
    assert "\\x1b[2J$(touch" in out and "\x1b" not in out
    assert not (tmp_path / "ran").exists()


def test_add_asks_at_a_terminal_and_a_secret_is_not_echoed(
    tmp_path: Path, registry: tuple[str, list[str]]
) -> None:
    url, _ = registry
    child = pexpect.spawn(
        sys.executable,
        [RUN_MCP, "mcp", "add", "io.example/notes", "--registry", url],
        cwd=str(tmp_path),
        env=cli_env(tmp_path, None, None),
        encoding="utf-8",
        timeout=30,
    )
    try:
        child.expect("NOTES_TOKEN: Token for the notes service: ")
        child.sendline(SECRET)
        child.expect(r"NOTES_LOG: Log level \(default info\): ")
        child.sendline("")
        child.expect("folder: ")
        child.sendline("/srv/notes")
        child.expect(r"\[file/env\] ")
        child.sendline("file")
        child.expect(pexpect.EOF)
        said = child.before or ""
    finally:
        child.close()
    assert child.exitstatus == 0, said
    assert SECRET not in said
    entry = json.loads(user_file(tmp_path).read_text())["mcpServers"]["notes"]
    assert entry["env"] == {"NOTES_TOKEN": SECRET, "NOTES_LOG": "info"}


def test_add_json_takes_a_readmes_block_and_the_server_runs(tmp_path: Path) -> None:
    block = (
        f'"chroma": {{"command": {json.dumps(sys.executable)}, '
        f'"args": [{json.dumps(ENV_SERVER)}], "env": {{"MARK": "pasted"}}}}'
    )
    rc, out, err = mcp(tmp_path, "add-json", "chroma", block)
    assert rc == 0, err
    assert "note: mcp add-json chroma: no 'mcpServers' object: read the entry 'chroma'" in err
    assert "added server 'chroma'" in out
    with ScriptedLLM(tool_calls(("chroma__environment", {})), text("done")) as llm:
        proc = run_cli(["-p", "env?", "-y"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert '"MARK": "pasted"' in tool_messages(llm.requests[1])[0]
    whole = json.dumps({"mcpServers": {"other": {"url": "https://h.example/mcp"}}})
    rc, _, err = mcp(tmp_path, "add-json", "other", whole)
    assert rc == 0 and "note:" not in err


def test_a_file_of_bare_entries_is_read_with_a_note(tmp_path: Path) -> None:
    fragment = tmp_path / "readme.json"
    entry = {"command": sys.executable, "args": [ENV_SERVER]}
    fragment.write_text(json.dumps({"chroma": entry}))
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli(["--mcp-config", str(fragment), "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert (
        f"note: {fragment}: no 'mcpServers' object: read its top-level entries as servers (chroma)"
        in proc.stderr
    )


def test_mcp_list_names_unread_files_and_fails_when_a_server_failed(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"theirs": {"command": "x"}}}))
    path = user_file(tmp_path)
    path.parent.mkdir(parents=True)
    good = {"command": sys.executable, "args": [ENV_SERVER]}
    bad = {"command": sys.executable, "args": ["-c", "import sys; sys.exit('Error: no key')"]}
    path.write_text(json.dumps({"mcpServers": {"good": good, "bad": bad}}))
    rc, out, err = mcp(tmp_path, "list")
    assert rc == 1, out + err
    assert "not read: .mcp.json (this folder is not trusted: run_mcp.py trust)" in out
    assert f"good: {sys.executable} {ENV_SERVER} (stdio) - ✓ connected (1 tools) [{path}]" in out
    assert "bad: " in out and "✗ failed" in out and "Error: no key" in out
