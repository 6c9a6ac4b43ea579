"""/undo and /redo in a real terminal (tmux), as a person uses them.

Turns change files through the bundled server's write_file and bash and through a
third-party stdio server; /undo takes them back one turn at a time, /redo puts them back,
the user's own `.git` is never written, a file changed outside the agent is not
overwritten without asking, a resumed session keeps its checkpoints, and what a remote
server did is said to be beyond undo.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import REPO_ROOT, SUPPORT, bundled_server
from tests.support.terminal import PROMPT, Terminal, needs_tmux, start, terminals, workspace

__all__ = ["terminals", "workspace"]  # the shared fixtures
pytestmark = needs_tmux


def tree_digest(folder: Path) -> dict[str, str]:
    """Every file under `folder` and its content's hash (what "unchanged" means here)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def servers_file(folder: Path, servers: dict[str, object]) -> Path:
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def local_and_writer(workspace: Path) -> dict[str, object]:
    return {
        "local": {
            "command": sys.executable,
            "args": ["-m", "agent.server", "--root", str(workspace)],
            "cwd": str(REPO_ROOT),
        },
        "writer": {
            "command": sys.executable,
            "args": [str(SUPPORT / "writer_server.py"), "--root", str(workspace)],
        },
    }


def turn(term: Terminal, request: str, answer: str) -> None:
    mark = term.mark()
    term.type(request)
    term.wait_for(answer, after=mark)
    term.wait_for(PROMPT, after=mark)


def command(term: Terminal, line: str, shown: str) -> None:
    mark = term.mark()
    term.type(line)
    term.wait_for(shown, after=mark)
    term.wait_for(PROMPT, after=mark)


def test_undo_and_redo_turns_of_write_file_the_shell_and_a_third_party_server(
    workspace: Path, terminals: list[Terminal]
) -> None:
    (workspace / ".gitignore").write_text("ignored.log\n")
    (workspace / "ignored.log").write_text("ignored secret content\n")
    git(workspace, "init", "-q")
    git(workspace, "add", "notes.txt", ".gitignore")
    git(workspace, "commit", "-q", "-m", "start")
    dot_git = tree_digest(workspace / ".git")
    config = servers_file(workspace.parent, local_and_writer(workspace))
    script = [
        tool_calls(("local__write_file", {"path": "a.txt", "content": "from write_file\n"})),
        text("wrote a"),
        tool_calls(("local__bash", {"command": "echo from-shell > b.txt && rm notes.txt"})),
        text("ran the shell"),
        tool_calls(("writer__write_note", {"path": "c.txt", "text": "from the writer"})),
        text("noted"),
    ]
    with ScriptedLLM(*script) as llm:
        term = start(
            terminals, llm, workspace, "undo", "-y", "--mcp-config", str(config),
            ready=r"tools from 2 server",
        )  # fmt: skip
        turn(term, "write a", "wrote a")
        turn(term, "use the shell", "ran the shell")
        turn(term, "take a note", "noted")
        assert (workspace / "c.txt").exists() and not (workspace / "notes.txt").exists()

        command(term, "/undo", r'undid turn 3 \("take a note"\): removed 1 \(c.txt\)')
        assert not (workspace / "c.txt").exists()
        command(term, "/undo", r"undid turn 2 .*restored 1 \(notes.txt\), removed 1 \(b.txt\)")
        assert (workspace / "notes.txt").read_text() == "launch code 4711\n"
        assert not (workspace / "b.txt").exists()
        command(term, "/undo", r"undid turn 1 .*removed 1 \(a.txt\)")
        assert sorted(p.name for p in workspace.iterdir()) == [
            ".git", ".gitignore", "ignored.log", "notes.txt",
        ]  # fmt: skip
        command(term, "/undo", r"nothing more to undo")

        command(term, "/redo", r"redid turn 1 .*restored 1 \(a.txt\)")
        assert (workspace / "a.txt").read_text() == "from write_file\n"
        command(term, "/redo", r"redid turn 2 ")
        assert (workspace / "b.txt").read_text() == "from-shell\n"
        assert not (workspace / "notes.txt").exists()
        term.leave()
        llm.assert_complete()

    assert tree_digest(workspace / ".git") == dot_git  # the user's repository: not written
    assert (workspace / "ignored.log").read_text() == "ignored secret content\n"
    [store] = (workspace.parent / "state" / "sessions").glob("*.checkpoints")
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    blobs = [p for p in (store / "objects").rglob("*") if p.is_file()]
    assert blobs and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in blobs)
    assert not any(b"ignored secret" in p.read_bytes() for p in blobs)  # .gitignore honoured


