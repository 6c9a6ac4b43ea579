"""`run_mcp.py acp` as an editor drives it: the official ACP SDK's client side spawns the
agent, which runs on the scripted model with the bundled server handed over in
`session/new`'s mcpServers (docs/programs.md, "run_mcp.py acp")."""

from __future__ import annotations

import contextlib
import json
import sys
import typing
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, image_block, resource_link_block, text_block
from acp.interfaces import Client
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    AvailableCommandsUpdate,
    BlobResourceContents,
    ClientCapabilities,
    DeniedOutcome,
    EmbeddedResourceContentBlock,
    FileSystemCapabilities,
    McpServerStdio,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextResourceContents,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
    WriteTextFileResponse,
)
from acp.stdio import spawn_agent_process

from agent.config.build import BUNDLED_MAIN
from agent.tools.results import strip_marker
from tests.support.cli import RUN_MCP, cli_env
from tests.support.fake_llm import ScriptedLLM, error, forever, text, tool_calls

pytestmark = pytest.mark.anyio
SECRET = "sk-acp-secret"
EDIT = {"path": "notes.txt", "old_text": "hello", "new_text": "changed"}


class Editor:
    """The editor's side: records every update, answers each permission request with the
    next of `answers` (an option id, or None: cancelled)."""

    def __init__(self, *answers: str | None, buffers: dict[str, str] | None = None) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.updates: list[Any] = []
        self.chunk = anyio.Event()
        self.commands = anyio.Event()
        self.card = anyio.Event()  # a call was shown (tool_call)
        self.buffers = buffers or {}  # path -> the unsaved text of its open buffer
        self.reads: list[tuple[str, int | None, int | None]] = []
        self.writes: list[tuple[str, str]] = []

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **_: Any,
    ) -> ReadTextFileResponse:
        """As an editor does: the open buffer's text, else the file's."""
        self.reads.append((path, line, limit))
        text = self.buffers.get(path)
        if text is None:
            text = await anyio.Path(path).read_text()
        lines = text.splitlines(keepends=True)[(line or 1) - 1 :]
        return ReadTextFileResponse(content="".join(lines[:limit] if limit else lines))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **_: Any
    ) -> WriteTextFileResponse:
        """As Zed does: the buffer takes the text, and is saved."""
        self.writes.append((path, content))
        self.buffers[path] = content
        await anyio.Path(path).write_text(content)
        return WriteTextFileResponse()

    async def request_permission(
        self, options: list[PermissionOption], session_id: str, tool_call: ToolCallUpdate, **_: Any
    ) -> RequestPermissionResponse:
        self.asked.append((tool_call, options))
        answer = self.answers.pop(0)
        if answer is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)
        if isinstance(update, AgentMessageChunk):
            self.chunk.set()
        if isinstance(update, AvailableCommandsUpdate):
            self.commands.set()
        if isinstance(update, ToolCallStart):
            self.card.set()

    def of(self, kind: type) -> list[Any]:
        return [u for u in self.updates if isinstance(u, kind)]

    def answer(self) -> str:
        return "".join(u.content.text for u in self.of(AgentMessageChunk))


def files_server(root: Path) -> McpServerStdio:
    """The bundled server as the editor hands it over, serving `root`."""
    args = ["-P", str(BUNDLED_MAIN), "--root", str(root)]
    return McpServerStdio(name="files", command=sys.executable, args=args, env=[])


@contextlib.asynccontextmanager
async def agent(
    tmp_path: Path,
    editor: Editor,
    llm: ScriptedLLM,
    *args: str,
    capabilities: ClientCapabilities | None = None,
) -> AsyncIterator[Any]:
    """`run_mcp.py acp` spawned by the SDK's client; its stderr to a file (read on failure)."""
    env = cli_env(tmp_path, llm.base_url, SECRET)
    with (tmp_path / "acp.stderr").open("wb") as err:
        async with spawn_agent_process(
            typing.cast(Client, editor),
            sys.executable,
            str(RUN_MCP),
            "acp",
            *args,
            env=env,
            cwd=tmp_path,
            transport_kwargs={"stderr": err},
        ) as (conn, _process):
            init = await conn.initialize(protocol_version=1, client_capabilities=capabilities)
            assert init.protocol_version == 1
            yield conn


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("hello")
    return root


def offered(llm: ScriptedLLM, index: int = -1) -> set[str]:
    return {t["function"]["name"] for t in llm.requests[index].get("tools", [])}


