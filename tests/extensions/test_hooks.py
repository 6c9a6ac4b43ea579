"""User hooks (Claude Code's `hooks` shape), end to end through `python run_mcp.py`: the
scripted model, the bundled server, and real hook commands (small Python scripts) read from
the user-level `hooks.json` (`$XDG_CONFIG_HOME/mcp-agent/hooks.json`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.config.trust import decide
from agent.config.trust_listing import describe
from agent.extensions.hook_files import Hook, HookSet, load_hooks
from agent.extensions.hooks import Hooks
from tests.support.cli import run_cli
from tests.support.fake_llm import Script, ScriptedLLM, text, tool_calls, tool_messages


def hook_script(tmp_path: Path, name: str, body: str) -> str:
    """A hook command: a Python script that has the event as `event` (from stdin)."""
    path = tmp_path / "hooks" / f"{name}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text("import json, os, sys\nevent = json.load(sys.stdin)\n" + body, encoding="utf-8")
    return f"{sys.executable} {path}"


def run_scripted(
    tmp_path: Path, args: list[str], *script: Script
) -> tuple[subprocess.CompletedProcess[str], ScriptedLLM]:
    """`run_mcp.py ARGS` against a model scripted so, every turn of which must have been
    asked; the model is returned for what it was sent (tool results, hook context)."""
    with ScriptedLLM(*script) as llm:
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    return proc, llm


def user_hooks(tmp_path: Path, hooks: dict[str, Any]) -> Path:
    """Write the user-level hooks.json the CLI (tests.support.cli sets XDG_CONFIG_HOME) reads."""
    path = tmp_path / "xdg-config" / "mcp-agent" / "hooks.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hooks": hooks}), encoding="utf-8")
    return path


def on(matcher: str, command: str, timeout: float | None = None) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        entry["timeout"] = timeout
    return [{"matcher": matcher, "hooks": [entry]}]


GUARD = """
with open(os.path.join(os.path.dirname(__file__), "seen.json"), "w") as fh:
    json.dump({"event": event, "env": sorted(os.environ)}, fh)
if "rm -rf" in event["tool_input"].get("command", ""):
    print("rm -rf is not allowed in this project; delete files one by one", file=sys.stderr)
    sys.exit(2)
"""


def test_a_pre_tool_use_hook_blocks_rm_rf_and_the_model_gets_its_reason(tmp_path: Path) -> None:
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "data.txt").write_text("keep me")
    user_hooks(tmp_path, {"PreToolUse": on("bash", hook_script(tmp_path, "guard", GUARD))})
    script = [tool_calls(("local__bash", {"command": "rm -rf precious"})), text("blocked")]
    proc, llm = run_scripted(tmp_path, ["-p", "clean up", "--yes", "--output", "json"], *script)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "precious" / "data.txt").read_text() == "keep me"  # nothing ran
    told = tool_messages(llm.requests[1])[0]
    assert "PreToolUse hook blocked it" in told and "delete files one by one" in told
    call = json.loads(proc.stdout)["tool_calls"][0]
    assert call["is_error"] is True and "rm -rf is not allowed" in call["output"]
    seen = json.loads((tmp_path / "hooks" / "seen.json").read_text())
    event = seen["event"]
    assert event["hook_event_name"] == "PreToolUse" and event["tool_name"] == "local__bash"
    assert event["tool_input"] == {"command": "rm -rf precious"}
    assert event["mcp_server"] == "local" and event["mcp_tool"] == "bash"
    assert event["tool_use_id"] and event["session_id"] and event["cwd"] == str(tmp_path)
    assert event["transcript_path"].endswith(".jsonl")
    assert event["permission_mode"] == "bypassPermissions"
    # A user-level hook gets the user's environment, as Claude Code's do (issue 32, item 3;
    # it used to be scrubbed): a hook that reads its own variables keeps working.
    assert "OPENAI_API_KEY" in seen["env"] and "PATH" in seen["env"]
    assert "CLAUDE_PROJECT_DIR" in seen["env"]


def test_a_project_hook_gets_the_scrubbed_environment_and_matches_claude_code_names(
    tmp_path: Path,
) -> None:
    """A trusted folder's config/hooks.json runs with the environment stdio servers get
    (no key of the agent's, nor the user's other variables); a matcher written with Claude
    Code's name `mcp__local__bash` matches our `local__bash` (issue 32, item 3)."""
    project = tmp_path / "config" / "hooks.json"
    project.parent.mkdir()
    command = hook_script(tmp_path, "guard", GUARD)
    project.write_text(json.dumps({"hooks": {"PreToolUse": on("mcp__local__bash", command)}}))
    script = [tool_calls(("local__bash", {"command": "rm -rf precious"})), text("blocked")]
    with ScriptedLLM(*script) as llm:
        args = ["-p", "clean up", "--yes", "--trust-workspace"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url, extra_env={"MY_HOOK_VAR": "1"})
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert "delete files one by one" in tool_messages(llm.requests[1])[0]  # it matched
    env = json.loads((tmp_path / "hooks" / "seen.json").read_text())["env"]
    assert "OPENAI_API_KEY" not in env and "MY_HOOK_VAR" not in env and "PATH" in env
    assert "CLAUDE_PROJECT_DIR" in env


