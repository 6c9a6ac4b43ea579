"""Tool search: too many tools for every request -> the model searches them with find_tools.

End to end: `run_mcp.py` against a real (hand-written) MCP server with 300 tools and the
scripted model server; the assertions read the requests the model received.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.common.memory import Memory
from agent.loop.events import RunFinished
from agent.loop.plan import UPDATE_PLAN
from agent.loop.react import Agent
from agent.loop.subagents import TASK
from agent.tools.registry import ToolRegistry
from agent.tools.search import FIND_TOOLS, SearchBudget, ToolIndex, ToolSearch, terms
from agent.tools.toolspec import ToolSpec
from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls, tool_messages
from tests.support.fake_model import FakeModel, FakeTools, answer, calls
from tests.support.repl import drive
from tests.support.servers import SUPPORT, settings_for, stdio

MANY_SERVER = str(SUPPORT / "many_tools_server.py")
KLINGON = "many__translate_klingon"

OWN = {UPDATE_PLAN, TASK}  # the agent's own tools offered in the default 128,000-token window


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request["tools"]]


def many_args(count: int, page: int | None = None) -> list[str]:
    command = " ".join([sys.executable, MANY_SERVER, str(count), *([str(page)] if page else [])])
    return ["--server-command", command, "--server-name", "many"]


# -- ranking ----------------------------------------------------------------------------------


def spec(name: str, description: str, title: str | None = None, server: str = "s") -> ToolSpec:
    return ToolSpec(server, name, description, {"type": "object"}, title=title)


def test_terms_split_cases_and_drop_plurals() -> None:
    assert terms("listPullRequests") == ["list", "pull", "request"]
    assert terms("get-HTTPServer_status") == ["get", "http", "server", "statu"]
    assert terms("Categories of issues") == ["category", "of", "issue"]


def test_ranking_prefers_name_over_description_and_finds_the_rare_word() -> None:
    tools = {
        "gh__create_issue": spec("create_issue", "Open a new issue in a repository."),
        "gh__list_issues": spec("list_issues", "List issues of a repository."),
        "gh__comment": spec("comment", "Comment on an issue or a pull request."),
        "fs__read_file": spec("read_file", "Read a file.", server="fs"),
        "tr__klingon": spec("speak", "Say it in Klingon.", title="Klingon voice", server="tr"),
    }
    index = ToolIndex(tools)
    assert index.search("create issue", 3)[0] == "gh__create_issue"
    assert index.search("issues", 5)[:2] == ["gh__list_issues", "gh__create_issue"]
    assert index.search("klingon", 5) == ["tr__klingon"]
    assert index.search("unrelated words", 5) == []
    assert len(index.search("issue", 1)) == 1


def test_look_alike_tools_of_one_server_cannot_hide_another_servers_best_match() -> None:
    """A server adding eleven `create_issue*` tools (their descriptions stuffed with the
    words) would fill the default ten results on score alone."""
    stuffed = "Create issue: create a new issue, create issues, issue creation."
    tools = {
        f"evil__create_issue_{i}": spec(f"create_issue_{i}", stuffed, server="evil")
        for i in range(11)
    }
    tools["gh__create_issue"] = spec("create_issue", "Open a new issue in a repository.")
    tools["gh__list_issues"] = spec("list_issues", "List issues of a repository.")
    tools["fs__read_file"] = spec("read_file", "Read a file.", server="fs")
    index = ToolIndex(tools)
    hits = index.search("create issue", 10)
    assert set(hits[:2]) == {"evil__create_issue_0", "gh__create_issue"}  # each best first
    assert "gh__list_issues" in hits[2:4]  # then each server's second
    assert len(hits) == 10 and "fs__read_file" not in hits  # no match, no place
    found = ToolSearch(SearchBudget()).find(tools, {"query": "create issue", "limit": 3})
    assert "gh__create_issue" in found.text


# -- the loop ---------------------------------------------------------------------------------


async def called(arguments: dict[str, Any]) -> str:
    return f"ran with {json.dumps(arguments)}"


def big_toolbox(count: int) -> FakeTools:
    functions = {f"t{i:03d}": called for i in range(count - 1)} | {"weather_now": called}
    tools = FakeTools(functions)
    tools.tools["weather_now"] = spec("weather_now", "Current weather for a city.", server="fake")
    return tools


def search(**budget: Any) -> ToolSearch:
    return ToolSearch(SearchBudget(**budget))


@pytest.mark.anyio
async def test_found_tool_is_offered_from_the_next_request_on() -> None:
    tools = big_toolbox(100)
    model = FakeModel(
        [
            calls((FIND_TOOLS, {"query": "weather"})),
            calls(("weather_now", {"city": "Oslo"})),
            answer("sunny"),
            answer("again"),
        ]
    )
    agent = Agent(model, tools, Memory(), tool_search=search())
    with anyio.fail_after(10):
        events = [e async for e in agent.run("weather in Oslo?")]
        [e async for e in agent.run("and now?")]
    first, second, third, fourth = ([t["function"]["name"] for t in ts] for ts in model.tools_seen)
    assert first == [FIND_TOOLS, "terminate"]
    assert second == ["weather_now", FIND_TOOLS, "terminate"]
    assert third == second and fourth == second  # kept for the session
    found = model.requests[1][-1]["content"]
    assert "weather_now" in found and "Current weather for a city." in found
    assert tools.calls == [("weather_now", {"city": "Oslo"})]
    done = events[-1]
    assert isinstance(done, RunFinished) and done.answer == "sunny"
    model.assert_complete()


@pytest.mark.anyio
async def test_below_the_budget_nothing_changes() -> None:
    tools = big_toolbox(20)
    model = FakeModel([answer("ok")])
    agent = Agent(model, tools, Memory(), tool_search=search())
    with anyio.fail_after(10):
        [e async for e in agent.run("hi")]
    assert model.tools_seen[0] == [*tools.openai_tools(), model.tools_seen[0][-1]]
    assert FIND_TOOLS not in [t["function"]["name"] for t in model.tools_seen[0]]


@pytest.mark.anyio
async def test_pinned_and_used_tools_are_offered_and_budget_is_configurable() -> None:
    tools = big_toolbox(30)  # under the default 64, over a budget of 10
    memory = Memory()
    memory.add_user("earlier")
    memory.add_assistant("", [{"id": "c1", "type": "function", "function": {"name": "t007"}}])
    memory.add_tool_result("c1", "done")
    model = FakeModel([calls(("t002", {})), answer("ok")])
    agent = Agent(model, tools, memory, tool_search=search(max_tools=10, pinned=("t00[12]",)))
    with anyio.fail_after(10):
        [e async for e in agent.run("hi")]
    first, second = ([t["function"]["name"] for t in ts] for ts in model.tools_seen)
    assert first == ["t001", "t002", "t007", FIND_TOOLS, "terminate"]
    assert second == first
    assert tools.calls == [("t002", {})]


@pytest.mark.anyio
async def test_token_budget_and_forced_modes() -> None:
    tools = big_toolbox(5)
    for budget, engaged in (
        ({"max_tokens": 10}, True),
        ({"mode": "on"}, True),
        ({"mode": "off", "max_tools": 1}, False),
    ):
        model = FakeModel([answer("ok")])
        agent = Agent(model, tools, Memory(), tool_search=search(**budget))
        with anyio.fail_after(10):
            [e async for e in agent.run("hi")]
        names = [t["function"]["name"] for t in model.tools_seen[0]]
        assert (FIND_TOOLS in names) is engaged, budget
        assert (len(names) == 2) is engaged, budget


@pytest.mark.anyio
async def test_find_tools_refuses_bad_arguments_as_an_observation() -> None:
    model = FakeModel(
        [calls((FIND_TOOLS, {"limit": 3}), (FIND_TOOLS, {"query": "x", "limit": 0})), answer("k")]
    )
    agent = Agent(model, big_toolbox(100), Memory(), tool_search=search())
    with anyio.fail_after(10):
        [e async for e in agent.run("hi")]
    results = [m["content"] for m in model.requests[1] if m["role"] == "tool"]
    assert "non-empty string `query`" in results[0]
    assert "positive integer" in results[1]


@pytest.mark.anyio
async def test_slash_tools_still_lists_every_tool(tmp_path: Path) -> None:
    server = stdio("many", (sys.executable, [MANY_SERVER, "300"]))
    model = FakeModel([answer("hello")])
    async with ToolRegistry(settings_for(tmp_path, server)) as registry:
        assert await registry.connect_all() == []
        out, _ = await drive(registry, model, ["hi", "/tools"], tmp_path, tool_search=search())
    assert [t["function"]["name"] for t in model.tools_seen[0]] == [FIND_TOOLS, "terminate"]
    assert KLINGON in out and "many__get_issue" in out and "many__sync_customer" in out


# -- end to end: run_mcp.py, a real server with 300 tools, the scripted model -----------------


def test_300_tools_are_searched_found_and_called(tmp_path: Path) -> None:
    script = [
        tool_calls((FIND_TOOLS, {"query": "klingon", "limit": 3})),
        tool_calls((KLINGON, {"text": "hello"})),
        text("nuqneH"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            [*many_args(300, page=100), "-p", "say hello in klingon", "-y"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "nuqneH\n"
    first, second, third = llm.requests
    assert set(tool_names(first)) == {*OWN, FIND_TOOLS, "terminate"}  # not the 300
    find = next(t for t in first["tools"] if t["function"]["name"] == FIND_TOOLS)
    assert "many (300)" in find["function"]["description"]
    found = tool_messages(second)[0]
    assert f"- {KLINGON} (server 'many', tool 'translate_klingon')" in found
    assert KLINGON in tool_names(second)
    offered = next(t for t in second["tools"] if t["function"]["name"] == KLINGON)
    assert offered["function"]["parameters"]["required"] == ["text"]  # the full schema
    assert 'called translate_klingon with {"text": "hello"}' in tool_messages(third)[1]
    assert tool_names(third) == tool_names(second)
    assert "warning" not in proc.stderr  # 300 tools, and no "too many tools" warning
    llm.assert_complete()


def test_pinned_tools_from_config_and_search_off(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[agent]\npinned_tools = ["many__get_*"]\n')
    off = tmp_path / "off.toml"
    off.write_text('[agent]\ntool_search = "off"\n')
    with ScriptedLLM(text("one"), text("two")) as llm:
        pinned = run_cli(
            [*many_args(300), "--config", str(config), "-p", "hi"], tmp_path, base_url=llm.base_url
        )
        plain = run_cli(
            [*many_args(300), "--config", str(off), "-p", "hi"], tmp_path, base_url=llm.base_url
        )
    assert pinned.returncode == 0 and plain.returncode == 0, pinned.stderr + plain.stderr
    names = tool_names(llm.requests[0])
    served = [n for n in names if n.startswith("many__")]
    assert len(served) == 30 and all(n.startswith("many__get_") for n in served)
    assert set(names) - set(served) == {*OWN, FIND_TOOLS, "terminate"}
    assert len(tool_names(llm.requests[1])) == 300 + len(OWN) + 1  # off: every tool, as before
    assert "300 tools in all" in plain.stderr
    llm.assert_complete()


def test_small_tool_sets_are_unchanged(tmp_path: Path) -> None:
    with ScriptedLLM(text("ok")) as llm:
        proc = run_cli([*many_args(20), "-p", "hi"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    names = tool_names(llm.requests[0])
    assert len(names) == 20 + len(OWN) + 1 and FIND_TOOLS not in names
    assert names[-1] == "terminate"


def test_a_tool_list_over_4k_tokens_is_offered_whole_in_a_16k_window(tmp_path: Path) -> None:
    """Issue 33 #5: a 32-tool list estimated at 4,638 tokens was hidden from a 16k window
    behind find_tools by a fixed 4,096 cap; the small-set cap scales with the window."""
    config = tmp_path / "config.toml"
    config.write_text("[llm]\ncontext_window = 16384\n")
    with ScriptedLLM(text("ok")) as llm:
        args = [*many_args(50), "--config", str(config), "-p", "hi"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    names = tool_names(llm.requests[0])
    assert 4096 < len(json.dumps(llm.requests[0]["tools"])) // 4 < 16384 * 0.3
    assert len(names) == 51 and FIND_TOOLS not in names


def test_a_small_tool_set_is_offered_whole_in_a_16k_window(tmp_path: Path) -> None:
    # 30 tools, ~2,700 tokens (server-filesystem's size): over 10% of a 16,384-token window,
    # yet it fits comfortably, so the model gets every tool and no find_tools.
    config = tmp_path / "config.toml"
    config.write_text("[llm]\ncontext_window = 16384\n")
    with ScriptedLLM(text("ok")) as llm:
        args = [*many_args(30), "--config", str(config), "-p", "hi"]
        proc = run_cli(args, tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    names = tool_names(llm.requests[0])
    assert 1638 < len(json.dumps(llm.requests[0]["tools"])) // 4 < 4096
    assert len(names) == 31 and FIND_TOOLS not in names
