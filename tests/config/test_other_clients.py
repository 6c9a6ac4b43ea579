"""Every client's own file, in its own format, from its own place (issue 31 #1, #2).

Each test writes the file a user of that client has (under a HOME of its own), runs
`run_mcp.py --mcp-config NAME -p ...` as the user would, and has the scripted model call
the server's tool: the tool result the model received shows the variable that client's
file gave the server, so the whole entry (command, arguments, environment) was read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.config.dialects import Dialects
from agent.config.servers import load_mcp_config
from tests.support.cli import RUN_MCP, cli_env
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages
from tests.support.servers import REPO_ROOT

ENV_SERVER = str(REPO_ROOT / "tests" / "support" / "env_server.py")
PY = sys.executable


def stdio(mark: str) -> dict[str, Any]:
    return {"command": PY, "args": [ENV_SERVER], "env": {"MARK": mark}}


def toml_string(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string


# client -> (place under HOME, file text); each gives the server MARK=<client>
FILES: dict[str, tuple[str, str]] = {
    "claude": (
        ".config/Claude/claude_desktop_config.json",
        json.dumps({"mcpServers": {"envy": stdio("claude")}}),
    ),
    "cursor": (".cursor/mcp.json", json.dumps({"mcpServers": {"envy": stdio("cursor")}})),
    "vscode": (".config/Code/User/mcp.json", json.dumps({"servers": {"envy": stdio("vscode")}})),
    "windsurf": (
        ".codeium/windsurf/mcp_config.json",
        json.dumps({"mcpServers": {"envy": stdio("windsurf")}}),
    ),
    "cline": (
        ".cline/data/settings/cline_mcp_settings.json",
        json.dumps({"mcpServers": {"envy": {**stdio("cline"), "disabled": False}}}),
    ),
    "zed": (
        ".config/zed/settings.json",
        '// Zed settings\n{\n  "theme": "One Dark",\n  "context_servers": {\n'
        f'    "envy": {{"source": "custom", "command": {json.dumps(PY)}, '
        f'"args": [{json.dumps(ENV_SERVER)}], "env": {{"MARK": "zed"}},}},\n'
        '    "ext": {"source": "extension", "settings": {}},\n  },\n}\n',
    ),
    "codex": (
        ".codex/config.toml",
        'model = "o3"\n\n[mcp_servers.envy]\n'
        f"command = {toml_string(PY)}\nargs = [{toml_string(ENV_SERVER)}]\n"
        'startup_timeout_sec = 30\nenv_vars = ["FROM_PARENT"]\n'
        'oauth = { client_id = "x" }\n\n[mcp_servers.envy.env]\nMARK = "codex"\n',
    ),
    "gemini": (
        ".gemini/settings.json",
        json.dumps(
            {
                "theme": "Default",
                "mcpServers": {
                    "envy": {
                        "command": PY,
                        "args": [ENV_SERVER],
                        "env": {"MARK": "$GEMINI_MARK"},
                        "timeout": 30000,
                        "trust": True,
                    }
                },
            }
        ),
    ),
    "goose": (
        ".config/goose/config.yaml",
        "GOOSE_PROVIDER: openai\nextensions:\n  developer:\n    enabled: true\n"
        "    name: developer\n    type: builtin\n  envy:\n    args:\n"
        f"    - {json.dumps(ENV_SERVER)}\n    cmd: {json.dumps(PY)}\n    enabled: true\n"
        "    envs:\n      MARK: goose\n    name: envy\n    timeout: 300\n    type: stdio\n",
    ),
    "opencode": (
        ".config/opencode/opencode.json",
        json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "mcp": {
                    "envy": {
                        "type": "local",
                        "command": [PY, ENV_SERVER],
                        "environment": {"MARK": "{env:OC_MARK}"},
                        "enabled": True,
                    }
                },
            }
        ),
    ),
}
VARIABLES = {"GEMINI_MARK": "gemini", "OC_MARK": "opencode", "FROM_PARENT": "passed"}


def run(
    args: list[str], repo: Path, home: Path, llm: ScriptedLLM
) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(repo, llm.base_url, "sk-e2e-secret"), "HOME": str(home), **VARIABLES}
    return subprocess.run(
        [PY, RUN_MCP, *args],
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )


def place(home: Path, where: str, content: str) -> Path:
    path = home / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def environment_seen(llm: ScriptedLLM) -> dict[str, str]:
    [result] = tool_messages(llm.requests[1])
    start = result.index("{")
    return json.loads(result[start : result.rindex("}") + 1])


@pytest.mark.parametrize("client", sorted(FILES))
def test_each_clients_file_by_name_runs_to_a_tool_call(tmp_path: Path, client: str) -> None:
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    where, content = FILES[client]
    path = place(home, where, content)
    script = [tool_calls(("envy__environment", {})), text("done")]
    with ScriptedLLM(*script) as llm:
        proc = run(["--mcp-config", client, "-p", "what env?", "-y"], repo, home, llm)
    assert proc.returncode == 0, proc.stderr
    assert f"note: --mcp-config {client}: reading {path}" in proc.stderr
    assert environment_seen(llm)["MARK"] == client
    if client == "codex":
        assert environment_seen(llm)["FROM_PARENT"] == "passed"  # env_vars
        assert "note: Codex's mcp_servers.envy.oauth is not read" in proc.stderr
    if client == "zed":
        assert "Zed's context_servers.ext is a Zed extension's server: not read" in proc.stderr
    if client == "goose":
        assert "Goose's extensions.developer is Goose's own (builtin extension)" in proc.stderr


def test_claude_codes_file_gives_this_folders_own_servers(tmp_path: Path) -> None:
    """`~/.claude.json` keeps per-folder servers under `projects`: this folder's are read
    (they win over the user-wide ones), another folder's are not."""
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    doc = {
        "mcpServers": {"envy": stdio("user-wide")},
        "projects": {
            str(repo.resolve()): {"mcpServers": {"envy": stdio("claude-code")}},
            str(tmp_path / "other"): {"mcpServers": {"other": stdio("other")}},
        },
    }
    place(home, ".claude.json", json.dumps(doc))
    with ScriptedLLM(tool_calls(("envy__environment", {})), text("done")) as llm:
        proc = run(["--mcp-config", "claude-code", "-p", "env?", "-y"], repo, home, llm)
    assert proc.returncode == 0, proc.stderr
    assert environment_seen(llm)["MARK"] == "claude-code"
    names = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert not any(n.startswith("other__") for n in names)
    assert "read this folder's servers too" in proc.stderr


