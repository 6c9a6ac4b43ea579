"""The REPL in a real terminal (tmux), against the bundled server and the scripted model.

What a person does: start, /tools, ask something that runs a tool, refuse a write, Ctrl-C a
slow command, keep talking, /exit. The screen text is saved next to the test's temp files
and printed, so a failing run shows exactly what was on screen.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_llm import ScriptedLLM, Turn, text, tool_calls
from tests.support.servers import REPO_ROOT, SUPPORT
from tests.support.terminal import (
    PROMPT,
    Terminal,
    agent_env,
    needs_tmux,
    start,
    terminals,
    workspace,
)

__all__ = ["terminals", "workspace"]  # the shared fixtures
pytestmark = needs_tmux


def streamed_screen(
    terminals: list[Terminal], workspace: Path, name: str, answer: Turn, typed: str, last: str
) -> str:
    """Screen and scroll-back once the streamed answer's `last` line stands above a new
    prompt (the REPL then exits cleanly): what the tests count copies in."""
    with ScriptedLLM(answer) as llm:
        term = start(terminals, llm, workspace, name)
        term.type(typed)
        term.wait_for(last + r"[ ]*" + PROMPT, timeout=30)
        screen = term.save()
        term.leave()
    return screen


@pytest.mark.parametrize("term_type", ["xterm-256color", "dumb"])
def test_a_session_at_the_terminal(
    workspace: Path, terminals: list[Terminal], term_type: str
) -> None:
    script = [
        tool_calls(("local__read_file", {"path": "notes.txt"})),
        text("The code is **4711**."),
        tool_calls(("local__write_file", {"path": "pwned.txt", "content": "x"})),
        text("I did not write it."),
        tool_calls(("local__bash", {"command": "sleep 30"})),
        text("still here"),
    ]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, f"session-{term_type}", term=term_type)

        term.type("/tools")
        term.wait_for(r"local__write_file\s+Write a file\s+destructive")

        mark = term.mark()
        term.type("what is the launch code?")
        term.wait_for(r"▸ local › read_file \{\"path\": \"notes.txt\"\}", after=mark)
        term.wait_for(r"The code is 4711\.", after=mark)  # markdown rendered, not raw **
        term.wait_for(PROMPT, after=mark)

        mark = term.mark()
        term.type("write a file")
        term.wait_for(r"Run local › write_file .*\?\s+\[y\]es / \[n\]o / \[a\]lways", after=mark)
        term.type("n")
        term.wait_for(r"denied", after=mark)
        term.wait_for(r"I did not write it\.", after=mark)
        assert not (workspace / "pwned.txt").exists()

        mark = term.mark()
        term.type("run something slow")
        term.wait_for(r"Run local › bash", after=mark)
        term.type("y")
        term.wait_for(r"▸ local › bash", after=mark)
        term.send("C-c")
        waited = term.wait_for(r"cancelled" + PROMPT, after=mark, timeout=10)
        print(f"Ctrl-C -> prompt in {waited:.2f} s")

        mark = term.mark()
        term.type("are you there?")
        term.wait_for(r"still here", after=mark)
        term.wait_for(PROMPT, after=mark)
        term.leave()

        tool_results = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        assert "cancelled" in tool_results[-1]["content"]  # the cut-short call, recorded
        llm.assert_complete()
    history = workspace.parent / "state" / "history"
    entries = [line[1:] for line in history.read_text().splitlines() if line.startswith("+")]
    assert "what is the launch code?" in entries and "/tools" in entries
    assert "n" not in entries and "y" not in entries  # answers to questions are not prompts
    assert history.stat().st_mode & 0o777 == 0o600  # what people type stays private


def test_a_killed_session_resumes_with_every_completed_turn(
    workspace: Path, terminals: list[Terminal]
) -> None:
    with ScriptedLLM(
        tool_calls(("local__read_file", {"path": "notes.txt"})),
        text("first answer"),
        text("second answer"),
    ) as llm:
        term = start(terminals, llm, workspace, "killed")
        term.type("read the notes")
        term.wait_for(r"first answer")
        term.wait_for(PROMPT)
        pid = int(term._tmux("display-message", "-p", "#{pane_pid}").strip())
        # The pane runs `sh -c "env ... python run_mcp.py; echo $? > rc"`: kill the python child.
        os.kill(_child_pid(pid), signal.SIGKILL)
        assert term.exit_code() == 128 + signal.SIGKILL

        # By its ID: `--resume` alone at a terminal asks which (test_resume_by_folder.py).
        [session] = (workspace.parent / "state" / "sessions").glob("*.jsonl")
        resumed = start(terminals, llm, workspace, "resumed", "--resume", session.stem)
        assert re.search(r"resumed session \S+ \(4 messages\)", resumed.screen())
        resumed.type("and now?")
        resumed.wait_for(r"second answer")
        resumed.leave()

    roles = [m["role"] for m in llm.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    contents = [m.get("content") or "" for m in llm.requests[-1]["messages"]]
    assert "launch code 4711" in contents[3] and contents[4] == "first answer"


def _child_pid(pid: int) -> int:
    """The one child of the pane's shell (the agent), found through /proc."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(children[0]) if children else pid


