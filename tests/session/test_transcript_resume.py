"""A power cut mid-write never costs the messages written after the next resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.common.memory import Message, estimate_tokens
from agent.common.transcript import Transcript, load


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def session_with(tmp_path: Path, *messages: Message) -> Path:
    transcript = Transcript.create(tmp_path, {"model": "m"})
    for message in messages:
        transcript.append(message)
    transcript.close()
    return transcript.path


def chop(path: Path, count: int) -> None:
    """What a power cut leaves: the last `count` bytes never reached the disk."""
    data = path.read_bytes()
    path.write_bytes(data[:-count])


def resume_and_append(path: Path, *messages: Message) -> list[str]:
    loaded = load(path)
    for message in messages:
        loaded.transcript.append(message)
    loaded.transcript.close()
    return loaded.warnings


def contents(path: Path) -> list[str]:
    return [str(m["content"]) for m in load(path).messages]


@pytest.mark.parametrize("cut", [2, 10, 30])
def test_messages_appended_after_resuming_a_cut_file_survive_later_resumes(
    tmp_path: Path, cut: int
) -> None:
    path = session_with(tmp_path, user("first q"), user("first a"), user("lost in the cut"))
    chop(path, cut)
    warnings = resume_and_append(path, user("second q"), user("second a"))
    assert warnings == [f"{path.name}: last line is corrupted and was skipped"]
    assert resume_and_append(path, user("third q")) == []
    assert contents(path) == ["first q", "first a", "second q", "second a", "third q"]
    assert path.read_bytes().endswith(b"\n")


def test_a_whole_last_record_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = session_with(tmp_path, user("first q"), user("first a"))
    chop(path, 1)
    assert resume_and_append(path, user("second q")) == []
    assert load(path).warnings == []
    assert contents(path) == ["first q", "first a", "second q"]


def test_a_cut_longer_than_one_read_chunk_is_found_and_removed(tmp_path: Path) -> None:
    path = session_with(tmp_path, user("first q"), user("x" * 200_000))
    chop(path, 5)
    resume_and_append(path, user("second q"))
    assert contents(path) == ["first q", "second q"]
    assert load(path).warnings == []


def test_a_file_cut_inside_its_first_line_starts_again_cleanly(tmp_path: Path) -> None:
    path = session_with(tmp_path)
    chop(path, 3)
    resume_and_append(path, user("only"))
    assert contents(path) == ["only"] and load(path).warnings == []


def test_listing_sessions_never_changes_a_cut_file(tmp_path: Path) -> None:
    """Only a write repairs the tail: reading (or --resume without a turn) leaves it be."""
    path = session_with(tmp_path, user("first q"), user("first a"))
    chop(path, 4)
    before = path.read_bytes()
    load(path)
    assert path.read_bytes() == before


def test_a_line_that_is_json_but_not_a_record_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = session_with(tmp_path, user("first q"))
    with path.open("a") as fh:
        fh.write("123\n")
    loaded = load(path)
    assert [m["content"] for m in loaded.messages] == ["first q"]
    assert loaded.warnings == [f"{path.name}: last line is corrupted and was skipped"]


def test_resume_reads_from_the_end_only_what_a_request_can_carry(tmp_path: Path) -> None:
    """3,000 turns of ~1 KB: with a 20,000-token budget the loaded history is the newest
    turns within it, starting at a user message; a clear above them ends the reading."""
    transcript = Transcript.create(tmp_path, {})
    transcript.append({"role": "user", "content": "before the clear"})
    transcript.mark("clear")
    for n in range(3000):
        transcript.append({"role": "user", "content": f"question {n} " + "x" * 500})
        transcript.append({"role": "assistant", "content": f"answer {n} " + "y" * 500})
    transcript.close()
    loaded = load(transcript.path, max_tokens=20_000)
    contents = [m["content"].split(" ", 2)[:2] for m in loaded.messages]
    assert loaded.messages[0]["role"] == "user" and contents[-1] == ["answer", "2999"]
    assert 140 < len(loaded.messages) < 160  # ~20,000 tokens of ~130-token messages
    assert sum(estimate_tokens(m) for m in loaded.messages) <= 20_000 + 300
    everything = load(transcript.path, max_tokens=10**9)
    assert len(everything.messages) == 6000  # the clear: nothing above it comes back
    assert everything.messages[0]["content"].startswith("question 0 ")
