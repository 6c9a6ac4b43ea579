"""The bundled server's tools, each with honest annotations so approval can trust them.

Read-only tools (read_file, list_dir, search_files, get_current_time) run without asking;
bash, write_file and edit_file change things and are asked about. Errors the model can fix
are raised as ToolError so their text reaches it (MCPServer hides other exceptions' text).
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, TypedDict
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from agent import __version__
from agent.server.shell import run_bash
from agent.server.workspace import Workspace

OUTPUT_CAP = 100_000  # bytes of bash output kept (head + tail)
MAX_BASH_TIMEOUT = 600.0
READ_LIMIT = 2000  # lines per read_file call
MAX_READ_CHARS = 200_000
LIST_LIMIT = 1000
SEARCH_LIMIT = 200
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__"})

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class CurrentTime(TypedDict):
    timezone: str
    datetime: str


def build_server(root: str | os.PathLike[str] = ".") -> MCPServer:
    """The server with its tools bound to one workspace root."""
    ws = Workspace.at(root)
    server = MCPServer(
        "agent-local",
        title="Local workspace tools",
        version=__version__,
        instructions=(
            f"Tools for the workspace at {ws.root}. Paths are relative to it; paths outside it "
            "are refused. Read a file before editing it; edit_file replaces exact text."
        ),
        log_level="WARNING",
    )

    @server.tool(
        title="Run a shell command",
        structured_output=False,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
        ),
    )
    async def bash(
        command: Annotated[str, Field(description="Run by /bin/bash -c in the workspace root.")],
        timeout: Annotated[
            float, Field(description="Seconds before the command is killed.", gt=0)
        ] = 30,
    ) -> str:
        """Run a shell command; returns its combined stdout and stderr and the exit code."""
        limit = min(timeout, MAX_BASH_TIMEOUT)
        result = await run_bash(command, ws.root, limit, OUTPUT_CAP)
        if result.timed_out:
            raise ToolError(
                f"the command timed out after {limit:g} s; it was killed with every process it "
                f"started. Output so far:\n{result.output or '(none)'}"
            )
        return f"{result.output.rstrip()}\n[exit code {result.exit_code}]".lstrip()

    @server.tool(title="Read a file", annotations=READ_ONLY, structured_output=False)
    async def read_file(
        path: Annotated[str, Field(description="File path relative to the workspace root.")],
        offset: Annotated[int, Field(description="First line to return (1-based).", ge=1)] = 1,
        limit: Annotated[int, Field(description="Most lines to return.", ge=1)] = READ_LIMIT,
    ) -> str:
        """Read a text file, or a range of its lines for large files."""
        target = ws.resolve(path)
        text = await anyio.to_thread.run_sync(_read_text, target, path)
        lines = text.splitlines(keepends=True)
        chunk = lines[offset - 1 : offset - 1 + limit]
        body = "".join(chunk)
        if len(body) > MAX_READ_CHARS:
            body = body[:MAX_READ_CHARS]
            return f"{body}\n[cut at {MAX_READ_CHARS} characters; read fewer lines with limit]"
        last = offset - 1 + len(chunk)
        if offset > 1 or last < len(lines):
            more = f"; next: offset={last + 1}" if last < len(lines) else ""
            return f"{body}\n[lines {offset}-{last} of {len(lines)}{more}]"
        return body

    @server.tool(
        title="Write a file",
        structured_output=False,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def write_file(
        path: Annotated[str, Field(description="File path relative to the workspace root.")],
        content: Annotated[str, Field(description="The whole new content of the file.")],
    ) -> str:
        """Create or overwrite a file (parent directories are created)."""
        target = ws.resolve(path)
        if target.is_dir():
            raise ToolError(f"'{path}' is a directory")
        existed = target.exists()
        await anyio.to_thread.run_sync(_write_text, target, content)
        verb = "overwrote" if existed else "created"
        return f"{verb} {ws.show(target)} ({len(content.encode())} bytes)"

    @server.tool(
        title="Edit a file",
        structured_output=False,
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    async def edit_file(
        path: Annotated[str, Field(description="File path relative to the workspace root.")],
        old_text: Annotated[str, Field(description="Exact text to replace, unique in the file.")],
        new_text: Annotated[str, Field(description="The replacement text.")],
        replace_all: Annotated[
            bool, Field(description="Replace every occurrence instead of exactly one.")
        ] = False,
    ) -> str:
        """Replace exact text in a file; fails if the text is missing or not unique."""
        target = ws.resolve(path)
        text = await anyio.to_thread.run_sync(_read_text, target, path)
        if not old_text:
            raise ToolError("old_text is empty; give the exact text to replace")
        count = text.count(old_text)
        if count == 0:
            raise ToolError(f"old_text was not found in {path}; read the file and copy it exactly")
        if count > 1 and not replace_all:
            raise ToolError(
                f"old_text appears {count} times in {path}; include more context to make it "
                "unique, or set replace_all"
            )
        updated = (
            text.replace(old_text, new_text) if replace_all else text.replace(old_text, new_text, 1)
        )
        await anyio.to_thread.run_sync(_write_text, target, updated)
        done = count if replace_all else 1
        return f"replaced {done} occurrence{'s' if done > 1 else ''} in {ws.show(target)}"

    @server.tool(title="List a directory", annotations=READ_ONLY, structured_output=False)
    async def list_dir(
        path: Annotated[str, Field(description="Directory relative to the workspace root.")] = ".",
    ) -> str:
        """List a directory: sub-directories end with '/', symlinks with '@', files show size."""
        target = ws.resolve(path)
        if not target.is_dir():
            raise ToolError(f"'{path}' is not a directory")
        return await anyio.to_thread.run_sync(_listing, target)

    @server.tool(title="Search file contents", annotations=READ_ONLY, structured_output=False)
    async def search_files(
        pattern: Annotated[str, Field(description="Regular expression (Python syntax).")],
        path: Annotated[str, Field(description="Directory or file to search.")] = ".",
        glob: Annotated[
            str | None, Field(description="Only files whose name matches, e.g. '*.py'.")
        ] = None,
    ) -> str:
        """Search text files for a regular expression; returns path:line: text matches."""
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"invalid regular expression: {exc}") from None
        target = ws.resolve(path)
        if not target.exists():
            raise ToolError(f"'{path}' does not exist")
        return await anyio.to_thread.run_sync(_search, ws, target, regex, glob)

    @server.tool(title="Current time", annotations=READ_ONLY)
    def get_current_time(
        timezone: Annotated[
            str | None,
            Field(description="IANA time zone such as 'Europe/Oslo'; default: the local zone."),
        ] = None,
    ) -> CurrentTime:
        """The current date and time in a time zone, ISO 8601."""
        name = timezone or _local_zone_name()
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ToolError(
                f"unknown time zone '{name}'; use an IANA name such as 'Europe/Oslo' or 'UTC'"
            ) from None
        return {"timezone": name, "datetime": datetime.now(zone).isoformat(timespec="seconds")}

    return server


def _read_text(target: Path, shown: str) -> str:
    if target.is_dir():
        raise ToolError(f"'{shown}' is a directory; use list_dir")
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        raise ToolError(f"'{shown}' does not exist") from None
    except OSError as exc:
        raise ToolError(f"cannot read '{shown}': {exc.strerror}") from None
    if b"\x00" in data[:8192]:
        raise ToolError(f"'{shown}' is a binary file ({len(data)} bytes)")
    return data.decode(errors="replace")


def _write_text(target: Path, content: str) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    except OSError as exc:
        raise ToolError(f"cannot write '{target.name}': {exc.strerror}") from None


def _listing(target: Path) -> str:
    entries = sorted(target.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    lines = []
    for entry in entries[:LIST_LIMIT]:
        if entry.is_symlink():  # its target may be outside the workspace: don't stat it
            lines.append(f"{entry.name}@")
        elif entry.is_dir():
            lines.append(f"{entry.name}/")
        else:
            size = entry.stat().st_size if entry.exists() else 0
            lines.append(f"{entry.name}  {size} B")
    if len(entries) > LIST_LIMIT:
        lines.append(f"[… {len(entries) - LIST_LIMIT} more entries]")
    return "\n".join(lines) or "(empty directory)"


def _search(ws: Workspace, target: Path, regex: re.Pattern[str], glob: str | None) -> str:
    matches: list[str] = []
    for file in _files(target):
        if glob and not file.match(glob):
            continue
        try:
            resolved = ws.resolve(str(file))  # a symlink inside may point outside
            with resolved.open(errors="replace") as fh:
                for number, line in enumerate(fh, 1):
                    if "\x00" in line:
                        break
                    if regex.search(line):
                        matches.append(f"{ws.show(file)}:{number}: {line.rstrip()[:300]}")
                        if len(matches) >= SEARCH_LIMIT:
                            return "\n".join(matches) + f"\n[stopped at {SEARCH_LIMIT} matches]"
        except (ToolError, OSError):
            continue
    return "\n".join(matches) or "no matches"


def _files(target: Path) -> list[Path]:
    if target.is_file():
        return [target]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(target):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        found.extend(Path(dirpath) / name for name in sorted(filenames))
    return found


def _local_zone_name() -> str:
    """The IANA name of the local zone: $TZ, then /etc/localtime's link target, then UTC."""
    tz = os.environ.get("TZ", "").lstrip(":")
    if tz in available_timezones():
        return tz
    try:
        link = os.readlink("/etc/localtime")
    except OSError:
        return "UTC"
    marker = "zoneinfo/"
    name = link.split(marker, 1)[1] if marker in link else ""
    return name if name in available_timezones() else "UTC"
