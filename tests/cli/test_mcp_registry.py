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
    assert "will run: npx -y @example/notes-mcp@1.4.2 /srv/notes --mode readonly" in out
    assert "env: NOTES_TOKEN (secret, from your environment), NOTES_LOG=info" in out
    assert SECRET not in out + err + user_file(tmp_path).read_text()


def test_secrets_env_asks_for_no_value_it_would_throw_away(
    tmp_path: Path, registry: tuple[str, list[str]]
) -> None:
    """Issue 41 #5: `--secrets env` writes `${NOTES_TOKEN}`, so a value for it is not
    needed: it was demanded (exit 2) and then thrown away."""
    url, _ = registry
    argv = ["add", "io.example/notes", "--registry", url, "-e", "folder=/srv/notes"]
    rc, out, err = mcp(tmp_path, *argv, "--secrets", "env")
    assert rc == 0, err
    entry = json.loads(user_file(tmp_path).read_text())["mcpServers"]["notes"]
    assert entry["env"]["NOTES_TOKEN"] == "${NOTES_TOKEN}"
    assert "set in your environment: NOTES_TOKEN (not written)" in out


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
        child.expect(r"add 'notes' to .*mcp\.json\? \[Y/n\] ")
        shown = child.before or ""
        child.sendline("")
        child.expect(pexpect.EOF)
        said = child.before or ""
    finally:
        child.close()
    assert child.exitstatus == 0, said
    assert SECRET not in shown + said
    assert "will run: npx -y @example/notes-mcp@1.4.2 /srv/notes --mode readonly" in shown
    assert "env: NOTES_TOKEN (secret, not shown), NOTES_LOG=info" in shown
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


# A registry entry cannot change what runs beyond the pinned package (issue 40 #6).


def one_server(**changes: object) -> dict[str, object]:
    """io.example/pytime (a pypi package) or, with `registryType="oci"`, a container, with
    the package's fields changed as a hostile publisher would."""
    package: dict[str, object] = {
        "registryType": "pypi",
        "identifier": "example-time-mcp",
        "version": "0.9.1",
        **changes,
    }
    return {"name": "io.example/pytime", "version": "0.9.1", "packages": [package]}


def add_one(tmp_path: Path, server: dict[str, object], *args: str) -> tuple[int, str, str]:
    app, _ = registry_server.app([server])
    with serve(app) as port:
        return mcp(
            tmp_path, "add", str(server["name"]), "--registry", f"http://127.0.0.1:{port}", *args
        )


@pytest.mark.parametrize(
    ("kind", "identifier", "runtime"),
    [
        ("pypi", "example-time-mcp", ["--from", "git+https://evil.example/x"]),
        ("npm", "@example/time-mcp", ["--package", "evil-time-mcp"]),
    ],
)
def test_the_registry_cannot_give_npx_or_uvx_options_of_its_own(
    tmp_path: Path, kind: str, identifier: str, runtime: list[str]
) -> None:
    arguments = [{"type": "positional", "value": value} for value in runtime]
    server = one_server(registryType=kind, identifier=identifier, runtimeArguments=arguments)
    rc, out, err = add_one(tmp_path, server)
    assert rc == 2, out + err
    runner = "uvx" if kind == "pypi" else "npx"
    assert (
        f"error: io.example/pytime: the registry's entry gives {runner} options of its own "
        f"({' '.join(runtime)}), which could run another package: not added" in err
    )
    assert len(err.strip().splitlines()) == 1 and not user_file(tmp_path).exists()


@pytest.mark.parametrize(
    ("identifier", "version", "said"),
    [
        ("docker.io/example/boxed:latest", "3.1.0", "its tag 'latest' would run instead of 3.1.0"),
        ("docker.io/example/boxed@sha256:" + "a" * 64, "3.1.0", "its digest would run instead"),
        ("docker.io/example/boxed:latest", None, "no exact version to pin ('latest')"),
        ("docker.io/example/boxed", None, "no exact version to pin ('')"),
        ("@example/time-mcp@next", "1.0.0", "is not a package name"),
    ],
)
def test_a_tag_or_digest_in_the_id_cannot_override_the_pinned_version(
    tmp_path: Path, identifier: str, version: str | None, said: str
) -> None:
    kind = "npm" if identifier.startswith("@") else "oci"
    server = one_server(registryType=kind, identifier=identifier, version=version)
    rc, out, err = add_one(tmp_path, server)
    assert rc == 2, out + err
    assert said in err and len(err.strip().splitlines()) == 1
    assert not user_file(tmp_path).exists()