@pytest.mark.parametrize("vision", ['"auto"', "false"])
async def test_initialize_says_what_we_have(tmp_path: Path, vision: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[llm]\nvision = {vision}\n")
    with ScriptedLLM() as llm:
        env = cli_env(tmp_path, llm.base_url, SECRET)
        editor = typing.cast(Client, Editor())
        async with spawn_agent_process(
            editor,
            sys.executable,
            str(RUN_MCP),
            "acp",
            "--config",
            str(config),
            env=env,
            cwd=tmp_path,
        ) as (conn, _):
            init = await conn.initialize(protocol_version=1)
    caps = init.agent_capabilities
    assert init.protocol_version == 1 and caps is not None
    assert caps.load_session is True
    assert caps.mcp_capabilities is not None and caps.mcp_capabilities.http is True
    assert caps.prompt_capabilities is not None
    assert caps.prompt_capabilities.embedded_context is True
    # Images only when the model may see them ([llm] vision not false).
    assert caps.prompt_capabilities.image is (vision != "false")


async def test_an_allowed_call_runs_and_streams_a_rejected_one_does_not_run(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    write = ("files__write_file", {"path": "made.txt", "content": "yes"})
    denied = ("files__write_file", {"path": "never.txt", "content": "no"})
    script = [tool_calls(write), text("Written."), tool_calls(denied), text("Not written.")]
    editor = Editor("allow_once", "reject_once")
    with ScriptedLLM(*script) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[files_server(root)])
            first = await conn.prompt(session_id=session.session_id, prompt=[text_block("write")])
            assert first.stop_reason == "end_turn"
            assert (root / "made.txt").read_text() == "yes"
            shown = list(editor.updates)
            second = await conn.prompt(session_id=session.session_id, prompt=[text_block("again")])
    assert second.stop_reason == "end_turn"
    assert not (root / "never.txt").exists()  # rejected: it did not run
    # The model was offered the editor's server's tools.
    assert "files__write_file" in offered(llm, 0)
    # The asked call: shown pending (kind from its annotations), asked with four options.
    call, options = editor.asked[0]
    assert call.kind == "edit" and call.status == "pending"
    assert call.raw_input == {"path": "made.txt", "content": "yes"}
    kinds = ["allow_once", "allow_always", "reject_once", "reject_always"]
    assert [o.kind for o in options] == kinds
    [start] = [u for u in shown if isinstance(u, ToolCallStart)]
    assert start.tool_call_id == call.tool_call_id and start.status == "pending"
    progress = [u for u in shown if isinstance(u, ToolCallProgress)]
    assert [u.status for u in progress] == ["in_progress", "completed"]
    assert all(u.tool_call_id == call.tool_call_id for u in progress)
    assert progress[-1].content and "made.txt" in progress[-1].content[0].content.text
    assert "Written." in "".join(u.content.text for u in shown if isinstance(u, AgentMessageChunk))
    # The rejected one ends failed, and the model is told the user declined.
    last = editor.of(ToolCallProgress)[-1]
    assert last.status == "failed" and "declined" in last.content[0].content.text
    assert "declined" in json.dumps(llm.messages(-1))
    assert editor.answer().endswith("Not written.")


async def test_always_is_remembered_and_a_cancelled_question_does_not_run(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)

    def write(name: str) -> Any:
        return tool_calls(("files__write_file", {"path": name, "content": "x"}))

    script = [write("a.txt"), text("1"), write("b.txt"), text("2")]
    script += [tool_calls(("files__edit_file", EDIT)), text("3")]
    editor = Editor("allow_always", None)
    with ScriptedLLM(*script) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[files_server(root)])
            for word in ("one", "two"):  # allowed always: asked once, both run
                await conn.prompt(session_id=session.session_id, prompt=[text_block(word)])
            assert len(editor.asked) == 1
            assert (root / "a.txt").exists() and (root / "b.txt").exists()
            # Another tool is asked again; the question cancelled: the call does not run.
            await conn.prompt(session_id=session.session_id, prompt=[text_block("three")])
    assert len(editor.asked) == 2 and editor.asked[1][0].raw_input == EDIT
    assert (root / "notes.txt").read_text() == "hello"
    llm.assert_complete()