def test_single_shot_on_a_terminal_renders_markdown(
    workspace: Path, terminals: list[Terminal]
) -> None:
    with ScriptedLLM(text("# Launch\n\nThe code is **4711**.")) as llm:
        terminal = Terminal(
            [sys.executable, str(REPO_ROOT / "run_mcp.py"), "-p", "code?"],
            cwd=workspace,
            env=agent_env(llm.base_url, workspace.parent / "state"),
            log=workspace.parent / "single-shot.screen.txt",
        )
        terminals.append(terminal)
        assert terminal.exit_code() == 0
    screen = terminal.screen()
    assert "The code is 4711." in screen and "**" not in screen and "# Launch" not in screen


def test_an_answer_taller_than_the_screen_streams_without_repeating(
    workspace: Path, terminals: list[Terminal]
) -> None:
    """A live region taller than the terminal cannot be redrawn: each refresh would leave
    another copy in the scroll-back. The tail streams; the whole answer is printed once."""
    answer = "\n\n".join(f"Paragraph {i}: the quick brown fox." for i in range(1, 81))
    turn = text(answer, chunk=8, pace=0.003)
    last = r"Paragraph 80: the quick brown fox\."
    screen = streamed_screen(
        terminals, workspace, "tall-answer", turn, "tell me a long story", last
    )
    for i in (1, 7, 40, 80):
        assert screen.count(f"Paragraph {i}:") == 1, screen


def test_ctrl_c_at_an_approval_question_cancels_the_turn(
    workspace: Path, terminals: list[Terminal]
) -> None:
    """Ctrl-C cancels what is in flight, a question included: the turn ends, the REPL stays."""
    script = [
        tool_calls(("local__write_file", {"path": "x.txt", "content": "x"})),
        text("back again"),
    ]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, "ctrl-c-question")
        mark = term.mark()
        term.type("write something")
        term.wait_for(r"Run local › write_file", after=mark)
        term.send("C-c")
        term.wait_for(r"cancelled" + PROMPT, after=mark, timeout=10)
        assert len(llm.requests) == 1  # the model was not asked to go on
        term.type("still there?")
        term.wait_for(r"back again", after=mark)
        term.leave()
    assert not (workspace / "x.txt").exists()


def test_an_answer_full_of_control_characters_streams_once(
    workspace: Path, terminals: list[Terminal]
) -> None:
    """Each control character is shown as a four-cell escape (`\\x07`); the live region
    must count the lines of what is shown, or every redraw leaves a copy behind."""
    noise = "\x07\x1b" * 20
    answer = "\n\n".join(f"Line {i} {noise} end of line {i}." for i in range(1, 16))
    turn = text(answer, chunk=16, pace=0.01)
    last = r"end of line 15\."
    screen = streamed_screen(terminals, workspace, "control-answer", turn, "make some noise", last)
    assert "\\x07\\x1b\\x07\\x1b" in screen  # shown, not executed (nor dropped)
    for i in (1, 8, 15):
        assert screen.count(f"end of line {i}.") == 1, screen