def test_undo_asks_before_overwriting_a_change_made_outside_the_agent_in_a_folder_without_git(
    workspace: Path, terminals: list[Terminal]
) -> None:
    (workspace / "a.txt").write_text("original\n")
    script = [
        tool_calls(("local__write_file", {"path": "a.txt", "content": "by the agent\n"})),
        text("changed a"),
    ]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, "outside", "-y")
        turn(term, "change a", "changed a")
        (workspace / "a.txt").write_text("edited by me\n")

        mark = term.mark()
        term.type("/undo")
        term.wait_for(
            r"1 file changed since the agent's turn 1 \(a.txt\).*Go on\? \[y/N\]", after=mark
        )
        term.type("n")
        term.wait_for(r"/undo: nothing changed", after=mark)
        assert (workspace / "a.txt").read_text() == "edited by me\n"

        mark = term.mark()
        term.type("/undo")
        term.wait_for(r"Go on\? \[y/N\]", after=mark)
        term.type("y")
        term.wait_for(r"undid turn 1 .*restored 1 \(a.txt\)", after=mark)
        assert (workspace / "a.txt").read_text() == "original\n"
        term.leave()
        llm.assert_complete()
    assert not (workspace / ".git").exists()


def test_a_resumed_session_can_undo_the_turns_of_the_first_run(
    workspace: Path, terminals: list[Terminal]
) -> None:
    script = [
        tool_calls(("local__write_file", {"path": "notes.txt", "content": "overwritten\n"})),
        text("overwrote the notes"),
    ]
    with ScriptedLLM(*script) as llm:
        first = start(terminals, llm, workspace, "first", "-y")
        turn(first, "overwrite the notes", "overwrote the notes")
        first.leave()

        [saved] = (workspace.parent / "state" / "sessions").glob("*.jsonl")
        resumed = start(terminals, llm, workspace, "resumed", "--resume", saved.stem)
        command(resumed, "/undo", r'undid turn 1 \("overwrite the notes"\): restored 1')
        assert (workspace / "notes.txt").read_text() == "launch code 4711\n"
        resumed.leave()


@pytest.mark.timeout(120)
def test_undo_says_what_a_remote_server_did_cannot_be_undone(
    workspace: Path, terminals: list[Terminal], tmp_path: Path
) -> None:
    script = [
        tool_calls(("remote__write_file", {"path": "r.txt", "content": "remote\n"})),
        text("wrote remotely"),
    ]
    with bundled_server("http", REPO_ROOT, tmp_path, workspace=workspace) as url:
        config = servers_file(tmp_path, {"remote": {"type": "http", "url": url}})
        with ScriptedLLM(*script) as llm:
            term = start(terminals, llm, workspace, "remote", "-y", "--mcp-config", str(config))
            turn(term, "write remotely", "wrote remotely")
            command(
                term,
                "/undo",
                r"undid turn 1 .*removed 1 \(r.txt\); what remote servers did "
                r"\(remote › write_file\) cannot be undone",
            )
            term.leave()


def words(text: str) -> str:
    """A regex of `text` whose words may be wrapped onto the next line (rich wraps)."""
    return r"\s+".join(re.escape(word) for word in text.split())


def test_undo_keeps_a_moved_file_whose_folder_became_a_link_and_counts_only_what_it_did(
    workspace: Path, terminals: list[Terminal], tmp_path: Path
) -> None:
    """A turn moved sub/f out and swapped the folder `sub` for a link out of the
    workspace. /undo refuses to write through the link, so the moved copy is the only
    one on disk: it stays, and the line says so instead of counting it restored."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / "f").write_text("only copy\n")
    (tmp_path / "outside").mkdir()
    shell = "mkdir moved && mv sub/f moved/f && rmdir sub && ln -s ../outside sub"
    script = [tool_calls(("local__bash", {"command": shell})), text("moved it")]
    with ScriptedLLM(*script) as llm:
        term = start(terminals, llm, workspace, "moved", "-y")
        turn(term, "move f", "moved it")
        assert (workspace / "sub").is_symlink()
        mark = term.mark()
        command(
            term,
            "/undo",
            words(
                "not done: moved/f: kept: the only copy on disk of sub/f, which was not "
                "restored; sub/f: its folder is not a real folder inside the workspace; "
                "not restored"
            ),
        )
        shown = term.screen()[mark:]
        assert re.search(r"turn\s+1\s+\(\"move\s+f\"\)", shown), shown
        assert not re.search(r"restored\s+\d+\s+\([^)]*sub/f", shown), shown  # not counted
        assert (workspace / "moved" / "f").read_text() == "only copy\n"
        assert list((tmp_path / "outside").iterdir()) == []
        term.leave()
        llm.assert_complete()