async def test_reject_always_is_not_asked_again(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    edit = tool_calls(("files__edit_file", EDIT))
    editor = Editor("reject_always")
    with ScriptedLLM(edit, text("no"), edit, text("still no")) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[files_server(root)])
            for word in ("one", "two"):
                await conn.prompt(session_id=session.session_id, prompt=[text_block(word)])
    assert len(editor.asked) == 1  # the second call was refused without asking
    assert (root / "notes.txt").read_text() == "hello"
    # Both shown (pending), neither ran: each goes straight to failed.
    assert [u.status for u in editor.of(ToolCallStart)] == ["pending", "pending"]
    assert [u.status for u in editor.of(ToolCallProgress)] == ["failed", "failed"]


async def test_cancel_ends_the_running_turn(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    editor = Editor()
    with ScriptedLLM(forever("thinking "), text("after")) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[])
            async with anyio.create_task_group() as tg:
                results: list[Any] = []

                async def ask() -> None:
                    prompt = [text_block("go")]
                    results.append(await conn.prompt(session_id=session.session_id, prompt=prompt))

                tg.start_soon(ask)
                with anyio.fail_after(30):
                    await editor.chunk.wait()
                await conn.cancel(session_id=session.session_id)
            assert results[0].stop_reason == "cancelled"
            # The session goes on: the next prompt is answered.
            after = await conn.prompt(session_id=session.session_id, prompt=[text_block("more")])
    assert after.stop_reason == "end_turn" and editor.answer().endswith("after")


async def test_a_resource_is_read_as_text_and_an_untrusted_cwd_keeps_its_servers(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    project = {"mcpServers": {"proj": {"command": sys.executable, "args": ["-c", "pass"]}}}
    (root / ".mcp.json").write_text(json.dumps(project))
    resource = EmbeddedResourceContentBlock(
        type="resource",
        resource=TextResourceContents(uri="file:///ws/notes.txt", text="the notes say 42"),
    )
    editor = Editor()
    with ScriptedLLM(text(f"Read it. The key is {SECRET} there.", chunk=3)) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[files_server(root)])
            done = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("what?"), resource]
            )
    assert done.stop_reason == "end_turn"
    sent = json.dumps(llm.messages(-1))
    assert "the notes say 42" in sent and "file:///ws/notes.txt" in sent
    # The folder is not trusted: its own .mcp.json was not read, the editor's server was.
    tools = offered(llm)
    assert "files__read_file" in tools and not any(t.startswith("proj") for t in tools)
    # A secret in the answer, streamed in pieces, reaches the editor masked.
    assert SECRET not in editor.answer()  # the pieces joined, as the editor shows them
    assert SECRET not in json.dumps([u.model_dump() for u in editor.updates])
    assert editor.answer().startswith("Read it. The key is ") and "there." in editor.answer()


async def test_stop_reasons_and_what_a_session_refuses(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    configured = tmp_path / "xdg-config" / "mcp-agent" / "mcp.json"
    configured.parent.mkdir(parents=True)
    args = ["-P", str(BUNDLED_MAIN), "--root", str(root)]
    configured.write_text(
        json.dumps({"mcpServers": {"files": {"command": sys.executable, "args": args}}})
    )
    script = [tool_calls(("files__list_dir", {})), error(400, "the model is broken")]
    with ScriptedLLM(*script) as llm:
        async with agent(tmp_path, Editor(), llm, "--max-steps", "1") as conn:
            # One name twice in mcpServers; cwd must exist.
            twice = [files_server(root), files_server(root)]
            with pytest.raises(RequestError, match="mcpServers: 'files' is given twice"):
                await conn.new_session(cwd=str(root), mcp_servers=twice)
            with pytest.raises(RequestError, match="must be an existing absolute folder"):
                await conn.new_session(cwd="relative/dir", mcp_servers=[])
            session = await conn.new_session(cwd=str(root), mcp_servers=[])
            steps = await conn.prompt(session_id=session.session_id, prompt=[text_block("list")])
            assert steps.stop_reason == "max_turn_requests"
            with pytest.raises(RequestError, match="the model is broken"):
                await conn.prompt(session_id=session.session_id, prompt=[text_block("again")])


FS = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True))
FORM_SERVER = Path(__file__).parents[1] / "support" / "form_server.py"
SLOW_SERVER = Path(__file__).parents[1] / "support" / "slow_server.py"
PNG = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def system_prompt(llm: ScriptedLLM, index: int = 0) -> str:
    return str(llm.requests[index]["messages"][0]["content"])