def test_a_padded_command_keeps_its_beginning_on_screen_at_approval(
    workspace: Path, terminals: list[Terminal]
) -> None:
    """20,000 spaces between `rm -rf` and its tail: both stay on screen with the question."""
    command = "rm -rf ~/nothing-here" + " " * 20_000 + "; echo done"
    script = [tool_calls(("local__bash", {"command": command})), text("not run")]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, "padded-approval")
        term.type("clean up")
        term.wait_for(r"Run local › bash \(arguments above\)\?")
        screen = term.visible()
        term.type("n")
        term.wait_for(r"not run")
        term.leave()
    assert "command: rm -rf ~/nothing-here⟨20,000 spaces⟩; echo done" in screen, screen


def test_keys_typed_during_a_turn_are_drawn_once(
    workspace: Path, terminals: list[Terminal]
) -> None:
    """Keys typed while a turn runs wait for the prompt, which draws them; the terminal does
    not echo them where the cursor is. The echo showed a typed line twice (in the answer and
    at the prompt), and moved the cursor under the live answer, whose redraw then left a
    copy of its first line behind (text typed, then Ctrl-C: the answer drawn twice)."""
    script = [
        text("Start of answer. " + "word " * 600, chunk=8, pace=0.05),  # 19 s: until Ctrl-C
        tool_calls(("local__bash", {"command": "sleep 3"})),
        text("slept"),
        text("got the typed line"),
    ]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, "typed-during-a-turn")
        term.type("first")
        term.wait_for(r"Start of answer\. word word")
        term.type("typed then cancelled", enter=False)
        term.send("C-c")
        term.wait_for(r"cancelled" + PROMPT, timeout=10)

        term.type("sleep please")
        term.wait_for(r"Run local › bash")
        term.type("y")
        term.wait_for(r"▸ local › bash")
        term.type("typed during the tool")  # the tool sleeps 3 s: the turn is still running
        term.wait_for(r"got the typed line[ ]*" + PROMPT)
        screen = term.save()
        term.leave()
    assert screen.count("Start of answer.") == 1, screen  # no copy left by the live answer
    assert "typed then cancelled" not in screen and "^C" not in screen, screen
    assert screen.count("typed during the tool") == 1, screen  # drawn by the prompt only
    assert "› typed during the tool" in screen, screen
    assert llm.requests[-1]["messages"][-1]["content"] == "typed during the tool"


def test_tab_and_enter_read_together_send_the_completed_line(
    workspace: Path, terminals: list[Terminal]
) -> None:
    """A Tab and an Enter that arrive in one read (fast typing, a busy machine): the line is
    completed before it is sent, so the command run is the one on screen (it was drawn
    `/help` and run as `/he`)."""
    with ScriptedLLM() as llm:
        term = start(terminals, llm, workspace, "tab-enter")
        term.send("/", "h", "e", "Tab", "Enter")  # one send-keys: one write to the terminal
        term.wait_for(r"/quit\s+leave|unknown command")
        screen = term.save()
        term.leave()
    assert "› /help" in screen and "unknown command" not in screen, screen


# ---------------------------------------------- the details, at 60x20 and 100x30 (issue 32)

SIZES = [pytest.param((60, 20), id="60x20"), pytest.param((100, 30), id="100x30")]


def servers_file(workspace: Path, **extra: Any) -> Path:
    """An mcpServers file with the bundled server as `local` (and `extra` servers), as a
    user who keeps one has it."""
    local = {"command": sys.executable, "args": ["-m", "agent.server", "--root", str(workspace)]}
    path = workspace.parent / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"local": local, **extra}}))
    path.chmod(0o600)
    return path


def broken_words(rows: list[str], words: list[str]) -> list[str]:
    """The `words` no screen row holds whole (the terminal broke them across rows)."""
    return [word for word in words if not any(word in row for row in rows)]


