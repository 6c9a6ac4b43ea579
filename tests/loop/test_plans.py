"""The agent's own `update_plan` (agent/loop/plan.py) as a user and a program meet it: through
`python run_mcp.py` with the scripted model, what the model is offered and told, the
stream-json `plan` line, `--output json`'s last plan, the REPL's block on a real terminal,
ACP's `plan` update (the official SDK's client), hooks, bad arguments and a resume."""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.interfaces import Client
from acp.schema import AgentPlanUpdate, ToolCallStart
from acp.stdio import spawn_agent_process

from agent.loop.plan import PLAN_GUIDANCE, UPDATE_PLAN
from tests.support.cli import RUN_MCP, cli_env, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages
from tests.support.terminal import Terminal, needs_tmux, start, terminals

__all__ = ["terminals"]  # the shared fixture
SECRET = "sk-e2e-secret"  # run_cli's API key: masked wherever the plan goes
PLAN: dict[str, Any] = {
    "explanation": "two things to do",
    "plan": [
        {"step": "Read notes.txt", "status": "completed"},
        {"step": f"Quote the key {SECRET}", "status": "in_progress"},
        {"step": "Answer", "status": "pending"},
    ],
}
DONE = {"plan": [{**s, "status": "completed"} for s in PLAN["plan"]]}


def offered(llm: ScriptedLLM, index: int = 0) -> list[str]:
    return [t["function"]["name"] for t in llm.requests[index].get("tools", [])]


def system_prompt(llm: ScriptedLLM, index: int = 0) -> str:
    return str(llm.requests[index]["messages"][0]["content"])