async def test_commands_are_announced_and_run_in_the_editor(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    editor = Editor()
    script = [text("Hello."), text("Hello again."), text("They said hello twice.")]
    with ScriptedLLM(*script) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[files_server(root)])
            with anyio.fail_after(30):
                await editor.commands.wait()
            sid = session.session_id
            said: dict[str, str] = {}
            for line in ("/tools files", "/servers", "/login files", "/nosuch", "/usage"):
                before = len(editor.updates)
                reply = await conn.prompt(session_id=sid, prompt=[text_block(line)])
                assert reply.stop_reason == "end_turn"
                chunks = [u for u in editor.updates[before:] if isinstance(u, AgentMessageChunk)]
                said[line] = "".join(u.content.text for u in chunks)
            assert not llm.requests  # a command is not a turn: the model was not asked
            for word in ("hi", "hi again"):
                await conn.prompt(session_id=sid, prompt=[text_block(word)])
            before = len(editor.updates)
            await conn.prompt(session_id=sid, prompt=[text_block("/compact")])
            compacted = "".join(
                u.content.text for u in editor.updates[before:] if isinstance(u, AgentMessageChunk)
            )
    [announced] = editor.of(AvailableCommandsUpdate)
    names = {c.name for c in announced.available_commands}
    # The REPL's table, less what needs its terminal.
    assert {"compact", "tools", "servers", "undo", "approve", "usage", "model"} <= names
    assert not names & {"exit", "quit", "login", "app", "apps", "help"}
    assert "read_file" in said["/tools files"] and "write_file" in said["/tools files"]
    assert said["/tools files"].startswith("```")  # a listing keeps its columns
    assert "files" in said["/servers"] and "ready" in said["/servers"]
    assert said["/login files"] == "/login needs a terminal: run it in `run_mcp.py -i`"
    assert said["/nosuch"].startswith("unknown command /nosuch")
    assert "session" in said["/usage"]
    # /compact had the model summarise the turns before the last one, and said so.
    assert len(llm.requests) == 3 and "Hello." in json.dumps(llm.requests[2]["messages"])
    assert "compact" in compacted.lower(), compacted
    llm.assert_complete()


async def test_the_editor_reads_and_writes_the_files_inside_its_cwd(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (tmp_path / "outside.txt").write_text("not for the model")
    notes = str(root / "notes.txt")
    editor = Editor("allow_once", "allow_once", buffers={notes: "hello, unsaved\nline two\n"})
    script = [
        tool_calls(("files__read_file", {"path": "notes.txt"})),
        tool_calls(("files__read_file", {"path": "../outside.txt"})),
        tool_calls(("files__write_file", {"path": "new.txt", "content": "made"})),
        tool_calls(("files__edit_file", {**EDIT, "old_text": "unsaved"})),
        text("Done."),
    ]
    with ScriptedLLM(*script) as llm:
        async with agent(tmp_path, editor, llm, capabilities=FS) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[files_server(root)])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("work")])
    results = [m["content"] for m in llm.messages(-1) if m["role"] == "tool"]
    # The model read the editor's unsaved buffer, marked as a server's result is.
    assert "hello, unsaved" in results[0] and strip_marker(results[0]) != results[0]
    # Outside the cwd: the bundled server refused it, in its words; the editor was not asked.
    assert "outside the workspace" in results[1] and "not for the model" not in results[1]
    assert [Path(p).name for p, _, _ in editor.reads] == ["notes.txt", "notes.txt"]
    # The write and the edit went through the editor (asked first, as every write is).
    assert editor.writes[0] == (str(root / "new.txt"), "made")
    assert editor.writes[1] == (notes, "hello, changed\nline two\n")
    assert "created new.txt" in results[2] and "replaced 1 occurrence" in results[3]
    assert len(editor.asked) == 2 and (root / "new.txt").read_text() == "made"


async def test_without_fs_the_bundled_server_does_its_own_files(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    editor = Editor(buffers={str(root / "notes.txt"): "unsaved"})
    script = [tool_calls(("files__read_file", {"path": "notes.txt"})), text("ok")]
    with ScriptedLLM(*script) as llm:
        async with agent(tmp_path, editor, llm) as conn:  # no fs capabilities
            session = await conn.new_session(cwd=str(root), mcp_servers=[files_server(root)])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("read")])
    assert not editor.reads and "hello" in json.dumps(llm.messages(-1))


async def test_the_model_is_told_the_session_cwd_not_the_process_cwd(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    with ScriptedLLM(text("ok")) as llm:
        async with agent(tmp_path, Editor(), llm) as conn:  # the process runs in tmp_path
            session = await conn.new_session(cwd=str(root), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("where?")])
    assert f"- Working directory: {root.resolve()}\n" in system_prompt(llm)
    # The bundled server a session gets by default serves that folder too.
    assert f"workspace at {root.resolve()}" in system_prompt(llm)


