"""Sub-agents (agent/loop/subagents.py: the agent's own `task`) as a user and a program meet
them: through `python run_mcp.py` with the scripted model and the bundled server, what the
child's requests carried (its system prompt, its tools, no `task`), what the parent was
told, the usage, the stream-json lines, the hooks, trust and the depth limit."""

from __future__ import annotations

import json
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.interfaces import Client
from acp.schema import ToolCallProgress, ToolCallStart
from acp.stdio import spawn_agent_process

from tests.support.cli import RUN_MCP, cli_env, run_cli
from tests.support.fake_llm import Script, ScriptedLLM, Turn, text, tool_calls, tool_messages

READER = """---
name: reader
description: Reads files and reports what they say
tools:
  - local__read_file
  - mcp__local__list_dir
---
You are READER-PROMPT-7: read what you are asked to and report it in one line.
"""


def offered(llm: ScriptedLLM, index: int) -> list[str]:
    return [t["function"]["name"] for t in llm.requests[index].get("tools", [])]


def system_prompt(llm: ScriptedLLM, index: int) -> str:
    return str(llm.requests[index]["messages"][0]["content"])


def define(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def user_agents(tmp_path: Path) -> Path:
    return tmp_path / "xdg-config" / "mcp-agent" / "agents"


def test_a_defined_agent_runs_with_its_prompt_and_tools_and_the_parent_gets_its_answer(
    tmp_path: Path,
) -> None:
    """The child's requests: the definition's body as system prompt, its tools only (the
    bundled server's others and `task` are not offered); the parent gets the answer, marked
    as the sub-agent's data, not the child's transcript; usage of all four requests."""
    (tmp_path / "notes.txt").write_text("the launch is on Tuesday")
    define(tmp_path / ".claude" / "agents", "reader", READER)
    script = [
        tool_calls(("task", {"agent": "reader", "prompt": "What does notes.txt say?"})),
        tool_calls(("local__read_file", {"path": "notes.txt"})),
        text("notes.txt says the launch is on Tuesday."),
        text("The launch is on Tuesday."),
    ]
    with ScriptedLLM(*script) as llm:
        args = ["-p", "when is the launch?", "--trust-workspace", "--output", "json"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    parent_tools = offered(llm, 0)
    assert "task" in parent_tools
    task = next(t for t in llm.requests[0]["tools"] if t["function"]["name"] == "task")
    assert "- reader: Reads files and reports what they say" in task["function"]["description"]
    child = system_prompt(llm, 1)
    assert child.startswith("You are READER-PROMPT-7")
    assert "READER-PROMPT-7" not in system_prompt(llm, 0)
    assert system_prompt(llm, 0).split("\n")[0] not in child  # not the parent's prompt
    child_tools = offered(llm, 1)
    assert {"local__read_file", "local__list_dir"} <= set(child_tools)
    assert "task" not in child_tools and "local__bash" not in child_tools
    assert [m["role"] for m in llm.messages(1)] == ["system", "user"]  # nothing of the parent's
    assert llm.messages(1)[1]["content"] == "What does notes.txt say?"
    assert "the launch is on Tuesday" in tool_messages(llm.requests[2])[0]
    told = tool_messages(llm.requests[3])
    assert len(told) == 1 and "notes.txt says the launch is on Tuesday." in told[0]
    assert "read_file" not in told[0]  # the answer, not the child's transcript
    record = json.loads(proc.stdout)
    assert record["answer"] == "The launch is on Tuesday."
    assert record["usage"]["prompt_tokens"] == 4 * 12  # the child's two requests too
    assert record["usage"]["completion_tokens"] == 4 * 7
    assert [c["name"] for c in record["tool_calls"]] == ["task"]


def test_stream_json_marks_the_child_s_lines_with_parent_tool_use_id(tmp_path: Path) -> None:
    """A general-purpose child (no `agent`): the parent's system prompt, every tool but
    `task`; its calls are lines of their own with the parent's call id."""
    (tmp_path / "notes.txt").write_text("hello")
    script = [
        tool_calls(("task", {"prompt": "read notes.txt"})),
        tool_calls(("local__read_file", {"path": "notes.txt"})),
        text("It says hello."),
        text("Done."),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "go", "--output", "stream-json"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert system_prompt(llm, 1) == system_prompt(llm, 0)
    assert "task" not in offered(llm, 1) and "local__bash" in offered(llm, 1)
    lines = [json.loads(raw) for raw in proc.stdout.splitlines()]
    task_use = next(line for line in lines if line["type"] == "tool_use" and line["tool"] == "task")
    children = [line for line in lines if "parent_tool_use_id" in line]
    assert {line["parent_tool_use_id"] for line in children} == {task_use["id"]}
    kinds = [(line["type"], line.get("tool")) for line in children]
    assert ("tool_use", "read_file") in kinds and ("tool_result", "read_file") in kinds
    assert ("message", None) in kinds
    assert list(children[0])[-1] == "parent_tool_use_id"
    own = [line for line in lines if line["type"] == "tool_result" and line["tool"] == "task"]
    assert len(own) == 1 and "It says hello." in own[0]["output"]
    assert "parent_tool_use_id" not in own[0]


HOOK = """
import json, sys, pathlib
event = json.load(sys.stdin)
with open(pathlib.Path(__file__).with_name("seen.jsonl"), "a") as fh:
    fh.write(json.dumps(event) + "\\n")
"""


def test_hooks_see_the_child_s_calls_with_its_name_and_subagent_stop_fires(
    tmp_path: Path,
) -> None:
    hook = tmp_path / "hooks" / "seen.py"
    hook.parent.mkdir()
    hook.write_text(HOOK)
    command = f"{sys.executable} {hook}"
    entry = [{"matcher": "*", "hooks": [{"type": "command", "command": command}]}]
    plain = [{"hooks": [{"type": "command", "command": command}]}]
    hooks = {"PreToolUse": entry, "SubagentStop": plain, "Stop": plain}
    path = tmp_path / "xdg-config" / "mcp-agent" / "hooks.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"hooks": hooks}))
    define(user_agents(tmp_path), "reader", READER)
    (tmp_path / "notes.txt").write_text("hello")
    script = [
        tool_calls(("task", {"agent": "reader", "prompt": "read notes.txt"})),
        tool_calls(("local__read_file", {"path": "notes.txt"})),
        text("It says hello."),
        text("Done."),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "go"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    seen = [json.loads(line) for line in (hook.parent / "seen.jsonl").read_text().splitlines()]
    events = [(e["hook_event_name"], e.get("tool_name"), e.get("agent_type")) for e in seen]
    assert events == [
        ("PreToolUse", "task", None),  # the parent's call of task itself
        ("PreToolUse", "local__read_file", "reader"),
        ("SubagentStop", None, "reader"),
        ("Stop", None, None),
    ]
    task_id = seen[0]["tool_use_id"]
    assert seen[1]["agent_id"] == task_id and seen[2]["agent_id"] == task_id
    assert seen[2]["last_assistant_message"] == "It says hello."
    assert seen[1]["session_id"] == seen[0]["session_id"]


def test_an_untrusted_folder_s_agents_reach_no_request(tmp_path: Path) -> None:
    """`.claude/agents` of a folder not trusted: no definition in `task`'s description,
    no system prompt of it; the stderr note names the folder; the user's own still count."""
    define(tmp_path / ".claude" / "agents", "evil", READER.replace("reader", "evil"))
    with ScriptedLLM(tool_calls(("task", {"agent": "evil", "prompt": "x"})), text("ok")) as llm:
        proc = run_cli(["-p", "go"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert ".claude/agents" in proc.stderr
    assert len(llm.requests) == 2  # no child ran
    assert "READER-PROMPT-7" not in json.dumps(llm.requests) and "evil:" not in json.dumps(
        llm.requests[0]["tools"]
    )
    assert "no agent named 'evil'" in tool_messages(llm.requests[1])[0]
    # A small window and no definition: task is not offered at all (issue 42 #5).
    config = tmp_path / "small.toml"
    config.write_text("[llm]\ncontext_window = 12288\n")
    with ScriptedLLM(text("hi")) as llm:
        proc = run_cli(["--config", str(config), "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert "task" not in offered(llm, 0)
    define(user_agents(tmp_path), "reader", READER)  # the user's own: offered
    with ScriptedLLM(text("hi")) as llm:
        proc = run_cli(["--config", str(config), "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert "task" in offered(llm, 0)


def _answer_own_prompt(body: dict[str, Any]) -> Turn:
    """A child's reply that depends only on its own request, so two children running at
    once may ask in either order."""
    prompt = body["messages"][-1]["content"]
    return text(f"answer to {prompt}")


def test_two_children_run_at_once_and_a_child_cannot_start_children(tmp_path: Path) -> None:
    script: list[Script] = [
        tool_calls(("task", {"prompt": "first"}), ("task", {"prompt": "second"})),
        _answer_own_prompt,
        _answer_own_prompt,
        text("Both done."),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "go", "--output", "json"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    told = tool_messages(llm.requests[3])
    assert "answer to first" in told[0] and "answer to second" in told[1]
    assert json.loads(proc.stdout)["usage"]["prompt_tokens"] == 4 * 12

    script = [  # the child calls task anyway: it is no tool of a child's
        tool_calls(("task", {"prompt": "go deeper"})),
        tool_calls(("task", {"prompt": "deeper still"})),
        text("I cannot."),
        text("Done."),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(["-p", "go"], tmp_path, base_url=llm.base_url)
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    assert "task" not in offered(llm, 1)
    assert "unknown tool 'task'" in tool_messages(llm.requests[2])[0]


class Editor:
    """The editor's side of ACP: records every update (no questions come)."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)


@pytest.mark.anyio
async def test_acp_shows_the_child_as_its_task_card_with_its_progress(tmp_path: Path) -> None:
    """One card, the `task` call's; the child's calls are that card's content as they go;
    the card ends with the child's answer."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello")
    script = [
        tool_calls(("task", {"prompt": "read notes.txt"})),
        tool_calls(("local__read_file", {"path": "notes.txt"})),
        text("It says hello."),
        text("Done."),
    ]
    editor = Editor()
    env = cli_env(tmp_path, None, "sk-e2e-secret")
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
    [card] = [u for u in editor.updates if isinstance(u, ToolCallStart)]
    updates = [
        u
        for u in editor.updates
        if isinstance(u, ToolCallProgress) and u.tool_call_id == card.tool_call_id
    ]
    said = [
        (u.status, json.dumps(u.model_dump(mode="json")["content"], ensure_ascii=False))
        for u in updates
    ]
    progress = [text for status, text in said if status == "in_progress"]
    assert any("▸ local__read_file" in p for p in progress)
    assert any("✓ local__read_file" in p for p in progress)
    assert said[-1][0] == "completed" and "It says hello." in said[-1][1]