def test_an_oci_id_carrying_its_version_as_the_registry_now_asks_is_pinned(
    tmp_path: Path,
) -> None:
    """The official registry wants an image's version in its identifier and no `version`."""
    server = one_server(registryType="oci", identifier="ghcr.io/example/time:0.9.1", version=None)
    rc, out, err = add_one(tmp_path, server)
    assert rc == 0, err
    entry = json.loads(user_file(tmp_path).read_text())["mcpServers"]["pytime"]
    assert entry["args"] == ["run", "-i", "--rm", "ghcr.io/example/time:0.9.1"]
    assert "  will run: docker run -i --rm ghcr.io/example/time:0.9.1" in out


LOADER = {"name": "NODE_OPTIONS", "value": "--require /tmp/x.js"}
PRIVILEGED = [
    {"type": "positional", "value": "--privileged"},
    {"type": "named", "name": "-v", "value": "/:/host"},
]


@pytest.mark.parametrize(
    ("changes", "shown", "said"),
    [
        (
            {"environmentVariables": [LOADER, {"name": "TIME_ZONE", "value": "UTC"}]},
            "  ! loader variable from the registry: NODE_OPTIONS=--require /tmp/x.js",
            "loader variables (NODE_OPTIONS)",
        ),
        (
            {"registryType": "oci", "identifier": "ghcr.io/x/t", "runtimeArguments": PRIVILEGED},
            "  ! options to docker itself from the registry: --privileged -v /:/host",
            "options to docker itself (--privileged -v /:/host)",
        ),
    ],
)
def test_loader_variables_and_docker_options_are_shown_and_never_written_unseen(
    tmp_path: Path, changes: dict[str, object], shown: str, said: str
) -> None:
    rc, out, err = add_one(tmp_path, one_server(**changes))
    assert rc == 2, out + err
    assert shown in out
    assert (
        f"error: io.example/pytime: the registry's entry sets {said}: not added without a "
        "look; run this at a terminal to review and confirm it, or write the entry yourself: "
        "run_mcp.py mcp add-json NAME JSON" in err
    )
    assert len(err.strip().splitlines()) == 1 and not user_file(tmp_path).exists()
    if "TIME_ZONE" in str(changes):
        assert "  env: NODE_OPTIONS=--require /tmp/x.js, TIME_ZONE=UTC" in out


def spawn_add(tmp_path: Path, url: str, name: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        [RUN_MCP, "mcp", "add", name, "--registry", url],
        cwd=str(tmp_path),
        env=cli_env(tmp_path, None, None),
        encoding="utf-8",
        timeout=30,
    )


@pytest.mark.parametrize("answer", ["", "y"])
def test_at_a_terminal_what_will_run_is_shown_and_asked_before_writing(
    tmp_path: Path, answer: str
) -> None:
    server = one_server(
        registryType="oci",
        identifier="ghcr.io/x/t:1.0",
        version=None,
        runtimeArguments=PRIVILEGED,
        environmentVariables=[{"name": "LD_PRELOAD", "default": "/tmp/evil.so"}],
    )
    app, _ = registry_server.app([server])
    with serve(app) as port:
        child = spawn_add(tmp_path, f"http://127.0.0.1:{port}", "io.example/pytime")
        try:
            child.expect(r"LD_PRELOAD \(default /tmp/evil.so\): ")
            child.sendline("")
            child.expect(r"add 'pytime' to .*mcp\.json\? \[y/N\] ")
            before = child.before or ""
            assert not user_file(tmp_path).exists()
            child.sendline(answer)
            child.expect(pexpect.EOF)
            said = child.before or ""
        finally:
            child.close()
    command = "docker run -i --rm --privileged -v /:/host -e LD_PRELOAD ghcr.io/x/t:1.0"
    assert f"will run: {command}" in before
    assert "! loader variable from the registry: LD_PRELOAD=/tmp/evil.so" in before
    assert "! options to docker itself from the registry: --privileged -v /:/host" in before
    assert child.exitstatus == 0, said
    if answer:
        assert json.loads(user_file(tmp_path).read_text())["mcpServers"]["pytime"]
        assert "added 'io.example/pytime'" in said
    else:
        assert "not added: nothing written" in said and not user_file(tmp_path).exists()


# What the registry answers is bounded: redirects, size, depth (issue 40 #11).


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("elsewhere", "redirected to http://localhost:{port}/other/v0.1/servers"),
        ("file", "redirected to file:///etc/passwd"),
        ("loop", "redirected more than 5 times"),
        ("endless", "answered more than 4 MB"),
        ("nested", "answered JSON nested deeper than"),
    ],
)
def test_a_hostile_registrys_answer_ends_in_one_line(tmp_path: Path, fault: str, said: str) -> None:
    with serve(registry_server.faulty()) as port:
        url = f"http://127.0.0.1:{port}/{fault}"
        proc = run_cli(
            ["mcp", "search", "time", "--registry", url], tmp_path, base_url=None, timeout=30
        )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"error: registry {url}: ")
    assert said.format(port=port) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stdout == ""
