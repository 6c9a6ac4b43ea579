"""Secrets never reach what we write: logs, transcripts, errors, status, stdout/stderr."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from agent.common.errors import ConfigError
from agent.common.redact import _PATTERNS, _TRIGGER, MASK, Redactor
from agent.common.transcript import Transcript, load
from agent.config.servers import load_mcp_config
from agent.config.settings import ServerConfig, Settings
from agent.loop.events import AssistantMessage, TextDelta
from agent.tools.registry import ToolRegistry
from agent.ui.render import EventRenderer
from agent.ui.safe import SafeConsole
from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, error, text, tool_calls
from tests.support.servers import REPO_ROOT, free_port
from tests.support.terminal import PROMPT, Terminal, agent_env

API_KEY = "sk-test-SECRET-123"
TOKEN = "tok-SECRET-456"
SECRETS = (API_KEY, TOKEN, "SECRET-123", "SECRET-456")

# A stdio server that fails at start after printing its credentials, as careless ones do.
LEAKY_CRASH = (
    "import os, sys; "
    "print('connecting with Authorization: Bearer ' + os.environ['MCP_TOKEN'], file=sys.stderr); "
    "print('token was ' + os.environ['MCP_TOKEN'], file=sys.stderr); "
    "sys.exit('fatal: the upstream refused ' + os.environ['MCP_TOKEN'])"
)


def assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked into {where}"


def run_with_secrets(
    args: list[str], tmp_path: Path, base_url: str
) -> subprocess.CompletedProcess[str]:
    """`run_mcp.py ARGS` with both secrets in its environment: the key and a server's token."""
    return run_cli(
        args, tmp_path, base_url=base_url, api_key=API_KEY, extra_env={"MCP_TOKEN": TOKEN}
    )


def settings_with_secrets(tmp_path: Path, *servers: ServerConfig) -> Settings:
    base = Settings()
    return Settings(
        llm=base.llm.model_copy(update={"api_key": API_KEY}),
        servers=servers,
        state_dir=tmp_path / "state",
        workspace=tmp_path,
    )


def test_redactor_masks_known_values_and_secret_patterns() -> None:
    redact = Redactor.of([TOKEN, API_KEY, "short"])
    assert redact(f"key {API_KEY} and {TOKEN}") == f"key {MASK} and {MASK}"
    assert redact("Authorization: Bearer abc.def-ghi") == f"Authorization: {MASK}"
    assert (
        redact('{"authorization": "Bearer zzzzzzzz"}') == '{"authorization": "Bearer [REDACTED]"}'
    )
    assert redact("sk-proj-abcdefgh1234") == MASK
    assert redact("https://u:hunter22@h/p?api_key=abcd1234&x=1") == (
        f"https://u:{MASK}@h/p?api_key={MASK}&x=1"
    )
    assert redact("short words, prompt_tokens: 12, the token expired") == (
        "short words, prompt_tokens: 12, the token expired"
    )


def test_redactor_collects_every_secret_in_settings() -> None:
    servers = (
        ServerConfig(
            name="h", type="http", url="http://x/mcp", headers={"Authorization": f"Bearer {TOKEN}"}
        ),
        ServerConfig(
            name="s",
            type="stdio",
            command="x",
            env={"GITHUB_TOKEN": "ghp_abcdef123", "MODE": "debug"},
        ),
        ServerConfig(name="o", type="openapi", url="http://x", key="mcpo-key-789"),
    )
    settings = Settings(llm=Settings().llm.model_copy(update={"api_key": API_KEY}), servers=servers)
    redact = settings.redactor({"DB_PASSWORD": "pw-very-secret", "PWD": "/home/me"})
    values = set(redact.values)
    assert {API_KEY, f"Bearer {TOKEN}", TOKEN, "ghp_abcdef123", "mcpo-key-789"} <= values
    assert "pw-very-secret" in values and "/home/me" not in values and "debug" not in values


@pytest.mark.parametrize(
    "name",
    ["DB_PASS", "SERVICE_KEY", "MY_API_KEY", "PGPASSWORD", "GITHUB_TOKEN", "MYSQL_PWD"]
    + ["AWS_SECRET_ACCESS_KEY", "GOOGLE_CREDENTIALS", "SESSION_COOKIE", "X_AUTH", "apiKey"],
)
def test_secret_named_env_values_are_masked(name: str) -> None:
    server = ServerConfig(name="s", type="stdio", command="x", env={name: "value-0123"})
    redact = Settings(servers=(server,)).redactor({name.upper(): "other-0123"})
    assert redact(f"{name}=value-0123 other-0123") == f"{name}={MASK} {MASK}"