def test_a_clients_file_by_path_is_read_in_its_format(tmp_path: Path) -> None:
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    path = place(repo, "shared/codex.toml", FILES["codex"][1])
    with ScriptedLLM(tool_calls(("envy__environment", {})), text("done")) as llm:
        proc = run(["--mcp-config", str(path), "-p", "env?", "-y"], repo, home, llm)
    assert proc.returncode == 0, proc.stderr
    assert environment_seen(llm)["MARK"] == "codex"


def test_a_known_clients_file_without_servers_says_so(tmp_path: Path) -> None:
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    path = place(home, ".gemini/settings.json", json.dumps({"theme": "Default"}))
    with ScriptedLLM(text("ok")) as llm:
        proc = run(["--mcp-config", "gemini", "-p", "hi"], repo, home, llm)
    assert proc.returncode == 0, proc.stderr
    said = f"note: Gemini CLI's {path} holds no servers (nothing under 'mcpServers')"
    assert said in proc.stderr.splitlines()


def test_gemini_timeouts_are_milliseconds_and_http_url_is_streamable_http(tmp_path: Path) -> None:
    path = place(
        tmp_path,
        ".gemini/settings.json",
        json.dumps(
            {
                "mcpServers": {
                    "remote": {"httpUrl": "https://h.example/mcp", "timeout": 5000},
                    "legacy": {"url": "https://h.example/events"},
                }
            }
        ),
    )
    servers = {s.name: s for s in load_mcp_config(path, {}, Dialects(tmp_path, {}))}
    assert (servers["remote"].type, servers["remote"].timeout) == ("http", 5.0)
    assert servers["legacy"].type == "sse"  # Gemini CLI's `url` is an SSE endpoint


def vscode_with_input(repo: Path) -> None:
    inputs = [{"type": "promptString", "id": "tok", "description": "Token", "password": True}]
    entry = {**stdio("vscode"), "env": {"MARK": "vscode", "TOKEN": "${input:tok}"}}
    place(repo, ".vscode/mcp.json", json.dumps({"inputs": inputs, "servers": {"envy": entry}}))


def test_two_project_files_with_one_name_skip_the_unusable_entry(tmp_path: Path) -> None:
    """Issue 31 #2: `.mcp.json` defines the server completely; `.vscode/mcp.json`'s entry
    needs an input only a terminal can answer: a scripted run uses `.mcp.json`'s, says so."""
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    place(repo, ".mcp.json", json.dumps({"mcpServers": {"envy": stdio("mcp.json")}}))
    vscode_with_input(repo)
    with ScriptedLLM(tool_calls(("envy__environment", {})), text("done")) as llm:
        proc = run(["--trust-workspace", "-p", "env?", "-y"], repo, home, llm)
    assert proc.returncode == 0, proc.stderr
    assert environment_seen(llm)["MARK"] == "mcp.json"
    warning = next(line for line in proc.stderr.splitlines() if "skipped" in line)
    assert warning.startswith("warning: server 'envy' skipped: ")
    assert "needs ${input:tok} (Token), which is asked only at a terminal" in warning
    assert warning.endswith("; using the one in .mcp.json")


