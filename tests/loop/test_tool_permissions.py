"""`--allowed-tools` / `--disallowed-tools` and `[agent] allowed_tools / disallowed_tools`
(issue 32, item 2), through `python run_mcp.py -p` with the scripted model and the bundled
server: an allowed tool runs in a script without asking, a disallowed one is neither
offered nor run (not even with --yes), and a run whose every call was refused ends with
status `refused` and exit 4 instead of `answered` and 0."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from agent.loop.approval import ApprovalPolicy, ApprovalRequest, ToolRules
from agent.tools.toolspec import ToolSpec
from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages

WRITE = ("local__write_file", {"path": "note.txt", "content": "hello"})


def run(tmp_path: Path, args: list[str], *script: object) -> tuple[dict, str, int, ScriptedLLM]:
    with ScriptedLLM(*script) as llm:  # type: ignore[arg-type]
        proc = run_cli(
            ["-p", "write a note", "--output", "json", *args], tmp_path, base_url=llm.base_url
        )
        llm.assert_complete()
    return json.loads(proc.stdout), proc.stderr, proc.returncode, llm


def offered(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or ()}


@pytest.mark.parametrize("pattern", ["local__write_file", "mcp__local__write_file", "local__*"])
def test_an_allowed_tool_runs_in_a_script_without_yes(tmp_path: Path, pattern: str) -> None:
    out, err, code, _ = run(
        tmp_path, ["--allowed-tools", pattern], tool_calls(WRITE), text("written")
    )
    assert code == 0, err
    assert out["status"] == "answered" and out["tool_calls"][0]["is_error"] is False
    assert (tmp_path / "note.txt").read_text() == "hello"


def test_a_run_whose_every_call_was_refused_ends_refused_with_exit_4(tmp_path: Path) -> None:
    out, err, code, llm = run(tmp_path, [], tool_calls(WRITE), text("I could not write it."))
    assert code == 4, err
    assert out["status"] == "refused" and out["answer"] == "I could not write it."
    assert "every tool call of this run was refused" in out["error"]
    assert "refused:" in err and "--allowed-tools" in err
    told = tool_messages(llm.requests[1])[0]
    assert "--allowed-tools local__write_file" in told and "rerun with --yes" in told
    assert not (tmp_path / "note.txt").exists()


def test_a_run_with_one_call_that_ran_is_still_answered(tmp_path: Path) -> None:
    time_call = ("local__get_current_time", {"timezone": "UTC"})
    out, err, code, _ = run(tmp_path, [], tool_calls(WRITE, time_call), text("half done"))
    assert code == 0, err
    assert out["status"] == "answered"


def test_a_disallowed_tool_is_not_offered_and_never_runs_even_with_yes(tmp_path: Path) -> None:
    args = ["--yes", "--disallowed-tools", "mcp__local__write_file"]
    out, err, code, llm = run(tmp_path, args, tool_calls(WRITE), text("not allowed"))
    assert code == 4, err
    names = offered(llm.requests[0])
    assert "local__write_file" not in names and "local__read_file" in names
    assert "disallowed by the user's settings" in tool_messages(llm.requests[1])[0]
    assert out["status"] == "refused" and not (tmp_path / "note.txt").exists()


def test_config_keys_and_flags_add_up_and_disallowed_wins(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        '[agent]\nallowed_tools = ["local__write_file"]\ndisallowed_tools = ["mcp__local__bash"]\n'
    )
    args = ["--config", str(config), "--disallowed-tools", "local__list_dir,local__write_file"]
    out, err, code, llm = run(tmp_path, args, tool_calls(WRITE), text("no"))
    names = offered(llm.requests[0])
    assert not names & {"local__bash", "local__list_dir", "local__write_file"}
    assert "local__read_file" in names
    assert code == 4 and out["status"] == "refused", err


def test_the_policy_refuses_a_disallowed_tool_whoever_says_yes() -> None:
    """The check every caller of the gate gets (a page's call, a hook's ask, trust)."""
    spec = ToolSpec("local", "bash", "", {}, read_only=True)
    request = ApprovalRequest("local", "bash", "local__bash", {}, spec)

    async def yes(_: ApprovalRequest) -> str:
        return "yes"

    policy = ApprovalPolicy(
        mode="yes",
        ask=yes,  # type: ignore[arg-type]
        trusted=lambda server, tool: True,
        rules=ToolRules.of(["local__*"], ["mcp__local"]),
    )

    async def check() -> None:
        assert not (await policy.check(request)).allowed
        assert not (await policy.check(request, hook_asks="a hook asks")).allowed

    anyio.run(check)
    assert policy.hidden(spec, "local__bash")
    assert ToolRules.of(["a b,c"]).allowed == ("a", "b", "c")


def test_slash_tools_says_a_tool_is_disallowed_and_an_allowed_one_runs_without_asking(
    tmp_path: Path,
) -> None:
    args = ["-i", "--disallowed-tools", "local__bash", "--allowed-tools", "local__write_file"]
    with ScriptedLLM() as llm:
        stdin = "/tools local__bash\n/tools local__write_file\n"
        proc = run_cli(args, tmp_path, base_url=llm.base_url, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout + proc.stderr
    bash, write = shown.split("local__write_file", 1)
    assert "disallowed (--disallowed-tools)" in bash
    assert "runs without asking" in write and "disallowed" not in write
