"""Text we do not control can never drive the user's terminal or show a secret.

Tool output, server text and model errors reach the screen through SafeConsole (escape
sequences shown as `\\x1b`, never executed) and the renderer's redactor (secrets masked).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from agent.common.redact import MASK, Redactor
from agent.loop.events import (
    AssistantMessage,
    RunFinished,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from agent.ui.render import EventRenderer
from agent.ui.safe import SafeConsole, clean
from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, error, text, tool_calls

ESCAPES = "\x1b[31mRED\x1b[0m \x1b[2J \x1b]0;PWNED\x07 \u202eevil"
KEY = "sk-test-terminal-0123456789"


def test_clean_shows_control_characters_and_keeps_lines() -> None:
    assert clean("a\tb\nc") == "a\tb\nc"
    assert clean("x\r\ny") == "x\ny"
    assert clean("\x1b[31mred") == "\\x1b[31mred"
    assert clean("\x9b2J \u202e") == "\\x9b2J \\u202e"


def test_tool_output_escapes_are_shown_not_executed_on_a_color_terminal() -> None:
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=100)
    renderer = EventRenderer(console, stream_answer=True)
    output = f"[bold red]x[/] {ESCAPES}"
    renderer.handle(ToolCallFinished("c1", "s__t", "s", "t", {}, output, False, 3.0))
    screen = out.getvalue()
    assert "\x1b[31mRED" not in screen and "\x1b]0;" not in screen and "\x1b[2J" not in screen
    assert "\\x1b[31mRED\\x1b[0m \\x1b[2J \\x1b]0;PWNED" in screen
    assert "\\u202eevil" in screen
    assert "[bold red]x[/]" in screen  # markup stays literal
    assert "\x1b[" in screen  # rich's own colours still work


def test_errors_and_tool_output_on_the_trace_are_redacted() -> None:
    out = io.StringIO()
    redact = Redactor.of([KEY])
    renderer = EventRenderer(SafeConsole(file=out, width=200), stream_answer=False, redact=redact)
    renderer.handle(ToolCallStarted("c1", "s__t", "s", "t", {"token": KEY}))
    renderer.handle(ToolCallFinished("c1", "s__t", "s", "t", {}, f"key={KEY}", False, 1.0))
    renderer.handle(RunFinished("error", None, 1, Usage(), f"HTTP 400: bad key {KEY}"))
    screen = out.getvalue()
    assert KEY not in screen
    assert screen.count(MASK) == 3


@pytest.mark.parametrize("output", ["text", "json"])
def test_a_model_error_quoting_the_api_key_is_masked_on_stderr(tmp_path: Path, output: str) -> None:
    with ScriptedLLM(error(400, f"bad request for key {KEY}")) as llm:
        done = run_cli(
            ["-p", "hi", "--output", output], tmp_path, base_url=llm.base_url, api_key=KEY
        )
    assert done.returncode == 1
    assert KEY not in done.stderr and KEY not in done.stdout
    assert "bad request for key" in done.stderr
    if output == "json":
        assert MASK in json.loads(done.stdout)["error"]


def test_escape_sequences_from_a_tool_stay_inert_in_the_single_shot_trace(tmp_path: Path) -> None:
    command = r"printf '\033[31mRED\033[0m \033]0;PWNED\007 done\n'"
    script = [tool_calls(("local__bash", {"command": command})), text("finished")]
    with ScriptedLLM(*script) as llm:
        done = run_cli(["-p", "colour me", "--yes"], tmp_path, base_url=llm.base_url, api_key=KEY)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "finished\n"
    assert "\x1b" not in done.stderr
    assert "\\x1b[31mRED\\x1b[0m" in done.stderr


HIDDEN = "ok\u200b\U000e0049\U000e0047\U000e004e done"  # a zero-width space and tag characters
TRICKY_ANSWER = (
    "Title \x1b]0;PWNED\x07 \x9b2J \u202eevil \u2066x\u2069 "
    + HIDDEN
    + "\n\nSee [https://docs.example](https://evil.example/steal) for more.\n"
)


def test_invisible_characters_are_shown_and_joiners_inside_emoji_and_scripts_kept() -> None:
    assert clean(HIDDEN) == "ok\\u200b\\U000e0049\\U000e0047\\U000e004e done"
    assert clean("a\u2060b\ufeffc\u00add\ufe01") == "a\\u2060b\\ufeffc\\xadd\\ufe01"
    family, conjunct = "👨\u200d👩\u200d👧", "क्\u200dष"
    assert clean(family) == family and clean(conjunct) == conjunct and clean("❤️") == "❤️"
    assert clean("pay\u200dpal \u200c\u200c") == "pay\\u200dpal \\u200c\\u200c"


def test_single_shot_answer_into_a_pipe_shows_escapes_and_hidden_characters(
    tmp_path: Path,
) -> None:
    with ScriptedLLM(text(TRICKY_ANSWER)) as llm:
        done = run_cli(["-p", "hi"], tmp_path, base_url=llm.base_url, api_key=KEY)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert not any(ch in out for ch in "\x1b\x07\x9b\u202e\u2066\u200b\U000e0049"), repr(out)
    assert "Title \\x1b]0;PWNED\\x07 \\x9b2J \\u202eevil \\u2066x\\u2069" in out
    assert "ok\\u200b\\U000e0049\\U000e0047\\U000e004e done" in out


def test_a_single_shot_answer_echoing_the_envelope_is_written_without_its_tags(
    tmp_path: Path,
) -> None:
    """A small model repeats a tool's result with the envelope's tags: the person reading
    `-p`'s answer (here in a pipe) gets the words; `--output json` keeps the answer as is."""
    echoed = (
        '<untrusted-data server="local" id="0badc0de">\nlaunch code 4711\n'
        '</untrusted-data id="0badc0de">\nThat is all.'
    )
    with ScriptedLLM(text(echoed)) as llm:
        done = run_cli(["-p", "hi"], tmp_path, base_url=llm.base_url, api_key=KEY)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "launch code 4711\nThat is all.\n", repr(done.stdout)
    with ScriptedLLM(text(echoed)) as llm:
        raw = run_cli(["-p", "hi", "--output", "json"], tmp_path, base_url=llm.base_url)
    assert json.loads(raw.stdout)["answer"] == echoed  # data for programs: unchanged