def test_the_later_file_wins_and_the_warning_names_what_it_overrides(tmp_path: Path) -> None:
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    place(repo, ".mcp.json", json.dumps({"mcpServers": {"envy": stdio("mcp.json")}}))
    place(repo, ".cursor/mcp.json", json.dumps({"mcpServers": {"envy": stdio("cursor")}}))
    with ScriptedLLM(tool_calls(("envy__environment", {})), text("done")) as llm:
        proc = run(["--trust-workspace", "-p", "env?", "-y"], repo, home, llm)
    assert proc.returncode == 0, proc.stderr
    assert environment_seen(llm)["MARK"] == "cursor"
    [warning] = [line for line in proc.stderr.splitlines() if "overrides" in line]
    assert warning == (
        "warning: server 'envy': the entry in .cursor/mcp.json overrides the one in .mcp.json "
        "(the later file wins)"
    )


def test_servers_picks_configured_servers_by_name(tmp_path: Path) -> None:
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    doc = {"mcpServers": {"envy": stdio("a"), "other": {**stdio("b"), "enabled": False}}}
    path = place(repo, "servers.json", json.dumps(doc))
    command = f"{PY} {ENV_SERVER}"
    args = ["--mcp-config", str(path), "--servers", "other", "--server-command", command]
    with ScriptedLLM(text("ok")) as llm:
        proc = run([*args, "-p", "hi"], repo, home, llm)
    assert proc.returncode == 0, proc.stderr
    names = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    # the one named (though switched off in its file) and the command line's; not the other
    assert {"other__environment", "main__environment"} <= names
    assert "envy__environment" not in names
    with ScriptedLLM() as llm:
        proc = run(["--mcp-config", str(path), "--servers", "nope", "-p", "hi"], repo, home, llm)
    assert proc.returncode == 2
    assert "--servers nope: no such server (configured: envy, other)" in proc.stderr


@pytest.mark.anyio
async def test_servers_says_which_file_each_server_came_from(tmp_path: Path) -> None:
    """/servers names the file each server came from, after the rule chose between two."""
    from agent.config.build import build_settings
    from agent.tools.registry import ToolRegistry
    from tests.support.fake_model import FakeModel
    from tests.support.repl import drive

    first = place(tmp_path, "a/servers.json", json.dumps({"mcpServers": {"envy": stdio("a")}}))
    settings = build_settings(
        config_path=None,
        mcp_config_path=first,
        cli_server=None,
        environ={"HOME": str(tmp_path), "MCP_AGENT_STATE_DIR": str(tmp_path / "state")},
        workspace=tmp_path,
    )
    async with ToolRegistry(settings) as registry:
        assert await registry.connect_all() == []
        shown, _ = await drive(registry, FakeModel([]), ["/servers"], tmp_path, settings=settings)
    assert f"envy from {first}" in shown


def test_a_note_quoting_a_files_words_shows_control_characters_escaped(tmp_path: Path) -> None:
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    doc = {"context_servers": {"x\x1b]0;pwned\x07": {"source": "extension"}}}
    place(home, ".config/zed/settings.json", json.dumps(doc))
    with ScriptedLLM(text("ok")) as llm:
        proc = run(["--mcp-config", "zed", "-p", "hi"], repo, home, llm)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr
    assert "Zed's context_servers.x\\x1b]0;pwned\\x07 is a Zed extension's server" in proc.stderr


@pytest.mark.parametrize(
    ("shape", "nested", "line"),
    [
        ("mappings", "".join("  " * (i + 1) + f"k{i}:\n" for i in range(2000)), 65),
        ("flow lists", "  envy:\n    args: " + "[" * 3000 + "]" * 3000 + "\n", 3),
        ("list items", "".join("  " * (i + 1) + "- k:\n" for i in range(2000)), 33),
    ],
)
def test_a_goose_file_nested_too_deep_is_one_line(
    tmp_path: Path, shape: str, nested: str, line: int
) -> None:
    """Goose's reader goes a call deeper per level: past 64 levels it says so in the
    line every other file error uses, not a 1,200-line RecursionError traceback."""
    repo, home = tmp_path / "repo", tmp_path / "home"
    repo.mkdir()
    path = place(repo, "goose.yaml", "extensions:\n" + nested)
    with ScriptedLLM() as llm:
        proc = run(["--mcp-config", str(path), "-p", "hi"], repo, home, llm)
    assert proc.returncode == 2, shape
    assert proc.stderr.splitlines() == [f"error: {path}: line {line}: nested deeper than 64 levels"]