@pytest.mark.parametrize("size", SIZES)
def test_an_approval_typo_is_asked_again_in_whole_words(
    workspace: Path, terminals: list[Terminal], size: tuple[int, int]
) -> None:
    """`yse` is neither yes nor no: the question comes again with its choices; the
    question breaks between words; `always` says where /approve save writes."""
    script = [
        tool_calls(("local__write_file", {"path": "made.txt", "content": "hello"})),
        text("written"),
    ]
    config = servers_file(workspace)
    with ScriptedLLM(*script) as llm:
        term = start(
            terminals, llm, workspace, f"typo-{size[0]}", "--mcp-config", str(config), size=size
        )
        term.type("write the file")
        term.wait_for(r"\[a\]lways for this tool:")
        rows = term.rows()
        term.type("yse")
        term.wait_for(r"'yse' is not an answer: type y, n or a")
        term.wait_for(r"\[a\]lways for this tool \(Ctrl-C cancels the\s+turn\):")
        assert len(llm.requests) == 1  # nothing decided yet
        term.type("a")
        term.wait_for(r"written[ ]*" + PROMPT)
        screen = term.save()
        term.type("/approve save")
        term.wait_for(r"kept in\s+\S+approvals\.json")
        term.leave()
    assert (workspace / "made.txt").read_text() == "hello"
    words = ["write_file", '"made.txt",', '"content":', '"hello"}?', "[y]es", "[a]lways"]
    assert broken_words(rows, words) == [], "\n".join(rows)
    assert re.search(r"/approve save remembers it in\s+approvals\.json", screen), screen
    assert "keeps it in the config" not in screen


@pytest.mark.parametrize("size", SIZES)
def test_ctrl_c_at_an_empty_prompt_says_how_to_leave(
    workspace: Path, terminals: list[Terminal], size: tuple[int, int]
) -> None:
    with ScriptedLLM() as llm:
        term = start(terminals, llm, workspace, f"ctrl-c-prompt-{size[0]}", size=size)
        term.send("C-c")
        term.wait_for(r"\(Ctrl-D or /exit to quit\)" + PROMPT)
        term.send("C-d")
        assert term.exit_code() == 0


@pytest.mark.parametrize("size", SIZES)
def test_a_cancelled_call_shows_what_it_had_reported(
    workspace: Path, terminals: list[Terminal], size: tuple[int, int]
) -> None:
    """The live row showing a call's progress goes when Ctrl-C ends the turn; what the call
    reported stays on screen under it."""
    progress = {"command": sys.executable, "args": [str(SUPPORT / "progress_server.py")]}
    config = servers_file(workspace, progress=progress)
    script = [tool_calls(("progress__build", {"steps": 4})), text("unused")]
    with ScriptedLLM(*script) as llm:
        term = start(
            terminals,
            llm,
            workspace,
            f"cancelled-call-{size[0]}",
            "--mcp-config",
            str(config),
            ready="tools from 2 server",
            size=size,
        )
        mark = term.mark()
        term.type("build it")
        term.wait_for(r"compiled module 4", after=mark)  # in the live row
        term.send("C-c")
        term.wait_for(r"cancelled" + PROMPT, after=mark, timeout=10)
        screen = term.save()
        term.leave()
    shown = screen[mark:]
    assert re.search(r"⊘ cancelled progress › build after [\d.]+ s at 4/5", shown), shown
    for step in (2, 3, 4):
        assert f"    compiled module {step}" in shown, shown


@pytest.mark.parametrize("size", SIZES)
def test_a_tool_s_image_path_is_never_broken(
    workspace: Path, terminals: list[Terminal], size: tuple[int, int]
) -> None:
    images = {
        "command": sys.executable,
        "args": [str(SUPPORT / "image_server.py"), "--many", "1", "--many-kb", "1"],
    }
    config = servers_file(workspace, images=images)
    script = [tool_calls(("images__contact_sheet", {})), text("one picture")]
    with ScriptedLLM(*script) as llm:
        term = start(
            terminals,
            llm,
            workspace,
            f"image-path-{size[0]}",
            "--mcp-config",
            str(config),
            ready="tools from 2 server",
            size=size,
        )
        term.type("the album")
        term.wait_for(r"one picture[ ]*" + PROMPT)
        screen = term.save()
        term.leave()
    saved = sorted((workspace.parent / "state").rglob("*.png"))
    assert len(saved) == 1
    lines = [line.strip() for line in screen.splitlines()]  # capture -J: wrapped rows joined
    assert str(saved[0]) in lines or f"image saved: {saved[0]}" in lines, screen