def test_json_output_escapes_c1_bidi_and_invisible_characters(tmp_path: Path) -> None:
    with ScriptedLLM(text(TRICKY_ANSWER)) as llm:
        done = run_cli(
            ["-p", "hi", "--output", "json"], tmp_path, base_url=llm.base_url, api_key=KEY
        )
    assert done.returncode == 0, done.stderr
    assert not any(ch in done.stdout for ch in "\x1b\x07\x9b\u202e\u200b\U000e0049")
    assert "\\u009b" in done.stdout and "\\udb40\\udc49" in done.stdout  # a tag, as a pair
    assert json.loads(done.stdout)["answer"] == TRICKY_ANSWER  # the same text, read back


@pytest.mark.parametrize("stream", [True, False])
def test_rendered_answer_shows_link_targets_and_hidden_characters(stream: bool) -> None:
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=100)
    renderer = EventRenderer(console, stream_answer=True)
    if stream:
        renderer.handle(TextDelta(TRICKY_ANSWER))
        renderer.handle(AssistantMessage(TRICKY_ANSWER, ()))
    else:  # an answer given through `terminate`
        renderer.handle(RunFinished("answered", TRICKY_ANSWER, 1, Usage()))
    screen = out.getvalue()
    words = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)  # without rich's colours
    assert "https://docs.example (https://evil.example/steal)" in words
    assert "\x1b]8;" not in screen  # no terminal hyperlink hiding its target
    assert "\x1b]0;" not in screen and "\\x1b]0;PWNED\\x07" in screen
    assert "ok\\u200b\\U000e0049" in screen and "\u200b" not in screen


def test_a_fatal_error_quoting_hostile_text_shows_its_escapes(tmp_path: Path) -> None:
    config = {"mcpServers": {"\x1b]0;PWNED\x07\u202e": {"type": "bogus"}}}
    (tmp_path / "mcp.json").write_text(json.dumps(config))
    args = ["--mcp-config", str(tmp_path / "mcp.json"), "-p", "hi"]
    done = run_cli(args, tmp_path, base_url=None, api_key=KEY)
    assert done.returncode == 2
    assert "\x1b" not in done.stderr and "\u202e" not in done.stderr
    assert "\\x1b]0;PWNED\\x07\\u202e" in done.stderr
