"""Trimming keeps every request valid; transcripts survive crashes and corrupt lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.common.errors import ConfigError
from agent.common.memory import Memory, estimate_tokens
from agent.common.transcript import Transcript, find_session, load, to_markdown


def turn(memory: Memory, n: int, size: int = 400, tools: int = 1) -> None:
    memory.add_user(f"request {n} " + "u" * size)
    memory.add_assistant(
        "",
        [
            {"id": f"c{n}_{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}}
            for i in range(tools)
        ],
    )
    for i in range(tools):
        memory.add_tool_result(f"c{n}_{i}", "r" * size)
    memory.add_assistant(f"answer {n}")


def assert_valid(messages: list[dict]) -> None:
    """Every tool message follows the assistant message that called it."""
    assert messages[0]["role"] == "system"
    open_calls: set[str] = set()
    for message in messages[1:]:
        if message["role"] == "assistant":
            open_calls = {c["id"] for c in message.get("tool_calls") or []}
        elif message["role"] == "tool":
            assert message["tool_call_id"] in open_calls
            open_calls.discard(message["tool_call_id"])
        else:
            open_calls = set()
    assert messages[1]["role"] == "user"


def test_everything_fits_when_budget_allows() -> None:
    memory = Memory()
    for n in range(3):
        turn(memory, n)
    assert memory.fit(100_000).messages[1:] == memory.messages


def test_trimming_drops_oldest_units_and_keeps_current_request() -> None:
    memory = Memory()
    for n in range(10):
        turn(memory, n)
    memory.add_user("the current request")
    out = memory.fit(800).messages
    assert_valid(out)
    assert out[-1]["content"] == "the current request"
    assert len(out) < len(memory.messages)


def test_current_request_kept_even_when_its_turn_is_huge() -> None:
    memory = Memory()
    turn(memory, 0)
    memory.add_user("do it")
    memory.add_assistant(
        "", [{"id": "x", "type": "function", "function": {"name": "t", "arguments": "{}"}}]
    )
    memory.add_tool_result("x", "z" * 50_000)
    out = memory.fit(2_000).messages
    assert_valid(out)
    assert out[1]["content"] == "do it" and out[-1]["tool_call_id"] == "x"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3)), min_size=1, max_size=12),
    st.integers(300, 20_000),
)
def test_trimming_always_yields_a_valid_conversation(
    turns: list[tuple[int, int]], budget: int
) -> None:
    memory = Memory()
    for n, (size, tools) in enumerate(turns):
        turn(memory, n, size, tools)
    out = memory.fit(budget).messages
    assert_valid(out)
    last_request = f"request {len(turns) - 1} "
    assert any((m.get("content") or "").startswith(last_request) for m in out)


def test_transcript_round_trip_and_corrupt_last_line(tmp_path: Path) -> None:
    transcript = Transcript.create(tmp_path, {"model": "m"})
    memory = Memory(sink=transcript.append)
    turn(memory, 1)
    transcript.close()
    with transcript.path.open("a") as fh:
        fh.write('{"type": "message", "message": {"role": "us')  # power cut mid-write
    loaded = load(find_session(tmp_path, "latest"))
    assert loaded.messages == memory.messages
    assert loaded.warnings == [f"{transcript.path.name}: last line is corrupted and was skipped"]
    assert transcript.path.stat().st_mode & 0o077 == 0


def test_clear_record_resets_loaded_memory(tmp_path: Path) -> None:
    transcript = Transcript.create(tmp_path, {})
    memory = Memory(sink=transcript.append)
    memory.add_user("old")
    transcript.mark("clear")
    memory.add_user("new")
    transcript.close()
    assert [m["content"] for m in load(transcript.path).messages] == ["new"]


def test_unknown_session_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no saved sessions"):
        find_session(tmp_path, "latest")
    transcript = Transcript.create(tmp_path, {})
    memory = Memory(sink=transcript.append)
    memory.add_user("plan the trip\nwith details")
    transcript.close()
    with pytest.raises(ConfigError, match="no session matches") as info:
        find_session(tmp_path, "zzz")
    assert f"latest: {transcript.path.stem} (plan the trip)" in str(info.value)


def test_markdown_export_has_every_part() -> None:
    memory = Memory()
    turn(memory, 7, size=3)
    text = to_markdown(memory.messages)
    assert "## You" in text and "request 7" in text and "**Tool call** `t`" in text
    assert "answer 7" in text and "rrr" in text


def test_token_estimate_is_monotonic() -> None:
    assert estimate_tokens("a" * 400) > estimate_tokens("a" * 40)
    assert estimate_tokens({"k": "v" * 100}) == len(json.dumps({"k": "v" * 100})) // 4 + 4