async def test_a_saved_session_is_loaded_replayed_and_continued(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    first = [tool_calls(("local__read_file", {"path": "notes.txt"})), text("It says hello.")]
    with ScriptedLLM(*first) as llm:
        async with agent(tmp_path, Editor(), llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("read notes")])
    editor = Editor()
    with ScriptedLLM(text("Still hello.")) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            with pytest.raises(RequestError, match="no saved session"):
                await conn.load_session(cwd=str(root), session_id="latest", mcp_servers=[])
            await conn.load_session(cwd=str(root), session_id=session.session_id, mcp_servers=[])
            replayed = list(editor.updates)
            await conn.prompt(session_id=session.session_id, prompt=[text_block("and now?")])
    # Replayed before the answer: the request, the call (with its status), the answer.
    [user] = [u for u in replayed if isinstance(u, UserMessageChunk)]
    assert user.content.text == "read notes"
    [call] = [u for u in replayed if isinstance(u, ToolCallStart)]
    assert call.status == "completed" and call.kind == "read"
    assert call.raw_input == {"path": "notes.txt"} and call.content is not None
    assert "hello" in json.dumps([c.model_dump() for c in call.content])
    assert [u.content.text for u in replayed if isinstance(u, AgentMessageChunk)] == [
        "It says hello."
    ]
    # The model continues the conversation it had.
    sent = json.dumps(llm.messages(-1))
    assert "read notes" in sent and "It says hello." in sent and "and now?" in sent
    assert editor.answer().endswith("Still hello.")


async def test_images_and_resources_in_a_prompt(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    link = resource_link_block("file:///ws/big.bin", "big.bin")
    blob = EmbeddedResourceContentBlock(
        type="resource",
        resource=BlobResourceContents(uri="file:///ws/a.bin", blob="AAAA", mime_type="x/y"),
    )
    prompt = [text_block("what is this?"), image_block(PNG, "image/png"), link, blob]
    with ScriptedLLM(text("A dot.")) as llm:
        async with agent(tmp_path, Editor(), llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=prompt)
            with pytest.raises(RequestError, match="'audio' is not supported"):
                audio = {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
                await conn.prompt(session_id=session.session_id, prompt=[audio])
    messages = llm.messages(0)
    request = [m for m in messages if m["role"] == "user"]
    assert (
        "what is this?" in request[0]["content"] and "file:///ws/big.bin" in request[0]["content"]
    )
    assert "file:///ws/a.bin (x/y, 3 B: not shown)" in request[0]["content"]
    parts = request[1]["content"]  # the images, right after the request
    assert parts[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}


async def test_an_image_is_refused_when_the_model_does_not_see_images(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text("[llm]\nvision = false\n")
    with ScriptedLLM() as llm:
        async with agent(tmp_path, Editor(), llm, "--config", str(config)) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[])
            with pytest.raises(RequestError, match="does not see images"):
                prompt = [text_block("look"), image_block(PNG, "image/png")]
                await conn.prompt(session_id=session.session_id, prompt=prompt)
    assert not llm.requests


async def test_a_server_s_form_is_declined_in_acp_s_own_words(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    form = McpServerStdio(name="form", command=sys.executable, args=[str(FORM_SERVER)], env=[])
    script = [tool_calls(("form__confirm", {"action": "deploy"})), text("declined")]
    editor = Editor("allow_once")
    with ScriptedLLM(*script) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[form])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("deploy")])
    assert "the form was answered: decline" in json.dumps(llm.messages(-1))
    said = (tmp_path / "acp.stderr").read_text()
    assert "declined: ACP has no way to put a tool server's form to the editor" in said
    assert "single-shot" not in said and "-i at a terminal" not in said


def slow_server() -> McpServerStdio:
    """A context server of the editor's: tests/support/slow_server.py (`wait`, `write`)."""
    return McpServerStdio(name="slow", command=sys.executable, args=[str(SLOW_SERVER)], env=[])


def configure(tmp_path: Path, servers: dict[str, Any]) -> Path:
    """The user's own mcp.json (the test's XDG_CONFIG_HOME)."""
    configured = tmp_path / "xdg-config" / "mcp-agent" / "mcp.json"
    configured.parent.mkdir(parents=True, exist_ok=True)
    configured.write_text(json.dumps({"mcpServers": servers}))
    return configured