@pytest.mark.parametrize(
    "name",
    ["PATH", "HOME", "PWD", "OLDPWD", "KEYBOARD_LAYOUT", "SSH_AUTH_SOCK", "TOKENIZERS_PARALLELISM"]
    + ["DESKTOP_SESSION", "XDG_SESSION_TYPE", "MAX_TOKENS", "AUTH_TYPE", "PASSWORD_FILE"],
)
def test_harmless_env_names_are_not_masked(name: str) -> None:
    server = ServerConfig(name="s", type="stdio", command="x", env={name: "plain-value"})
    redact = Settings(servers=(server,)).redactor({name: "/usr/local/bin"})
    assert redact.values == ()


def test_short_secret_values_are_not_masked() -> None:
    server = ServerConfig(name="s", type="stdio", command="x", env={"DB_PASS": "abc12"})
    redact = Settings(servers=(server,)).redactor({"SERVICE_KEY": "1"})
    assert redact.values == () and redact("abc12 1") == "abc12 1"


@pytest.mark.parametrize(
    "text",
    [
        "mcp.json: mcpServers.a.headers.Authorization: Input should be a valid string",
        "mcp.json: mcpServers.a.headers.X-Api-Key: Input should be a valid string",
        "config.toml: [llm].api_key: Input should be a valid string",
        "mcp.json: mcpServers.a.headers.X-Token: Input should be a valid string",
        "the Authorization: header is missing",
    ],
)
def test_redaction_keeps_the_words_of_config_errors(text: str) -> None:
    assert Redactor()(text) == text


