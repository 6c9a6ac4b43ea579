"""The REPL driven headless: prompt-toolkit pipe input, a rich console on a StringIO."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from agent.common.transcript import load
from agent.config.settings import ServerConfig, Settings
from agent.loop.approval import ApprovalPolicy
from agent.tools.registry import ToolRegistry
from agent.ui.input import ReplCompleter
from tests.support.fake_model import FakeModel, answer, calls
from tests.support.repl import drive
from tests.support.servers import time_server_command

pytestmark = pytest.mark.anyio


@pytest.fixture
def registry_settings(tmp_path: Path) -> Settings:
    command, args = time_server_command()
    return Settings(
        servers=(ServerConfig(name="time", type="stdio", command=command, args=tuple(args)),),
        state_dir=tmp_path,
    )


@pytest.fixture
def registry_options() -> dict[str, Any]:
    return {"reserved_names": {"terminate"}}


async def test_commands_and_a_turn_that_runs_a_tool(registry: ToolRegistry, tmp_path: Path) -> None:
    model = FakeModel(
        [
            calls(("time__get_current_time", {"timezone": "Asia/Tokyo"})),
            answer("It is **late** in Tokyo."),
        ]
    )
    text, repl = await drive(
        registry,
        model,
        [
            "/help",
            "/tools",
            "/servers",
            "/tolls",
            "what time is it in Tokyo?",
            "/usage",
            "/exit",
        ],
        tmp_path,
    )
    assert "/servers" in text and "server status table" in text  # /help
    assert "time__get_current_time" in text and "read-only" in text  # /tools
    assert "ready" in text and "stdio" in text  # /servers
    assert "unknown command /tolls — did you mean /tools?" in text
    assert "time › get_current_time" in text and "Asia/Tokyo" in text  # tool trace
    assert "It is late in Tokyo." in text  # markdown rendered
    # /usage: prompt, cached, completion, total and cost of this turn (and the session)
    assert re.search(r"last turn\s+20\s+0\s+10\s+30\s+unknown", text)
    assert re.search(r"session\s+20\s+0\s+10\s+30\s+unknown", text)
    model.assert_complete()
    assert "+09:00" in [m for m in model.requests[1] if m["role"] == "tool"][0]["content"]


async def test_second_turn_sees_first_turn_tool_result(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    model = FakeModel(
        [
            calls(("time__get_current_time", {"timezone": "Europe/Paris"})),
            answer("Paris time given."),
            answer("Still remembered."),
        ]
    )
    _, repl = await drive(registry, model, ["time in Paris?", "and again?"], tmp_path)
    second_request = model.requests[-1]
    assert any(
        "Europe/Paris" in (m.get("content") or "") for m in second_request if m["role"] == "tool"
    )
    saved = load(repl.transcript.path).messages  # type: ignore[union-attr]
    assert saved == repl.agent.memory.messages


async def test_approval_answered_no_is_an_observation(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    # get_current_time is read-only; pretend it is not, to exercise the prompt.
    for name, spec in list(registry.tools.items()):
        registry.tools[name] = spec.__class__(**{**spec.__dict__, "read_only": False})
    model = FakeModel([calls(("time__get_current_time", {"timezone": "UTC"})), answer("ok")])
    policy = ApprovalPolicy(mode="ask")
    text, _ = await drive(registry, model, ["time?", "n"], tmp_path, approval=policy)
    tool_msg = [m for m in model.requests[1] if m["role"] == "tool"][0]["content"]
    assert "declined" in tool_msg and "denied" in text


async def test_always_is_remembered_and_shown(registry: ToolRegistry, tmp_path: Path) -> None:
    for name, spec in list(registry.tools.items()):
        registry.tools[name] = spec.__class__(**{**spec.__dict__, "read_only": False})
    model = FakeModel(
        [
            calls(("time__get_current_time", {})),
            answer("one"),
            calls(("time__get_current_time", {})),
            answer("two"),
        ]
    )
    policy = ApprovalPolicy(mode="ask")
    text, _ = await drive(registry, model, ["t1", "a", "t2", "/approve"], tmp_path, approval=policy)
    assert "always allowed: time › get_current_time" in text
    assert policy.always == {("time", "get_current_time")}


async def test_completion_of_commands_and_servers(registry: ToolRegistry, tmp_path: Path) -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    _, repl = await drive(registry, FakeModel([]), [], tmp_path)
    completer = ReplCompleter(repl)

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]

    assert complete("/se") == ["/servers", "/sessions"]
    assert complete("/ses") == ["/sessions"]
    assert sorted(complete("/tools ti")) == ["time", "time__convert_time", "time__get_current_time"]
    assert complete("/tools time__g") == ["time__get_current_time"]
    assert complete("/approve y") == ["yes"]
    assert complete("hello") == []


COMMANDS = [
    "help",
    "tools",
    "servers",
    "sandbox",
    "tasks",
    "resources",
    "prompts",
    "prompt",
    "skills",
    "skill",
    "model",
    "clear",
    "compact",
    "history",
    "usage",
    "hooks",
    "approve",
    "save",
    "sessions",
    "undo",
    "redo",
    "memory",
    "init",
    "login",
    "apps",
    "app",
    "logout",
    "exit",
    "quit",
]


async def test_help_lists_every_command_once_in_the_table_order(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    text, repl = await drive(registry, FakeModel([]), ["/help"], tmp_path)
    assert list(repl.commands) == list(COMMANDS)
    shown = re.findall(r"^\s*/(\w+)\s", text, flags=re.MULTILINE)
    assert shown == list(COMMANDS), text


async def test_each_command_completes_its_own_argument_words(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """Servers for the commands that take one; tools (public and own names) and servers for
    /tools; the modes for /approve; nothing for the rest (the time server has no prompts)."""
    _, repl = await drive(registry, FakeModel([]), [], tmp_path)
    tools = ["time", "time__get_current_time", "time__convert_time"]
    expected = {
        "tools": [*tools, "get_current_time", "convert_time"],
        "approve": ["ask", "yes", "read-only", "save"],
        "sessions": ["--all"],
        **{name: ["time"] for name in ("servers", "resources", "prompts", "login", "logout")},
    }
    words = {name: repl.argument_words(name) for name in COMMANDS}
    assert {n: sorted(w) for n, w in words.items() if w} == {
        n: sorted(w) for n, w in expected.items()
    }
    assert repl.argument_words("nope") == []


async def test_multiline_input_by_backslash_and_escape_enter(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    model = FakeModel([answer("got three lines")])
    await drive(registry, model, ["first line\\\rsecond\x1b\rthird"], tmp_path)
    assert model.requests[0][-1] == {"role": "user", "content": "first line\nsecond\nthird"}


async def test_tools_detail_shows_the_schema(registry: ToolRegistry, tmp_path: Path) -> None:
    text, _ = await drive(
        registry, FakeModel([]), ["/tools time__convert_time", "/tools nope"], tmp_path
    )
    assert "time › convert_time" in text and '"source_timezone"' in text
    assert "no server or tool named 'nope'" in text


async def test_clear_forgets_and_is_recorded(registry: ToolRegistry, tmp_path: Path) -> None:
    model = FakeModel([answer("first"), answer("second")])
    _, repl = await drive(registry, model, ["one", "/clear", "two"], tmp_path)
    assert [m["role"] for m in model.requests[-1]] == ["system", "user"]
    assert [m["content"] for m in load(repl.transcript.path).messages] == ["two", "second"]  # type: ignore[union-attr]


async def test_padded_arguments_show_their_beginning_and_end_and_what_is_hidden(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    """A command padded with 20,000 spaces must hide neither its start (it scrolled away
    above the question) nor its tail; a long value says how much of it is not shown."""
    for name, spec in list(registry.tools.items()):  # make it ask (see above)
        registry.tools[name] = spec.__class__(**{**spec.__dict__, "read_only": False})
    sneaky = {
        "timezone": "rm -rf ~/important" + " " * 20_000 + "; touch PWNED",
        "note": "N" * 5_000,
        "key": "sk-proj-abcdefgh12345678",
    }
    model = FakeModel([calls(("time__get_current_time", sneaky)), answer("not run")])
    policy = ApprovalPolicy(mode="ask")
    text, _ = await drive(registry, model, ["time?", "n"], tmp_path, approval=policy)
    asked = text[text.index("timezone: ") : text.index("▸ time › get_current_time")]
    assert "timezone: rm -rf ~/important⟨20,000 spaces⟩; touch PWNED" in asked
    assert (
        "… 4,000 more characters …" in asked and asked.count("N") == 1 + 800 + 200
    )  # PWNED, head, tail
    assert "sk-proj-abcdefgh12345678" not in asked and "[REDACTED]" in asked
    assert len(asked) < 2_000  # the question and the command's start fit on one screen
    assert "declined to run" in model.requests[-1][-1]["content"]


async def test_a_renamed_tool_is_listed_and_found_by_its_servers_own_name(
    tmp_path: Path,
) -> None:
    """`time.srv` makes public names the model's API can take only renamed: /tools shows
    the server's own name beside each, and `/tools get_current_time` finds the tool."""
    command, args = time_server_command()
    server = ServerConfig(name="time.srv", type="stdio", command=command, args=tuple(args))
    settings = Settings(servers=(server,), state_dir=tmp_path)
    async with ToolRegistry(settings, reserved_names={"terminate"}) as renamed:
        assert await renamed.connect_all() == []
        [public] = [p for p, s in renamed.tools.items() if s.name == "get_current_time"]
        assert public != "time.srv__get_current_time"
        text, _ = await drive(
            renamed, FakeModel([]), ["/tools", "/tools get_current_time"], tmp_path
        )
    assert re.search(rf"{public}\s+get_current_time\s", text)  # both names, one row
    assert f"{public}  (time.srv › get_current_time)" in text  # the tool in full
    assert "hints: read-only, idempotent, closed world; runs without asking" in text


async def test_piped_lines_are_turns_and_a_trailing_backslash_joins_the_next() -> None:
    from agent.ui.input import PipedLines

    lines = PipedLines(io.StringIO("first\r\nsecond \\\nthird\nlast\\\n"))
    assert [await lines.prompt_async("› ") for _ in range(3)] == [
        "first",
        "second \nthird",
        "last",  # the input ended inside a continuation: what there is is the turn
    ]
    with pytest.raises(EOFError):
        await lines.prompt_async()
