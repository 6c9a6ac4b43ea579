"""An ACP editor's `fs/read_text_file` and `fs/write_text_file` in place of the bundled
server's file tools, for agent.cli.acp_command.

When the editor says in `initialize` that it reads and writes files for us, the bundled
server's `read_file`, `write_file` and `edit_file` (edit: when it does both) run through
the editor on paths inside the session's cwd: the model reads the buffers the user has not
saved, and the editor shows the edits as they happen. The call is routed in the registry
(`ToolRegistry.route`), below the gate: the PreToolUse hooks, the approval, the trace and
the transcript record see it exactly as before; only where it runs changes.

A path is decided on as the bundled server decides (agent.server.workspace: symlinks
followed, as open() would): one outside the server's root, one outside the session's cwd,
or something that is not a regular file goes to the server itself, which refuses it or
serves it in its own words. The answers are worded as the server words its own, and
become observations as its results do (marked untrusted, cut to size).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.interfaces import Client
from acp.schema import ClientCapabilities
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from agent.config.build import BUNDLED_MAIN
from agent.config.settings import ServerConfig
from agent.server.app import MAX_EDIT_BYTES, MAX_READ_CHARS, READ_LIMIT
from agent.server.workspace import Workspace
from agent.tools.registry import ToolRegistry


def bundled_root(config: ServerConfig) -> Path | None:
    """The workspace root of a bundled server's entry (`--root`), or None for another
    server (or one started without a root: it is left to itself)."""
    args = list(config.args)
    if str(BUNDLED_MAIN) not in args or "--root" not in args[:-1]:
        return None
    return Path(args[args.index("--root") + 1])


def route_files(
    registry: ToolRegistry,
    client: Client,
    session_id: str,
    cwd: Path,
    capabilities: ClientCapabilities | None,
) -> list[str]:
    """Route the bundled servers' file tools to the editor, as far as it offered; returns
    the (server, tool) names routed, as `server__tool`."""
    fs = capabilities.fs if capabilities is not None else None
    reads = bool(fs is not None and fs.read_text_file)
    writes = bool(fs is not None and fs.write_text_file)
    routed: list[str] = []
    for name, server in registry.servers.items():
        root = bundled_root(server.config)
        if root is None or not (reads or writes):
            continue
        files = EditorFiles(client, session_id, Workspace.at(root), cwd.resolve())
        tools = {
            "read_file": files.read_file if reads else None,
            "write_file": files.write_file if writes else None,
            "edit_file": files.edit_file if reads and writes else None,
        }
        for tool, handler in tools.items():
            if handler is not None:
                registry.route(name, tool, handler)
                routed.append(f"{name}__{tool}")
    return routed


@dataclass(frozen=True)
class EditorFiles:
    """One bundled server's file tools, run through the editor."""

    client: Client
    session_id: str
    workspace: Workspace
    cwd: Path

    def _target(self, arguments: dict[str, Any]) -> Path | None:
        """The real path of the call's file when the editor should handle it; None: the
        server runs the call (a bad or outside path, which it refuses; no regular file)."""
        path = arguments.get("path")
        if not isinstance(path, str):
            return None
        try:
            real = self.workspace.resolve(path)
        except ToolError:
            return None  # the server refuses it, in its words
        if real != self.cwd and not real.is_relative_to(self.cwd):
            return None
        if real.exists() and not real.is_file():
            return None  # a directory, a FIFO: the server says what it is
        return real

    async def _read(self, real: Path, line: int | None = None, limit: int | None = None) -> str:
        answer = await self.client.read_text_file(
            session_id=self.session_id, path=str(real), line=line, limit=limit
        )
        return answer.content

    async def read_file(self, arguments: dict[str, Any]) -> CallToolResult | None:
        real = self._target(arguments)
        if real is None:
            return None
        shown = str(arguments["path"])
        offset = _int(arguments.get("offset"), 1)
        limit = _int(arguments.get("limit"), READ_LIMIT)
        try:
            text = await self._read(real, offset, limit + 1)  # one more: are there more?
        except RequestError as exc:
            return _failed(f"cannot read '{shown}' in the editor: {exc}")
        lines = text.splitlines(keepends=True)
        more = len(lines) > limit
        body = "".join(lines[:limit])
        if len(body) > MAX_READ_CHARS:
            cut = body[:MAX_READ_CHARS]
            return _answer(f"{cut}\n[cut at {MAX_READ_CHARS} characters; read fewer lines]")
        if not lines and offset > 1:
            return _answer(f"[offset {offset} is past the end of '{shown}']")
        if offset == 1 and not more:
            return _answer(body)
        last = offset + min(len(lines), limit) - 1
        after = f"; next: offset={last + 1}" if more else " (the end)"
        return _answer(f"{body}\n[lines {offset}-{last}{after}]")

    async def write_file(self, arguments: dict[str, Any]) -> CallToolResult | None:
        real = self._target(arguments)
        content = arguments.get("content")
        if real is None or not isinstance(content, str):
            return None
        existed = real.exists()
        try:
            await self.client.write_text_file(
                session_id=self.session_id, path=str(real), content=content
            )
        except RequestError as exc:
            return _failed(f"cannot write '{arguments['path']}' in the editor: {exc}")
        verb = "overwrote" if existed else "created"
        shown = self.workspace.show(real)
        return _answer(f"{verb} {shown} ({len(content.encode())} bytes)")

    async def edit_file(self, arguments: dict[str, Any]) -> CallToolResult | None:
        """The bundled server's edit, on the editor's copy of the file."""
        real = self._target(arguments)
        old, new = arguments.get("old_text"), arguments.get("new_text")
        if real is None or not isinstance(old, str) or not isinstance(new, str):
            return None
        shown, every = str(arguments["path"]), arguments.get("replace_all") is True
        if not old:
            return _failed("old_text is empty; give the exact text to replace")
        try:
            text = await self._read(real)
        except RequestError as exc:
            return _failed(f"cannot read '{shown}' in the editor: {exc}")
        if len(text.encode()) > MAX_EDIT_BYTES:
            return _failed(f"'{shown}' is larger than {MAX_EDIT_BYTES} bytes; too large to edit")
        count = text.count(old)
        if count == 0:
            return _failed(f"old_text was not found in {shown}; read the file and copy it exactly")
        if count > 1 and not every:
            return _failed(
                f"old_text appears {count} times in {shown}; include more context to make it "
                "unique, or set replace_all"
            )
        updated = text.replace(old, new) if every else text.replace(old, new, 1)
        try:
            await self.client.write_text_file(
                session_id=self.session_id, path=str(real), content=updated
            )
        except RequestError as exc:
            return _failed(f"cannot write '{shown}' in the editor: {exc}")
        done = count if every else 1
        where = self.workspace.show(real)
        return _answer(f"replaced {done} occurrence{'s' if done > 1 else ''} in {where}")


def _int(value: Any, default: int) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else default
    )


def _answer(text: str, is_error: bool = False) -> CallToolResult:
    """The result as the bundled server sends it (the registry marks it untrusted)."""
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def _failed(message: str) -> CallToolResult:
    return _answer(message, is_error=True)