async def test_the_bundled_tools_stay_beside_the_editor_s_servers(tmp_path: Path) -> None:
    """A Zed user with a context server still has the bundled file and shell tools, and
    reads the unsaved buffer through them (nothing is configured: the bundled server is
    the default, and the editor's servers are additions)."""
    root = workspace(tmp_path)
    notes = str(root / "notes.txt")
    editor = Editor(buffers={notes: "unsaved words"})
    script = [tool_calls(("local__read_file", {"path": "notes.txt"})), text("Read.")]
    with ScriptedLLM(*script) as llm:
        async with agent(tmp_path, editor, llm, capabilities=FS) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[slow_server()])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("read")])
    tools = offered(llm, 0)
    assert {"local__read_file", "local__bash", "slow__wait"} <= tools
    [result] = [m["content"] for m in llm.messages(-1) if m["role"] == "tool"]
    assert "unsaved words" in result  # the editor's buffer, through the bundled tool
    assert [Path(p).name for p, _, _ in editor.reads] == ["notes.txt"]


async def test_an_editor_server_takes_a_configured_name_for_its_session(tmp_path: Path) -> None:
    """The user's mcp.json names `files` (the slow server, trusted); the editor sends its
    own `files`: session/new succeeds, the editor's is the one connected, one note says
    so, and it gets nothing of the name's trust (its write is asked, and refused); a
    server of the user's with another name stays, and the bundled one is not added (the
    user configured servers)."""
    root = workspace(tmp_path)
    slow = {"command": sys.executable, "args": [str(SLOW_SERVER)]}
    configured = configure(tmp_path, {"files": {**slow, "trust": True}, "other": slow})
    write = tool_calls(("files__write_file", {"path": "made.txt", "content": "x"}))
    editor = Editor("reject_once")
    with ScriptedLLM(write, text("ok")) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[files_server(root)])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("hi")])
    assert len(editor.asked) == 1 and not (root / "made.txt").exists()
    tools = offered(llm, 0)
    assert "files__read_file" in tools and "files__wait" not in tools
    assert "other__wait" in tools and "local__read_file" not in tools
    said = (tmp_path / "acp.stderr").read_text()
    note = (
        f"note: mcpServers: the editor's 'files' replaces the server configured in "
        f"{configured} of that name for this session"
    )
    assert " ".join(said.split()).count(note) == 1, said


async def test_a_call_cut_by_cancel_gets_its_final_update(tmp_path: Path) -> None:
    """A call still running when the editor cancels the turn ends `failed`, saying so,
    before the prompt's reply; the session goes on."""
    root = workspace(tmp_path)
    editor = Editor()
    script = [tool_calls(("slow__wait", {"seconds": 60})), text("after")]
    with ScriptedLLM(*script) as llm:
        async with agent(tmp_path, editor, llm) as conn:
            session = await conn.new_session(cwd=str(root), mcp_servers=[slow_server()])
            sid = session.session_id
            results: list[Any] = []
            async with anyio.create_task_group() as tg:

                async def ask() -> None:
                    results.append(await conn.prompt(session_id=sid, prompt=[text_block("go")]))

                tg.start_soon(ask)
                with anyio.fail_after(30):
                    await editor.card.wait()
                await conn.cancel(session_id=sid)
            shown = list(editor.updates)
            after = await conn.prompt(session_id=sid, prompt=[text_block("more")])
    assert results[0].stop_reason == "cancelled" and after.stop_reason == "end_turn"
    [start] = [u for u in shown if isinstance(u, ToolCallStart)]
    assert start.status == "in_progress"
    final = [u for u in shown if isinstance(u, ToolCallProgress)][-1]
    assert final.tool_call_id == start.tool_call_id and final.status == "failed"
    assert final.content and "Cancelled" in final.content[0].content.text


async def test_an_editor_server_named_agent_is_one_clear_error(tmp_path: Path) -> None:
    """`agent` names the agent's own tools: an editor's server of that name fails its
    session/new in one line saying what to do, and the agent goes on."""
    root = workspace(tmp_path)
    named = McpServerStdio(name="agent", command=sys.executable, args=[str(SLOW_SERVER)], env=[])
    with ScriptedLLM() as llm:
        async with agent(tmp_path, Editor(), llm) as conn:
            with pytest.raises(RequestError, match="mcpServers: 'agent': .*another name"):
                await conn.new_session(cwd=str(root), mcp_servers=[named])
            await conn.new_session(cwd=str(root), mcp_servers=[])  # still serving
    assert "Traceback" not in (tmp_path / "acp.stderr").read_text()
