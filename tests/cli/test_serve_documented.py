"""`run_mcp.py serve` as docs/programs.md tells a user to set it up: its servers-file entry
taken from the docs as written and run by another `run_mcp.py` (the scripted model as both
the outer and the inner agent's), what serve says when that entry passes it no model key,
`--http`'s one line saying where it listens (and a busy port's), and the server name
`agent`, which the agent's own tools hold."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from anyio import open_process
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from mcp import Client

from tests.support.cli import RUN_MCP, cli_env, mcp_json, run_cli, start_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import REPO_ROOT

SECRET = "sk-e2e-secret"
DEAD_MODEL = "http://127.0.0.1:9/v1"  # never asked: these runs end before a request


def test_a_server_named_agent_is_one_config_error_at_every_door(tmp_path: Path) -> None:
    """A server called `agent` would pass for the agent's own tools: its refused calls
    went uncounted (a run of nothing but refusals exited 0, not 4) and hooks matched its
    tools as the agent's own. The name is refused in a file, on the command line and by
    `mcp add`, with one line, before anything runs."""
    entry = {"command": sys.executable, "args": ["-m", "agent.server"]}
    config = mcp_json(tmp_path, {"agent": entry})
    doors = {
        "file": ["-p", "write x.txt", "--mcp-config", str(config)],
        "flag": ["-p", "hi", "--server-command", "true", "--server-name", "agent"],
        "mcp add": ["mcp", "add", "agent", "--", "python", "-m", "x"],
    }
    with ScriptedLLM() as llm:
        for door, args in doors.items():
            proc = run_cli(args, tmp_path, base_url=llm.base_url, api_key=SECRET, timeout=60)
            assert proc.returncode == 2, (door, proc.stderr)
            said = proc.stderr.strip()
            assert "\n" not in said, (door, said)
            assert "'agent' is the name of the agent's own tools" in said, (door, said)
            assert "give this server another name" in said
        llm.assert_complete()  # nothing ran: the model was never asked
    assert not (tmp_path / "xdg-config" / "mcp-agent" / "mcp.json").exists()


def documented_entry() -> dict[str, Any]:
    """The servers-file entry docs/programs.md gives for serve, parsed as written."""
    section = (REPO_ROOT / "docs" / "programs.md").read_text().split("## `run_mcp.py serve`")[1]
    block = re.search(r"```json\n(.*?)```", section.split("\n## ")[0], re.S)
    assert block is not None, "docs/programs.md's serve section has no servers-file entry"
    entry: dict[str, Any] = json.loads(block.group(1))
    return entry


def as_installed(workdir: Path, entry: dict[str, Any]) -> Path:
    """The documented entry with its one placeholder filled in (this checkout's
    run_mcp.py), saved as the file `--mcp-config` names; `python` stays as written."""
    text = json.dumps(entry).replace("/path/to/run_mcp.py", RUN_MCP)
    path = workdir / "client.json"
    path.write_text(text)
    return path


def run_client(args: list[str], workdir: Path, base_url: str) -> subprocess.CompletedProcess[str]:
    """The outer `run_mcp.py ARGS` with the scripted model, where `python` is this
    interpreter (the one with the agent's packages) and serve's own folders are the test's
    too (it inherits HOME and XDG_*, not MCP_AGENT_STATE_DIR); no local model server is
    ever looked for."""
    config = workdir / "xdg-config" / "mcp-agent"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text("[llm]\nlocal_ports = []\n")
    env = cli_env(workdir, base_url, SECRET) | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(workdir / "home"),
        "XDG_STATE_HOME": str(workdir / "xdg-state"),
    }
    proc = start_cli(args, workdir, env)
    try:
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        proc.kill()
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_the_documented_entry_runs_serve_from_another_run_mcp(tmp_path: Path) -> None:
    """docs/programs.md's entry, as written, in the servers file of another `run_mcp.py -p`:
    the outer agent calls `ask`, the inner one (started by that entry, with only what its
    `env` passes) asks the same scripted model and answers."""
    entry = documented_entry()
    (name,) = entry["mcpServers"]
    config = as_installed(tmp_path, entry)
    script = (
        tool_calls((f"{name}__ask", {"prompt": "what is 6 x 7?"})),  # the outer agent
        text("42, says the inner agent"),  # the inner agent, inside serve
        text("The inner agent says 42."),  # the outer agent again
    )
    with ScriptedLLM(*script) as llm:
        args = ["-p", "ask the other agent", "--mcp-config", str(config), "--yes"]
        proc = run_client([*args, "--output", "json"], tmp_path, llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["answer"] == "The inner agent says 42."
    (call,) = result["tool_calls"]
    assert (call["server"], call["tool"], call["is_error"]) == (name, "ask", False)
    assert "42, says the inner agent" in call["output"]
    inner = llm.requests[1]  # the request serve's agent made, with the key the env passed
    assert inner["messages"][-1] == {"role": "user", "content": "what is 6 x 7?"}
    assert llm.headers[1].get("authorization") == f"Bearer {SECRET}"


def test_without_the_env_serve_says_in_one_line_what_to_pass(tmp_path: Path) -> None:
    """The same entry without its `env`: serve starts with no key and no endpoint (the
    client passes a stdio server none of its own) and its one line, which the outer run
    shows as the server's last words, names the variables to put in the entry's env."""
    entry = documented_entry()
    for server in entry["mcpServers"].values():
        del server["env"]
    config = as_installed(tmp_path, entry)
    with ScriptedLLM() as llm:
        args = ["-p", "ask the other agent", "--mcp-config", str(config)]
        proc = run_client(args, tmp_path, llm.base_url)
        llm.assert_complete()  # the outer run ended before asking: no server is available
    assert proc.returncode == 1, proc.stderr
    said = "error: serve has no model: OPENAI_API_KEY is not set for it"
    assert said in proc.stderr
    assert '"env": {"OPENAI_API_KEY": "${OPENAI_API_KEY:-}"' in proc.stderr


def test_serve_without_a_model_is_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "xdg-config" / "mcp-agent"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("[llm]\nlocal_ports = []\n")
    proc = run_cli(["serve"], tmp_path, base_url=None, api_key=None, timeout=60)
    assert proc.returncode == 2
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: serve has no model: OPENAI_API_KEY is not set for it")
    assert not list((tmp_path / "state").glob("sessions/*.jsonl"))  # nothing was opened


async def url_said(proc: Process) -> str:
    """The URL serve's stderr line gives, read as it comes."""
    assert proc.stderr is not None
    said = ""
    async for chunk in TextReceiveStream(proc.stderr):
        said += chunk
        if found := re.search(r"^serving MCP at (http://\S+)$", said, re.M):
            return found.group(1)
    raise AssertionError(f"serve ended without saying where it listens: {said}")


def test_http_says_where_it_listens_and_a_client_reaches_it_there(tmp_path: Path) -> None:
    """`--http 0`: the system picks the port, and the one line on stderr is the URL a
    client's config takes. SIGTERM then ends it with one word (the app's lifespan was
    cancelled at the loop's close and logged as a traceback)."""

    async def main() -> tuple[str, types.CallToolResult, int | None, str]:
        with ScriptedLLM(text("over http")) as llm:
            env = cli_env(tmp_path, llm.base_url, SECRET)
            command = [sys.executable, RUN_MCP, "serve", "--http", "0"]
            async with await open_process(command, cwd=tmp_path, env=env) as proc:
                assert proc.stderr is not None
                try:
                    with anyio.fail_after(60):
                        url = await url_said(proc)
                        async with Client(url) as client:
                            result = await client.call_tool("ask", {"prompt": "hello?"})
                        proc.terminate()
                        rest = "".join([chunk async for chunk in TextReceiveStream(proc.stderr)])
                        await proc.wait()
                finally:
                    if proc.returncode is None:
                        proc.kill()
                        with anyio.CancelScope(shield=True):
                            await proc.wait()
            llm.assert_complete()
        return url, result, proc.returncode, rest

    url, result, code, rest = anyio.run(main)
    assert re.fullmatch(r"http://127\.0\.0\.1:[1-9][0-9]*/mcp", url), url
    assert result.structured_content["answer"] == "over http"
    assert (code, rest) == (143, "terminated\n")


def test_a_busy_port_is_one_line_and_exit_2_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_cli(["serve", "--http", str(port)], tmp_path, base_url=DEAD_MODEL)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: serve --http: port {port} on 127.0.0.1 is in use: pick another with "
        "--http PORT (--http 0: any free one)"
    ]
    assert not (tmp_path / "state" / "logs").exists()  # no server was started