@pytest.mark.parametrize("size", SIZES)
def test_an_answer_echoing_the_envelope_shows_no_tag(
    workspace: Path, terminals: list[Terminal], size: tuple[int, int]
) -> None:
    """A small model repeats a tool's output with the envelope's closing line: the tags
    are for the model; the person reads the words."""
    echoed = 'The notes say:\nlaunch code 4711\n</untrusted-data id="0badc0de">\nThat is all.'
    script = [tool_calls(("local__read_file", {"path": "notes.txt"})), text(echoed)]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, f"envelope-{size[0]}", size=size)
        term.type("read the notes")
        term.wait_for(r"That is all\.[ ]*" + PROMPT)
        screen = term.save()
        term.leave()
    assert "launch code 4711" in screen and "untrusted-data" not in screen, screen


@pytest.mark.parametrize("size", SIZES)
def test_a_folder_refused_by_a_server_offered_none_hints_at_roots(
    workspace: Path, terminals: list[Terminal], size: tuple[int, int]
) -> None:
    """A server that opens only files in the client's roots, offered none, fails: the
    hint says how to offer a folder; offered one, the same call reads the file."""
    roots = {"command": sys.executable, "args": [str(SUPPORT / "roots_server.py")]}
    config = servers_file(workspace, roots=roots)
    path = str(workspace / "notes.txt")
    script = [tool_calls(("roots__read_local", {"path": path})), text("could not")]
    with ScriptedLLM(*script) as llm:
        term = start(
            terminals,
            llm,
            workspace,
            f"roots-{size[0]}",
            "--mcp-config",
            str(config),
            ready="tools from 2 server",
            size=size,
        )
        term.type("read my notes")
        term.wait_for(r"could not[ ]*" + PROMPT)
        screen = term.save()
        term.leave()
    said = " ".join(screen.split())
    hint = (
        "hint: 'roots' is offered no folders (MCP roots) and its error reads as if it wants "
        'one (/servers shows what each server is offered): add "roots": ["/path/to/folder"] '
        "to its entry in"
    )
    assert hint in said, screen
    assert str(config) in screen.splitlines(), screen  # the path whole, on its own line

    roots["roots"] = [str(workspace)]
    config = servers_file(workspace, roots=roots)
    with ScriptedLLM(tool_calls(("roots__read_local", {"path": path})), text("read")) as llm:
        term = start(
            terminals,
            llm,
            workspace,
            f"roots-given-{size[0]}",
            "--mcp-config",
            str(config),
            ready="tools from 2 server",
            size=size,
        )
        term.type("read my notes")
        term.wait_for(r"read[ ]*" + PROMPT)
        screen = term.save()
        term.leave()
    assert "launch code 4711" in screen and "hint:" not in screen, screen


def test_a_cancelled_bundled_shell_command_shows_what_it_had_printed(
    workspace: Path, terminals: list[Terminal]
) -> None:
    """The bundled bash reports the lines it prints as progress, so a long command cut by
    Ctrl-C leaves its output so far on screen, not a bare `cancelled`."""
    command = "for i in 1 2 3; do echo built part $i; sleep 0.6; done; sleep 60"
    script = [tool_calls(("local__bash", {"command": command})), text("unused")]
    with ScriptedLLM(*script) as llm:
        term = start(
            terminals, llm, workspace, "cancelled-bash", "--yes", ready="tools from 1 server"
        )
        mark = term.mark()
        term.type("build it")
        term.wait_for(r"built part 3", after=mark)  # in the live row
        term.send("C-c")
        term.wait_for(r"cancelled" + PROMPT, after=mark, timeout=10)
        screen = term.save()
        term.leave()
    shown = screen[mark:]
    assert re.search(r"⊘ cancelled local › bash after [\d.]+ s", shown), shown
    assert "built part 3" in shown.split("⊘ cancelled")[-1], shown
