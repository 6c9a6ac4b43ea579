"""A server the user asked for that does not connect is a failed run, not a quiet success.

`python run_mcp.py` as a subprocess against the scripted model: a server named on the
command line, or `"required": true`, or every server failing, ends a single-shot run before
the model is asked (exit 1, status error); `servers` in the JSON says which one and why.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import Script, ScriptedLLM, text
from tests.support.servers import free_port, time_server_command

MISSING = "/nonexistent/mcp-server-binary"


def time_server() -> dict[str, Any]:
    command, args = time_server_command()
    return {"command": command, "args": args}


def run_json(tmp_path: Path, config: Path, *script: Script) -> subprocess.CompletedProcess[str]:
    """`run_mcp.py --mcp-config CONFIG -p hi --output json` against a model scripted so."""
    with ScriptedLLM(*script) as llm:
        return run_cli(
            ["--mcp-config", str(config), "-p", "hi", "--output", "json"],
            tmp_path,
            base_url=llm.base_url,
        )


def test_a_missing_server_command_fails_the_run_before_the_model_is_asked(
    tmp_path: Path,
) -> None:
    with ScriptedLLM() as llm:
        proc = run_cli(
            ["--server-command", MISSING, "-p", "hi", "--output", "json"],
            tmp_path,
            base_url=llm.base_url,
        )
        assert llm.requests == []
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "error" and report["answer"] is None
    assert "server 'main' is unavailable" in report["error"]
    [main] = report["servers"]
    assert main["name"] == "main" and main["state"] == "failed" and main["error"]
    assert "server 'main' is unavailable" in proc.stderr


def test_an_sse_server_on_a_closed_port_fails_the_run_with_exit_1(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/sse"
    with ScriptedLLM() as llm:
        proc = run_cli(
            ["-c", "sse", "--server-url", url, "-p", "hi"], tmp_path, base_url=llm.base_url
        )
        assert llm.requests == []
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "error: server 'main' is unavailable" in proc.stderr


def test_every_configured_server_failing_fails_the_run(tmp_path: Path) -> None:
    config = mcp_json(tmp_path, {"a": {"command": MISSING}, "b": {"command": MISSING + "2"}})
    proc = run_json(tmp_path, config)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "error" and "no tool server is available" in report["error"]
    assert [(s["name"], s["state"]) for s in report["servers"]] == [
        ("a", "failed"),
        ("b", "failed"),
    ]


def test_an_optional_server_failing_is_reported_but_the_run_goes_on(tmp_path: Path) -> None:
    config = mcp_json(tmp_path, {"broken": {"command": MISSING}, "time": time_server()})
    proc = run_json(tmp_path, config, text("fine"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "answered" and report["answer"] == "fine"
    states = {s["name"]: (s["state"], bool(s["error"])) for s in report["servers"]}
    assert states == {"broken": ("failed", True), "time": ("ready", False)}


def test_a_required_configured_server_failing_fails_the_run(tmp_path: Path) -> None:
    config = mcp_json(
        tmp_path, {"broken": {"command": MISSING, "required": True}, "time": time_server()}
    )
    with ScriptedLLM() as llm:
        proc = run_cli(["--mcp-config", str(config), "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 1
    assert "error: server 'broken' is unavailable" in proc.stderr
