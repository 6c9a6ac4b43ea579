"""What the user is told, said once: the hint for the transport that fits (both ways),
the server's last stderr lines, and `--server-url …/sse` without `-c` (inferred as a
config file infers it). Real server-everything endpoints, `run_mcp.py -p`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls

NOT_HTTP = 'needs --connection sse or "type": "sse"'
NOT_SSE = "needs --connection http"


def test_http_at_an_sse_endpoint_says_to_use_sse_once(
    tmp_path: Path, everything_sse_url: str
) -> None:
    proc = run_cli(
        ["-c", "http", "--server-url", everything_sse_url, "-p", "x"], tmp_path, base_url=None
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count(NOT_HTTP) == 1, proc.stderr
    assert proc.stderr.count("\n") == 1  # one line: the error


def test_sse_at_a_streamable_endpoint_says_to_use_http_once(
    tmp_path: Path, everything_http_url: str
) -> None:
    proc = run_cli(
        ["-c", "sse", "--server-url", everything_http_url, "-p", "x"], tmp_path, base_url=None
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count(NOT_SSE) == 1, proc.stderr
    assert "(tried: legacy handshake" in proc.stderr  # both eras met the same refusal


def test_a_server_that_dies_at_start_shows_its_stderr_once(tmp_path: Path) -> None:
    script = tmp_path / "die.py"
    lines = [f"fatal detail {i}: the server could not start" for i in range(4)]
    script.write_text(f"import sys\nprint({chr(10).join(lines)!r}, file=sys.stderr)\nsys.exit(3)\n")
    proc = run_cli(
        ["--server-command", f"{sys.executable} {script}", "-p", "x"], tmp_path, base_url=None
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("fatal detail 3") == 1, proc.stderr
    assert "(log: " in proc.stderr


def test_server_url_ending_in_sse_needs_no_connection_flag(
    tmp_path: Path, everything_sse_url: str
) -> None:
    script = [tool_calls(("main__echo", {"message": "inferred sse"})), text("ok")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            ["--server-url", everything_sse_url, "-p", "echo"], tmp_path, base_url=llm.base_url
        )
    assert proc.returncode == 0, proc.stderr
    assert any(
        "inferred sse" in m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"
    )


def test_servers_says_needs_login_only_for_a_server_that_answered_401(
    tmp_path: Path, everything_http_url: str
) -> None:
    """server-everything takes requests without credentials: its auth is "none" even
    though `oauth` is on by default for http servers without an Authorization header."""
    with ScriptedLLM() as llm:
        proc = run_cli(
            ["--server-url", everything_http_url, "-i"],
            tmp_path,
            base_url=llm.base_url,
            stdin="/servers\n",
        )
    assert proc.returncode == 0, proc.stderr
    assert "needs login" not in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.lstrip().startswith("main"))
    assert "none" in row, proc.stdout


def test_a_form_declined_in_a_single_shot_run_is_said_on_stderr(tmp_path: Path) -> None:
    from tests.support.servers import everything_stdio_command

    command, args = everything_stdio_command()
    script = [tool_calls(("main__trigger-elicitation-request", {})), text("declined")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            ["--server-command", " ".join([command, *args]), "--yes", "-p", "go"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    said = "server 'main' asks you to fill in a form — declined: a single-shot run cannot answer"
    assert proc.stderr.count(said) == 1, proc.stderr


def test_a_slash_prompt_two_servers_offer_names_both(tmp_path: Path) -> None:
    from tests.support.servers import everything_stdio_command

    command, args = everything_stdio_command()
    servers = {name: {"command": command, "args": args} for name in ("alpha", "beta")}
    mcp_json(tmp_path, servers)
    with ScriptedLLM() as llm:
        proc = run_cli(
            ["--mcp-config", str(tmp_path / "mcp.json"), "-i"],
            tmp_path,
            base_url=llm.base_url,
            stdin="/simple-prompt\n",
        )
    assert proc.returncode == 0, proc.stderr
    said = "'simple-prompt' is offered by several servers; use one of "
    assert said + "alpha:simple-prompt, beta:simple-prompt" in proc.stdout + proc.stderr
    assert "unknown command" not in proc.stdout + proc.stderr