def test_config_error_about_a_header_keeps_its_words(tmp_path: Path) -> None:
    doc = {"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"Authorization": 5}}}}
    (tmp_path / "mcp.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as info:
        load_mcp_config(tmp_path / "mcp.json", {})
    message = Redactor()(str(info.value))
    assert message.endswith("mcpServers.a.headers.Authorization: Input should be a valid string")


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Authorization: Bearer abc123secret", f"Authorization: {MASK}"),
        ("authorization=Token abcd1234", f"authorization={MASK}"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", f"Authorization: {MASK}"),
        ("x-api-key: zzzliteral123456", f"x-api-key: {MASK}"),
        ("Authorization: ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ", f"Authorization: {MASK}"),
        ("Proxy-Authorization: Digest qop7abc, realm", f"Proxy-Authorization: {MASK}, realm"),
        ("password=hunter2&user=me", f"password={MASK}&user=me"),
    ],
)
def test_credentials_after_a_header_name_are_still_masked(text: str, masked: str) -> None:
    assert Redactor()(text) == masked


def test_transcript_records_are_redacted_and_still_load(tmp_path: Path) -> None:
    transcript = Transcript.create(tmp_path, {"model": "m"}, Redactor.of([TOKEN]))
    transcript.append({"role": "tool", "tool_call_id": "c1", "content": f"got {TOKEN}"})
    transcript.append({"role": "user", "content": f"my key is {API_KEY}"})
    transcript.close()
    raw = transcript.path.read_text()
    assert_no_secret(raw, "the transcript")
    messages = load(transcript.path).messages
    assert messages[0]["content"] == f"got {MASK}" and MASK in messages[1]["content"]


@pytest.mark.anyio
@pytest.mark.slow
async def test_server_stderr_status_and_errors_are_redacted(tmp_path: Path) -> None:
    leaky = ServerConfig(
        name="leaky",
        type="stdio",
        command=sys.executable,
        args=("-c", LEAKY_CRASH),
        env={"MCP_TOKEN": TOKEN},
    )
    refused = ServerConfig(
        name="refused",
        type="http",
        url=f"http://127.0.0.1:{free_port()}/mcp?api_key={TOKEN}",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    settings = settings_with_secrets(tmp_path, leaky, refused)
    with anyio.fail_after(60):
        async with ToolRegistry(settings) as registry:
            failures = await registry.connect_all()
            assert {f.server for f in failures} == {"leaky", "refused"}
            for failure in failures:
                assert_no_secret(str(failure), "a connect error")
            leaky_status = registry.servers["leaky"].status
            assert "fatal: the upstream refused [REDACTED]" in (leaky_status.error or "")
            for status in registry.statuses():
                assert_no_secret(repr(status), "a server status")
    log = (tmp_path / "state" / "logs" / "leaky.log").read_text()
    assert "connecting with Authorization: [REDACTED]" in log
    assert_no_secret_in_files(tmp_path)


@pytest.mark.slow
def test_cli_end_to_end_leaks_no_secret(tmp_path: Path, everything_http_url: str) -> None:
    """Two real runs: tools over an authenticated HTTP server plus a failing server, then
    a model that rejects the key; nothing under tmp_path, stdout or stderr holds a secret."""
    config = {
        "mcpServers": {
            "ev": {
                "type": "http",
                "url": everything_http_url,
                "headers": {"Authorization": "Bearer ${MCP_TOKEN}"},
            },
            "leaky": {
                "command": sys.executable,
                "args": ["-c", LEAKY_CRASH],
                "env": {"MCP_TOKEN": "${MCP_TOKEN}"},
            },
        }
    }
    (tmp_path / "mcp.json").write_text(json.dumps(config))
    args = ["--mcp-config", str(tmp_path / "mcp.json"), "--output", "json"]
    outputs: list[str] = []
    script = [tool_calls(("ev__echo", {"message": "hello"})), text("echoed")]
    with ScriptedLLM(*script) as llm:
        first = run_with_secrets([*args, "-p", "echo hello"], tmp_path, llm.base_url)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["answer"] == "echoed"
    assert "leaky" in first.stderr  # the failing server was reported ...
    assert llm.headers[0]["authorization"] == f"Bearer {API_KEY}"  # ... and the key was used
    outputs += [first.stdout, first.stderr]

    rejected = error(401, f"Incorrect API key provided: {API_KEY}. Header: Bearer {TOKEN}")
    with ScriptedLLM(rejected) as llm:
        second = run_with_secrets([*args, "-p", "hi"], tmp_path, llm.base_url)
    assert second.returncode == 1
    outputs += [second.stdout, second.stderr]

    for index, output in enumerate(outputs):
        assert_no_secret(output, f"captured output #{index}")
    files = assert_no_secret_in_files(tmp_path)
    assert any(p.suffix == ".jsonl" for p in files) and any(p.suffix == ".log" for p in files)


@pytest.mark.slow
def test_cli_transcript_masks_a_bare_secret_echoed_by_a_tool(
    tmp_path: Path, everything_http_url: str
) -> None:
    config = {"mcpServers": {"ev": {"type": "http", "url": everything_http_url,
                                    "headers": {"X-Token": "${MCP_TOKEN}"}}}}  # fmt: skip
    (tmp_path / "mcp.json").write_text(json.dumps(config))
    script = [tool_calls(("ev__echo", {"message": TOKEN})), text("echoed")]
    with ScriptedLLM(*script) as llm:
        proc = run_with_secrets(
            ["--mcp-config", str(tmp_path / "mcp.json"), "-p", "echo"], tmp_path, llm.base_url
        )
    assert proc.returncode == 0, proc.stderr
    assert_no_secret_in_files(tmp_path)


def assert_no_secret_in_files(root: Path) -> list[Path]:
    files = [p for p in root.rglob("*") if p.is_file()]
    for path in files:
        assert_no_secret(path.read_text(errors="replace"), str(path.relative_to(root)))
    return files


@pytest.mark.parametrize(
    "secret_text",
    [
        "BEARER abc123secret",
        "Basic QWxhZGRpbjpvcGVuc2VzYW1l",
        "Proxy-Authorization: Token abcdef12",
        "X-API-KEY=zzzzzzzz1234",
        "key sk-proj-abcdefgh1234",
        "ApiKey: abcd1234",
        "Access_Token='abcd1234'",
        "SECRET=abcdefghijkl",
        "https://user:hunter22@host/path",
    ],
)
def test_the_pattern_fast_path_never_skips_text_a_pattern_masks(secret_text: str) -> None:
    assert any(pattern.search(secret_text) for _, pattern, _ in _PATTERNS), secret_text
    assert _TRIGGER.search(secret_text)
    assert MASK in Redactor.of([])(secret_text)


BEARER = "Bearer abcd1234efgh5678"  # a credential nobody told us about, in a tool's output
LEAKY_ANSWER = f"Found them: {BEARER}, key {API_KEY} and token {TOKEN} in the config."


def test_single_shot_answer_on_stdout_is_masked(tmp_path: Path) -> None:
    with ScriptedLLM(text(LEAKY_ANSWER)) as llm:
        proc = run_with_secrets(["-p", "find the keys"], tmp_path, llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"Found them: Bearer {MASK}, key {MASK} and token {MASK} in the config.\n"
    assert "abcd1234efgh5678" not in proc.stdout + proc.stderr
    assert_no_secret(proc.stdout + proc.stderr, "the single-shot output")
    assert_no_secret_in_files(tmp_path)


def test_streamed_answer_never_shows_a_secret_split_across_chunks() -> None:
    """The live region shows the answer without its last word: a secret arriving in
    pieces is masked once whole, never drawn half."""
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, width=100)
    renderer = EventRenderer(console, stream_answer=True, redact=Redactor.of([API_KEY, TOKEN]))
    for start in range(0, len(LEAKY_ANSWER), 3):
        renderer.handle(TextDelta(LEAKY_ANSWER[start : start + 3]))
        shown = renderer.streamed()
        for piece in ("abcd", "sk-t", "tok-"):
            assert piece not in shown, (start, shown)
    renderer.handle(AssistantMessage(LEAKY_ANSWER, ()))
    screen = out.getvalue()
    assert f"Found them: Bearer {MASK}, key {MASK} and token {MASK}" in screen
    assert "abcd1234efgh5678" not in screen and "tok-" not in screen


@pytest.mark.skipif(shutil.which("tmux") is None and os.environ.get("CI") != "true", reason="tmux")
def test_repl_answer_and_save_leak_no_secret(tmp_path: Path) -> None:
    """A real terminal: every byte the REPL writes is recorded while a secret streams in
    3-character chunks; /save writes a private file into the state folder, not the
    working directory; no file under tmp_path holds a secret."""
    workspace, state = tmp_path / "ws", tmp_path / "state"
    workspace.mkdir()
    raw = tmp_path / "raw-terminal-output.txt"
    with ScriptedLLM(text(LEAKY_ANSWER, chunk=3, pace=0.005)) as llm:
        env = agent_env(llm.base_url, state)
        env.update(OPENAI_API_KEY=API_KEY, MCP_TOKEN=TOKEN)
        term = Terminal(
            [sys.executable, str(REPO_ROOT / "run_mcp.py")],
            cwd=workspace,
            env=env,
            log=tmp_path / "secrets.screen.txt",
        )
        try:
            term.wait_for(PROMPT)
            term.record(raw)
            term.type("find the keys")
            term.wait_for(r"config\.[ ]*" + PROMPT)
            term.type("/save")
            term.wait_for(r"saved 2 messages to ")
            term.leave()
        finally:
            term.close()
    written = raw.read_text(errors="replace")
    assert "Found them: Bearer" in written  # the recording holds the answer ...
    for piece in ("abcd", "sk-t", "tok-"):
        assert piece not in written  # ... and no secret, not even a part of one
    exports = list((state / "exports").iterdir())
    assert len(exports) == 1 and MASK in exports[0].read_text()
    assert exports[0].stat().st_mode & 0o777 == 0o600
    assert (state / "exports").stat().st_mode & 0o777 == 0o700
    assert list(workspace.iterdir()) == []  # nothing written into the working directory
    assert_no_secret_in_files(tmp_path)


HEADER_VALUE = "hdr-value-6e1f0a93"
ENV_VALUE = "env-value-2d7c58b4"


def test_piped_repl_answers_are_masked_like_a_single_shot_run(tmp_path: Path) -> None:
    """`… | run_mcp.py -i`: each line a turn, each answer on stdout. The answer quotes the
    user's key, a server's header value and a server's secret env value (both servers from
    the user's mcp.json, neither reachable: the REPL goes on without them); stdout holds
    none of them."""
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "web": {
                        "type": "http",
                        "url": "http://127.0.0.1:9/mcp",
                        "headers": {"X-Api-Key": HEADER_VALUE},
                    },
                    "db": {"command": "no-such-db-server", "env": {"DB_PASS": ENV_VALUE}},
                }
            }
        )
    )
    config.chmod(0o600)
    answer = f"key {API_KEY}, header {HEADER_VALUE}, env {ENV_VALUE}."
    with ScriptedLLM(text(answer), text(f"again: {answer}")) as llm:
        proc = run_cli(
            ["-i", "--mcp-config", str(config)],
            tmp_path,
            base_url=llm.base_url,
            api_key=API_KEY,
            stdin="find the keys\nand once more\n",
        )
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    masked = f"key {MASK}, header {MASK}, env {MASK}."
    assert proc.stdout == f"{masked}\nagain: {masked}\n", proc.stdout
    for secret in (API_KEY, HEADER_VALUE, ENV_VALUE):
        assert secret not in proc.stdout + proc.stderr, secret