def config(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "config.toml"
    path.write_text(body)
    return ["--config", str(path)]


@pytest.mark.parametrize(
    ("settings", "offers"),
    [
        ("", True),  # the default window, 128,000 tokens
        ("[llm]\ncontext_window = 32768\n", True),
        ("[llm]\ncontext_window = 12288\n", False),  # the real-model bench's window
        ("[llm]\ncontext_window = 12288\n[agent]\nplan = true\n", True),
        ("[agent]\nplan = false\n", False),
    ],
)
def test_update_plan_and_its_sentence_come_only_with_a_large_window_or_the_setting(
    tmp_path: Path, settings: str, offers: bool
) -> None:
    """A small model's tools and system prompt stay as they were (issue 42 #5)."""
    with ScriptedLLM(text("hi")) as llm:
        proc = run_cli([*config(tmp_path, settings), "-p", "hi"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert (UPDATE_PLAN in offered(llm)) is offers
    assert (PLAN_GUIDANCE in system_prompt(llm)) is offers
    prompt = system_prompt(llm).replace(str(tmp_path), "")  # (the test's name is in its path)
    assert prompt.count("update_plan") == (1 if offers else 0)  # one sentence


def test_a_plan_is_a_stream_json_line_and_the_json_result_s_last_plan(tmp_path: Path) -> None:
    """Each change is one `plan` line (masked like every line); the same plan again is
    not; the result (and --output json) carries the last plan."""
    script = [
        tool_calls(("update_plan", PLAN)),
        tool_calls(("update_plan", PLAN)),  # unchanged: no second line
        tool_calls(("update_plan", DONE)),
        text("Done."),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "go", "--output", "stream-json"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(raw) for raw in proc.stdout.splitlines()]
    plans = [line for line in lines if line["type"] == "plan"]
    assert [list(p) for p in plans] == [["type", "id", "plan", "explanation"]] * 2
    first, last = plans
    assert first["explanation"] == "two things to do" and last["explanation"] is None
    assert [s["status"] for s in first["plan"]] == ["completed", "in_progress", "pending"]
    assert first["plan"][1]["step"].startswith("Quote the key ") and SECRET not in proc.stdout
    uses = [line["id"] for line in lines if line["type"] == "tool_use"]
    assert first["id"] == uses[0] and last["id"] == uses[2]  # the call that set it
    told = [tool_messages(llm.requests[i])[-1] for i in (1, 2)]
    assert told == ["Plan updated.", "Plan unchanged."]
    result = lines[-1]
    assert result["type"] == "result" and result["plan"] == last["plan"]
    assert [s["status"] for s in result["plan"]] == ["completed"] * 3

    with ScriptedLLM(tool_calls(("update_plan", PLAN)), text("Done.")) as llm:
        single = run_cli(["-p", "go", "--output", "json"], tmp_path, base_url=llm.base_url)
    assert single.returncode == 0, single.stderr
    record = json.loads(single.stdout)
    assert [s["status"] for s in record["plan"]] == ["completed", "in_progress", "pending"]
    assert record["tool_calls"][0]["server"] == "agent"
    with ScriptedLLM(text("No plan needed.")) as llm:
        plain = run_cli(["-p", "hi", "--output", "json"], tmp_path, base_url=llm.base_url)
    assert json.loads(plain.stdout)["plan"] is None


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (
            {
                "plan": [
                    {"step": "a", "status": "in_progress"},
                    {"step": "b", "status": "in_progress"},
                ]
            },
            "plan[0], plan[1] are all in_progress; mark at most one in_progress",
        ),
        ({"plan": [{"step": " ", "status": "pending"}]}, "plan[0].step is missing or empty"),
        ({"plan": [{"step": "a", "status": "done"}]}, "plan[0].status 'done' is not one of"),
        ({"plan": [{"step": "x" * 301, "status": "pending"}]}, "301 characters; at most 300"),
        ({"plan": [{"step": "a", "status": "pending"}] * 31}, "31 steps; keep it to 30"),
        ({"steps": ["a"]}, "`plan` must be a non-empty list"),
    ],
)
def test_bad_arguments_are_one_line_the_model_can_fix(
    tmp_path: Path, arguments: dict[str, Any], said: str
) -> None:
    fixed = {"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "pending"}]}
    script = [
        tool_calls(("update_plan", arguments)),
        tool_calls(("update_plan", fixed)),
        text("ok"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "go", "--output", "stream-json"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    told = tool_messages(llm.requests[1])[-1]
    assert told.startswith("Error: update_plan: ") and said in told and "\n" not in told
    assert tool_messages(llm.requests[2])[-1] == "Plan updated."
    lines = [json.loads(raw) for raw in proc.stdout.splitlines()]
    results = [line for line in lines if line["type"] == "tool_result"]
    assert [r["is_error"] for r in results] == [True, False]
    [plan] = [line for line in lines if line["type"] == "plan"]  # the fixed one only
    assert plan["plan"] == fixed["plan"]
    assert "Traceback" not in proc.stderr


RECORDER = """
import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(os.path.dirname(__file__), "seen.jsonl"), "a") as fh:
    fh.write(json.dumps(event) + "\\n")
if event["tool_name"] == "update_plan" and os.environ.get("BLOCK_PLANS"):
    print("plans are off here", file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.parametrize("block", [False, True])
def test_a_pre_tool_use_hook_sees_update_plan_and_may_block_it(tmp_path: Path, block: bool) -> None:
    """The one gate: the agent's own update_plan reaches hooks as server "agent"; a
    blocked call sets no plan."""
    hook = tmp_path / "hooks" / "recorder.py"
    hook.parent.mkdir()
    hook.write_text(RECORDER, encoding="utf-8")
    hooks = tmp_path / "xdg-config" / "mcp-agent" / "hooks.json"
    hooks.parent.mkdir(parents=True)
    entry = {"matcher": "*", "hooks": [{"type": "command", "command": f"{sys.executable} {hook}"}]}
    hooks.write_text(json.dumps({"hooks": {"PreToolUse": [entry]}}), encoding="utf-8")
    env = {"BLOCK_PLANS": "1"} if block else {}
    with ScriptedLLM(tool_calls(("update_plan", PLAN)), text("ok")) as llm:
        proc = run_cli(["-p", "go", "--output", "json"], tmp_path, base_url=llm.base_url,
                       extra_env=env)  # fmt: skip
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    [seen] = [json.loads(line) for line in (hook.parent / "seen.jsonl").read_text().splitlines()]
    assert (seen["mcp_server"], seen["tool_name"]) == ("agent", "update_plan")
    assert seen["tool_input"] == PLAN
    record = json.loads(proc.stdout)
    told = tool_messages(llm.requests[1])[-1]
    if block:
        assert "PreToolUse hook blocked it" in told and "plans are off here" in told
        assert record["plan"] is None
    else:
        assert told == "Plan updated." and record["plan"] is not None


def test_a_resumed_session_keeps_its_plan(tmp_path: Path) -> None:
    """The transcript keeps the call and its result; a resumed session starts from the
    plan it last set (the same plan again is unchanged: no second block)."""
    plan = {
        "plan": [
            {"step": "Read", "status": "completed"},
            {"step": "Answer", "status": "in_progress"},
        ]
    }
    with ScriptedLLM(tool_calls(("update_plan", plan)), text("ok")) as llm:
        first = run_cli(["-p", "go", "--output", "json"], tmp_path, base_url=llm.base_url)
    assert first.returncode == 0, first.stderr
    [transcript] = (tmp_path / "state" / "sessions").glob("*.jsonl")
    saved = transcript.read_text()
    assert '"update_plan"' in saved and "Plan updated." in saved
    script = [tool_calls(("update_plan", plan)), text("still")]
    with ScriptedLLM(*script) as llm:
        args = ["--resume", transcript.stem, "-p", "again", "--output", "stream-json"]
        again = run_cli(args, tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert again.returncode == 0, again.stderr
    assert tool_messages(llm.requests[1])[-1] == "Plan unchanged."
    assert '"type": "plan"' not in again.stdout


@needs_tmux
def test_the_repl_shows_the_plan_as_one_compact_block(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """Marks per step, the explanation, no JSON of the call; model text is text: an escape
    in a step is shown, not run, and the key is masked (docs/security.md)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    steps = {
        "explanation": "[bold]not markup[/bold]",
        "plan": [
            {"step": "Read notes.txt", "status": "completed"},
            {"step": f"Retitle \x1b]0;owned\x07 with {SECRET}", "status": "in_progress"},
            {"step": "Answer", "status": "pending"},
        ],
    }
    script = [tool_calls(("update_plan", steps)), text("All planned.")]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, "plan", ready=r"tools from 1 server")
        term.type("make a plan")
        term.wait_for(r"All planned\.")
        screen = term.screen()
        term.leave()
    assert "plan  [bold]not markup[/bold]" in screen
    assert "☑ Read notes.txt" in screen and "☐ Answer" in screen
    [busy] = [row for row in screen.splitlines() if "◐" in row]
    assert "Retitle \\x1b]0;owned\\x07 with " in busy and SECRET not in busy
    assert '"plan"' not in screen and "update_plan" not in screen  # no JSON, no result line


class Editor:
    """The editor's side of ACP: records every update (no questions come)."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    def of(self, kind: type) -> list[Any]:
        return [u for u in self.updates if isinstance(u, kind)]


@pytest.mark.anyio
async def test_acp_sends_the_plan_as_a_plan_update_and_again_on_load(tmp_path: Path) -> None:
    """Each change is ACP's `plan` update (entries masked, one clean line each, priority
    medium); the call has no card of its own unless it fails; session/load shows it again."""
    root = tmp_path / "ws"
    root.mkdir()
    bad = {"plan": [{"step": "a", "status": "waiting"}]}
    script = [
        tool_calls(("update_plan", bad)),
        tool_calls(("update_plan", PLAN)),
        text("Planned."),
    ]
    editor = Editor()
    env = cli_env(tmp_path, None, SECRET)
    with ScriptedLLM(*script) as llm:
        env["OPENAI_BASE_URL"] = llm.base_url
        async with spawn_agent_process(
            typing.cast(Client, editor), sys.executable, RUN_MCP, "acp", env=env, cwd=tmp_path
        ) as (conn, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=str(root), mcp_servers=[])
            done = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            assert done.stop_reason == "end_turn"
        llm.assert_complete()
    [plan] = editor.of(AgentPlanUpdate)
    assert [(e.status, e.priority) for e in plan.entries] == [
        ("completed", "medium"),
        ("in_progress", "medium"),
        ("pending", "medium"),
    ]
    assert SECRET not in plan.entries[1].content and "Quote the key" in plan.entries[1].content
    [card] = editor.of(ToolCallStart)  # the failed call only, saying why
    assert "update_plan" in card.title
    shown = json.dumps([u.model_dump(mode="json") for u in editor.updates])
    assert "is not one of pending, in_progress, completed" in shown

    loaded = Editor()
    with ScriptedLLM() as llm:
        env["OPENAI_BASE_URL"] = llm.base_url
        async with spawn_agent_process(
            typing.cast(Client, loaded), sys.executable, RUN_MCP, "acp", env=env, cwd=tmp_path
        ) as (conn, _):
            await conn.initialize(protocol_version=1)
            await conn.load_session(cwd=str(root), session_id=session.session_id, mcp_servers=[])
    [again] = loaded.of(AgentPlanUpdate)
    assert again.entries == plan.entries
    assert len(loaded.of(ToolCallStart)) == 1  # the failed call's card, as it was shown
