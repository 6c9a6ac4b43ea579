"""`--resume` and `/sessions` by folder (issue 32, item 1): a session belongs to the folder
it was started in, so `--resume` in one project never continues another's conversation.
Through `python run_mcp.py` with the scripted model, two project folders sharing one state
folder (as they share `~/.local/state/mcp-agent`), and a real terminal for the picker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.cli import RUN_MCP, cli_env
from tests.support.fake_llm import ScriptedLLM, text
from tests.support.terminal import PROMPT, Terminal, agent_env, needs_tmux, terminals

__all__ = ["terminals"]  # the shared fixture


def run_in(
    folder: Path, root: Path, llm: ScriptedLLM, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`run_mcp.py ARGS` started in `folder`, its state (and user config) in `root`."""
    return subprocess.run(
        [sys.executable, RUN_MCP, *args],
        cwd=folder,
        env=cli_env(root, llm.base_url, "sk-test"),
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
    )


def projects(tmp_path: Path) -> tuple[Path, Path, Path]:
    folders = tuple(tmp_path / name for name in ("alpha", "beta", "gamma"))
    for folder in folders:
        folder.mkdir()
    return folders  # type: ignore[return-value]


def user_lines(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def test_resume_continues_this_folder_s_latest_session_not_another_s(tmp_path: Path) -> None:
    """Also: with none in this folder it says how to reach the others; `--resume --all`
    continues the newest of any folder; `/sessions` lists this folder's, `--all` every one's
    (one run for each, sharing the sessions)."""
    alpha, beta, gamma = projects(tmp_path)
    script = [text("a1"), text("b1"), text("a2"), text("g1")]
    with ScriptedLLM(*script) as llm:
        assert run_in(alpha, tmp_path, llm, "-p", "alpha question").returncode == 0
        assert run_in(beta, tmp_path, llm, "-p", "beta question").returncode == 0
        again = run_in(alpha, tmp_path, llm, "-p", "and then?", "--resume")
        nothing = run_in(gamma, tmp_path, llm, "-p", "hi", "--resume")
        anywhere = run_in(gamma, tmp_path, llm, "-p", "and so?", "--resume", "--all")
        listed = run_in(alpha, tmp_path, llm, "-i", stdin="/sessions\n/sessions --all\n")
        llm.assert_complete()
    assert again.returncode == 0, again.stderr
    assert user_lines(llm.requests[2]) == ["alpha question", "and then?"]  # beta's came later
    assert nothing.returncode == 2
    assert "no saved session was started in this folder" in nothing.stderr
    assert "--resume --all" in nothing.stderr
    assert anywhere.returncode == 0, anywhere.stderr
    assert user_lines(llm.requests[3]) == ["beta question", "and so?"]  # the newest started
    assert listed.returncode == 0, listed.stderr
    shown = listed.stdout + listed.stderr
    here, _, every = shown.partition("continue one: run_mcp.py --resume ID")
    assert "alpha question" in here and "beta question" not in here and "(this one)" in here
    assert "alpha question" in every and "beta question" in every and str(beta) in every


def test_a_session_saved_before_folders_were_recorded_resumes_only_by_id(tmp_path: Path) -> None:
    """Older transcripts have no folder in their `meta` line: they belong to no folder, so
    a folder's `--resume` never picks them up; `--resume ID` and `--all` still reach them."""
    alpha, _, _ = projects(tmp_path)
    sessions = tmp_path / "state" / "sessions"
    sessions.mkdir(parents=True, mode=0o700)
    old = sessions / "20250101-120000-abcd.jsonl"
    records = [
        {"type": "meta", "created": 0, "model": "m", "servers": []},
        {"type": "message", "message": {"role": "user", "content": "old question"}},
        {"type": "message", "message": {"role": "assistant", "content": "old answer"}},
    ]
    old.write_text("".join(json.dumps(r) + "\n" for r in records))
    with ScriptedLLM(text("by id")) as llm:
        by_folder = run_in(alpha, tmp_path, llm, "-p", "x", "--resume")
        by_id = run_in(alpha, tmp_path, llm, "-p", "and then?", "--resume", "20250101")
        listed = run_in(alpha, tmp_path, llm, "-i", stdin="/sessions --all\n/sessions\n")
        llm.assert_complete()
    assert by_folder.returncode == 2 and "(1 saved)" in by_folder.stderr
    assert by_id.returncode == 0, by_id.stderr
    assert user_lines(llm.requests[0]) == ["old question", "and then?"]
    assert "20250101-120000-abcd" in listed.stdout + listed.stderr
    assert "(not recorded)" in listed.stdout + listed.stderr


@needs_tmux
def test_resume_at_a_terminal_lists_this_folder_s_sessions_to_pick_from(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    alpha, beta, _ = projects(tmp_path)
    with ScriptedLLM(text("a1"), text("a2"), text("b1"), text("picked")) as llm:
        for folder, request in ((alpha, "first alpha"), (alpha, "second alpha"), (beta, "beta")):
            run_in(folder, tmp_path, llm, "-p", request)
        env = agent_env(llm.base_url, tmp_path / "state")
        env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
        term = Terminal(
            [sys.executable, RUN_MCP, "--resume"],
            cwd=alpha,
            env=env,
            log=tmp_path / "picker.screen.txt",
            width=100,
            height=30,
        )
        terminals.append(term)
        term.wait_for(r"Resume which\? \[1-2, Enter: 1, n: a new session\]")
        screen = term.screen()
        assert "second alpha" in screen and "first alpha" in screen and "beta" not in screen
        term.type("7")  # a typo is asked again, not taken as an answer
        term.wait_for(r"'7' is not one of them")
        term.type("2")
        term.wait_for(r"resumed session \S+ \(2 messages\)")
        term.wait_for(PROMPT)
        term.type("and now?")
        term.wait_for(r"picked")
        term.leave()
        llm.assert_complete()
    assert user_lines(llm.requests[-1]) == ["first alpha", "and now?"]