def test_a_user_hook_matches_claude_code_s_tool_name_and_reads_its_own_variables(
    tmp_path: Path,
) -> None:
    body = 'print(os.environ["MY_HOOK_VAR"], file=sys.stderr)\nsys.exit(2)\n'
    hooks = {"PreToolUse": on("mcp__local__.*", hook_script(tmp_path, "mine", body))}
    user_hooks(tmp_path, hooks)
    script = [tool_calls(("local__list_dir", {})), text("blocked")]
    with ScriptedLLM(*script) as llm:
        args = ["-p", "list", "--output", "json"]
        extra = {"MY_HOOK_VAR": "token-from-the-users-shell"}
        proc = run_cli(args, tmp_path, base_url=llm.base_url, extra_env=extra)
        llm.assert_complete()
    assert "token-from-the-users-shell" in tool_messages(llm.requests[1])[0], proc.stderr


REWRITE = """
command = event["tool_input"]["command"].replace("--force", "--dry-run")
print(json.dumps({"hookSpecificOutput": {
    "hookEventName": "PreToolUse",
    "permissionDecision": "allow",
    "updatedInput": {"command": command},
}}))
"""


def test_a_pre_tool_use_hook_rewrites_an_argument(tmp_path: Path) -> None:
    user_hooks(tmp_path, {"PreToolUse": on("local__bash", hook_script(tmp_path, "fix", REWRITE))})
    script = [tool_calls(("local__bash", {"command": "echo deploy --force"})), text("done")]
    proc, llm = run_scripted(tmp_path, ["-p", "deploy", "--yes", "--output", "json"], *script)
    assert proc.returncode == 0, proc.stderr
    told = tool_messages(llm.requests[1])[0]
    assert "deploy --dry-run" in told and "--force" not in told
    call = json.loads(proc.stdout)["tool_calls"][0]
    assert call["arguments"] == {"command": "echo deploy --dry-run"}  # what actually ran
    assert "PreToolUse hook changed the arguments of local__bash" in proc.stderr


AUDIT = """
size = len(event["tool_response"]["content"])
print(json.dumps({"hookSpecificOutput": {
    "hookEventName": "PostToolUse",
    "additionalContext": f"audit: {event['tool_name']} returned {size} characters; "
                         "this file is generated, do not edit it",
}}))
"""


def test_a_post_tool_use_hook_adds_context_to_the_next_request(tmp_path: Path) -> None:
    (tmp_path / "gen.txt").write_text("generated content\n")
    hooks = {"PostToolUse": on("^local__read_.*$", hook_script(tmp_path, "audit", AUDIT))}
    user_hooks(tmp_path, hooks)
    script = [tool_calls(("local__read_file", {"path": "gen.txt"})), text("read it")]
    proc, llm = run_scripted(tmp_path, ["-p", "read gen.txt", "--output", "json"], *script)
    assert proc.returncode == 0, proc.stderr
    told = tool_messages(llm.requests[1])[0]
    assert "generated content" in told
    # After the server's untrusted envelope, as the user's own words.
    after = told.rsplit("</untrusted-data", 1)[1]
    assert "[from the user's hooks]" in after and "this file is generated, do not edit it" in after
    assert "audit: local__read_file returned" in after
    output = json.loads(proc.stdout)["tool_calls"][0]["output"]
    assert output.startswith("generated content") and "untrusted-data" not in output


HANG = """
with open(os.path.join(os.path.dirname(__file__), "pid"), "w") as fh:
    fh.write(str(os.getpid()))
import time
time.sleep(600)
"""


def test_a_hanging_hook_is_stopped_at_its_timeout_and_the_run_goes_on(tmp_path: Path) -> None:
    lint = hook_script(tmp_path, "lint", 'print("lint is broken", file=sys.stderr)\nsys.exit(1)')
    hooks = {
        "PreToolUse": [
            {
                "matcher": "*",
                "hooks": [
                    {
                        "type": "command",
                        "command": hook_script(tmp_path, "hang", HANG),
                        "timeout": 1,
                    },
                    {"type": "command", "command": lint},
                ],
            }
        ]
    }
    user_hooks(tmp_path, hooks)
    script = [tool_calls(("local__bash", {"command": "echo still-ran"})), text("fine")]
    # run_cli's own bound (90 s) < the hook's 600 s
    proc, llm = run_scripted(tmp_path, ["-p", "go", "--yes"], *script)
    assert proc.returncode == 0, proc.stderr
    assert "still-ran" in tool_messages(llm.requests[1])[0]
    assert "timed out after 1 s (stopped); the run goes on" in proc.stderr
    assert "exited 1: lint is broken; the run goes on" in proc.stderr
    pid = int((tmp_path / "hooks" / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped, not left behind


def test_hooks_of_an_untrusted_project_folder_are_ignored_and_said_once(tmp_path: Path) -> None:
    block = hook_script(tmp_path, "block", 'print("no", file=sys.stderr)\nsys.exit(2)')
    project = tmp_path / "config" / "hooks.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"hooks": {"PreToolUse": on("*", block)}}))
    script = [
        tool_calls(("local__bash", {"command": "echo one"})),
        tool_calls(("local__bash", {"command": "echo two"})),
        text("both ran"),
    ]
    proc, llm = run_scripted(tmp_path, ["-p", "go", "--yes"], *script)
    assert proc.returncode == 0, proc.stderr
    assert "one" in tool_messages(llm.requests[1])[0]
    assert "two" in tool_messages(llm.requests[2])[-1]
    ignoring = [line for line in proc.stderr.splitlines() if "ignoring" in line]
    assert len(ignoring) == 1 and "config/hooks.json" in ignoring[0], proc.stderr
    assert "--trust-workspace" in ignoring[0]


def test_a_trusted_project_folder_s_hooks_run(tmp_path: Path) -> None:
    block = hook_script(
        tmp_path, "block", 'print("not in this repo", file=sys.stderr)\nsys.exit(2)'
    )
    project = tmp_path / "config" / "hooks.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"hooks": {"PreToolUse": on("bash", block)}}))
    script = [tool_calls(("local__bash", {"command": "touch made"})), text("blocked")]
    proc, llm = run_scripted(tmp_path, ["-p", "go", "--yes", "--trust-workspace"], *script)
    assert proc.returncode == 0, proc.stderr
    assert "not in this repo" in tool_messages(llm.requests[1])[0]
    assert not (tmp_path / "made").exists() and "ignoring" not in proc.stderr


CONTEXT = 'print("Project codename: BLUEBIRD")'
TICKET = 'print("ticket: " + ("PRJ-42" if "bug" in event["prompt"] else "none"))'
STOP = """
if not event["stop_hook_active"]:
    print("run the tests before you stop", file=sys.stderr)
    sys.exit(2)
"""


def test_session_start_prompt_and_stop_hooks_reach_the_model(tmp_path: Path) -> None:
    user_hooks(
        tmp_path,
        {
            "SessionStart": on("startup", hook_script(tmp_path, "start", CONTEXT)),
            "UserPromptSubmit": on("", hook_script(tmp_path, "ticket", TICKET)),
            "Stop": on("", hook_script(tmp_path, "stop", STOP)),
        },
    )
    proc, llm = run_scripted(
        tmp_path, ["-p", "fix the bug"], text("done?"), text("tests pass, done")
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "tests pass, done\n"
    first = llm.messages(0)
    assert "Project codename: BLUEBIRD" in first[0]["content"]  # the system prompt
    assert first[-1]["content"].startswith("fix the bug\n\n") and "PRJ-42" in first[-1]["content"]
    assert "run the tests before you stop" in llm.messages(1)[-1]["content"]


def test_a_prompt_hook_exit_2_blocks_the_request_before_the_model(tmp_path: Path) -> None:
    deny = 'print("no production talk here", file=sys.stderr)\nsys.exit(2)'
    user_hooks(tmp_path, {"UserPromptSubmit": on("", hook_script(tmp_path, "deny", deny))})
    with ScriptedLLM() as llm:
        proc = run_cli(
            ["-p", "drop the prod db", "--output", "json"], tmp_path, base_url=llm.base_url
        )
        assert llm.requests == []
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["status"] == "error" and "no production talk here" in result["error"]


ALLOW = 'print(json.dumps({"hookSpecificOutput": {"permissionDecision": "allow"}}))'
ASK = """
decision = {"permissionDecision": "ask", "permissionDecisionReason": "writes need a person"}
print(json.dumps({"hookSpecificOutput": decision}))
"""


def test_a_hook_never_runs_what_the_settings_refuse_and_may_refuse_what_they_allow(
    tmp_path: Path,
) -> None:
    """allow from a hook does not skip the approval a single-shot run lacks; ask from a
    hook is not overridden by --yes (this run cannot ask, so the call is refused)."""
    user_hooks(tmp_path, {"PreToolUse": on("write_file", hook_script(tmp_path, "allow", ALLOW))})
    script = [tool_calls(("local__write_file", {"path": "a.txt", "content": "x"})), text("no")]
    proc, llm = run_scripted(tmp_path, ["-p", "write"], *script)
    assert proc.returncode == 4, proc.stderr  # its one call refused: status refused (issue 32)
    assert not (tmp_path / "a.txt").exists()
    assert "rerun with --yes" in tool_messages(llm.requests[1])[0]

    user_hooks(tmp_path, {"PreToolUse": on("write_file", hook_script(tmp_path, "ask", ASK))})
    script = [tool_calls(("local__write_file", {"path": "b.txt", "content": "x"})), text("no")]
    proc, llm = run_scripted(tmp_path, ["-p", "write", "--yes"], *script)
    assert proc.returncode == 4, proc.stderr  # the approval the hook wanted was not given
    assert not (tmp_path / "b.txt").exists()
    told = tool_messages(llm.requests[1])[0]
    assert "writes need a person" in told and "cannot ask" in told


def test_slash_hooks_lists_the_active_hooks_and_their_file(tmp_path: Path) -> None:
    path = user_hooks(tmp_path, {"PostToolUse": on("local__bash", "true", timeout=5)})
    with ScriptedLLM() as llm:
        proc = run_cli(["-i"], tmp_path, base_url=llm.base_url, stdin="/hooks\n")
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "PostToolUse" in out and "local__bash" in out and "5 s" in out
    assert str(path) in out.replace(" ", "") or str(path) in proc.stdout.replace("\n", "")


def test_a_bad_hooks_file_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    user_hooks(tmp_path, {"PreToolUse": [{"matcher": "bash", "hooks": [{"type": "command"}]}]})
    proc = run_cli(["-p", "hi"], tmp_path, base_url="http://127.0.0.1:9/v1")
    assert proc.returncode == 2
    assert "hooks.PreToolUse[0].hooks[0].command: required" in proc.stderr


def test_matching_hooks_run_in_parallel(tmp_path: Path) -> None:
    """Two hooks that each take 1.5 s finish together in well under 3 s."""
    nap = hook_script(tmp_path, "nap", "import time\ntime.sleep(1.5)")
    nap2 = hook_script(tmp_path, "nap2", "import time\ntime.sleep(1.5)")
    hookset = HookSet((Hook("PreToolUse", nap), Hook("PreToolUse", nap2)))
    hooks = Hooks(hookset, dict(os.environ), tmp_path)

    async def fire() -> float:
        started = time.monotonic()
        with anyio.fail_after(20):
            outcome = await hooks.pre_tool("c1", "local__bash", "local", "bash", {})
        assert outcome.block is None and outcome.warnings == ()
        return time.monotonic() - started

    assert anyio.run(fire) < 2.9


def test_project_hooks_are_read_only_in_a_trusted_folder(tmp_path: Path) -> None:
    project = tmp_path / "config" / "hooks.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"hooks": {"Stop": on("", "true")}}))
    env = {"XDG_CONFIG_HOME": str(tmp_path / "none")}
    untrusted = load_hooks(env, tmp_path, trusted=False)
    assert untrusted.hooks == () and "not trusted" in untrusted.ignored[0]
    trusted = load_hooks(env, tmp_path, trusted=True)
    assert [h.source for h in trusted.hooks] == [str(project)] and trusted.notes == ()


def test_the_trust_question_shows_the_commands_a_project_s_hooks_would_run(
    tmp_path: Path,
) -> None:
    project = tmp_path / "config" / "hooks.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"hooks": {"PostToolUse": on("bash", "curl evil.example")}}))
    found = decide(tmp_path, {}, tmp_path / "state")
    assert not found.trusted and found.files == ("config/hooks.json",)
    assert describe(found, {}) == [
        "config/hooks.json: on PostToolUse (bash) runs curl evil.example"
    ]


KEEP = """
with open(os.path.join(os.path.dirname(__file__), "compact.json"), "w") as fh:
    json.dump(event, fh)
print("the audit needs the full history", file=sys.stderr)
sys.exit(2)
"""


def test_a_pre_compact_hook_can_stop_slash_compact(tmp_path: Path) -> None:
    user_hooks(tmp_path, {"PreCompact": on("manual", hook_script(tmp_path, "keep", KEEP))})
    with ScriptedLLM(text("hi")) as llm:  # no request for a summary: the hook stopped it
        proc = run_cli(["-i"], tmp_path, base_url=llm.base_url, stdin="hello\n/compact the tests\n")
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "a PreCompact hook stopped the compaction: the audit needs the full history" in said
    event = json.loads((tmp_path / "hooks" / "compact.json").read_text())
    assert event["hook_event_name"] == "PreCompact" and event["trigger"] == "manual"
    assert event["custom_instructions"] == "the tests"
