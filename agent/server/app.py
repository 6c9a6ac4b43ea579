"""The bundled server's tools, each with honest annotations so approval can trust them.

Read-only tools (read_file, list_dir, search_files, get_current_time) run without asking;
bash, write_file and edit_file change things and are asked about. Errors the model can fix
are raised as ToolError so their text reaches it (MCPServer hides other exceptions' text).

bash runs under the sandbox policy the agent passes (`--sandbox`, agent/common/sandbox.py).
A command the sandbox stopped is offered once to the user (an elicitation: the person at
the agent's terminal answers, never the model) with the access it lacked; otherwise the
model is told what was denied and that the user may widen it.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
import os
import re
import shlex
import stat
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, BinaryIO, TypedDict
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from agent import __version__
from agent.common.sandbox import Denial, Policy, explain, find_denial
from agent.server.shell import ShellResult, run_bash
from agent.server.workspace import Workspace

OUTPUT_CAP = 100_000  # bytes of bash output kept (head + tail)
MAX_RETRY_SHOWN = 2000  # characters of a command the sandbox's retry question shows whole
MAX_BASH_TIMEOUT = 600.0
READ_LIMIT = 2000  # lines per read_file call
MAX_READ_CHARS = 200_000  # bytes of one read_file answer
MAX_EDIT_BYTES = 10_000_000
COUNT_BYTES = 64_000_000  # read_file counts the lines after the range this far, no further
LIST_LIMIT = 1000
SEARCH_LIMIT = 200
SEARCH_TIMEOUT = 10.0
MAX_SEARCH_TIMEOUT = 120.0
SEARCH_WORKER = str(Path(__file__).with_name("search.py"))

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class CurrentTime(TypedDict):
    timezone: str
    datetime: str


class _Retry(BaseModel):
    """The one-off retry question: nothing to fill in, only yes or no."""


def build_server(root: str | os.PathLike[str] = ".", sandbox: Policy | None = None) -> MCPServer:
    """The server with its tools bound to one workspace root; `sandbox`: what bash runs
    under (None: unsandboxed)."""
    ws = Workspace.at(root)
    server = MCPServer(
        "agent-local",
        title="Local workspace tools",
        version=__version__,
        instructions=(
            f"Tools for the workspace at {ws.root}. Paths are relative to it; paths outside it "
            "are refused. Read a file before editing it; edit_file replaces exact text."
            + (
                f" bash runs in a sandbox ({sandbox.summary()}; .git and the agent's config "
                "read-only; secrets hidden)."
                if sandbox is not None and sandbox.mode != "off"
                else ""
            )
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
        ctx: Context | None = None,
    ) -> str:
        """Run a shell command; returns its combined stdout and stderr and the exit code."""
        limit = min(timeout, MAX_BASH_TIMEOUT)
        reported = 0

        async def on_line(line: str) -> None:  # output as progress, when the caller asked
            nonlocal reported
            reported += 1
            if ctx is not None:
                with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                    await ctx.report_progress(reported, None, line)

        result = await run_bash(command, ws.root, limit, OUTPUT_CAP, sandbox, on_line)
        note = ""
        if sandbox is not None and not result.timed_out:
            result, note = await _after_sandbox(ctx, command, result, sandbox, ws.root, limit)
        if result.timed_out:
            raise ToolError(
                f"the command timed out after {limit:g} s; it was killed with every process it "
                f"started. Output so far:\n{result.output or '(none)'}"
            )
        return f"{result.output.rstrip()}\n[exit code {result.exit_code}]\n{note}".strip()

    @server.tool(title="Read a file", annotations=READ_ONLY, structured_output=False)
    async def read_file(
        path: Annotated[str, Field(description="File path relative to the workspace root.")],
        offset: Annotated[int, Field(description="First line to return (1-based).", ge=1)] = 1,
        limit: Annotated[int, Field(description="Most lines to return.", ge=1)] = READ_LIMIT,
    ) -> str:
        """Read a text file, or a range of its lines for large files."""
        target = ws.resolve(path)
        if not target.exists():
            raise await _not_found(ws, path, target)
        return await anyio.to_thread.run_sync(_read_range, target, path, offset, limit)

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
        if target.exists() and not target.is_file():  # opening a FIFO to write would block
            raise ToolError(f"'{path}' is not a regular file")
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
        if not target.exists():
            raise await _not_found(ws, path, target)
        text = await anyio.to_thread.run_sync(_read_text, target, path)
        if not old_text:
            raise ToolError(
                "old_text is empty; give the exact text to replace. To add at the end, give "
                "the file's last line as old_text and that line plus the new text as new_text"
            )
        count = text.count(old_text)
        if count == 0:
            raise ToolError(f"old_text was not found in {path}{_nearest_text(text, old_text)}")
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
        if not target.exists():
            raise await _not_found(ws, path, target, folder=True)
        if not target.is_dir():  # a small model lists a file to see it: say what reads it
            raise ToolError(f"'{path}' is a file, not a directory: read_file reads it")
        return await anyio.to_thread.run_sync(_listing, target)

    @server.tool(title="Search file contents", annotations=READ_ONLY, structured_output=False)
    async def search_files(
        pattern: Annotated[str, Field(description="Regular expression (Python syntax).")],
        path: Annotated[str, Field(description="Directory or file to search.")] = ".",
        glob: Annotated[
            str | None, Field(description="Only files whose name matches, e.g. '*.py'.")
        ] = None,
        timeout: Annotated[
            float, Field(description="Seconds before the search stops.", gt=0)
        ] = SEARCH_TIMEOUT,
    ) -> str:
        """Search text files for a regular expression; returns path:line: text matches."""
        target = ws.resolve(path)
        if not target.exists():
            raise await _not_found(ws, path, target, folder=True)
        limit = min(timeout, MAX_SEARCH_TIMEOUT)
        job: dict[str, object] = {"root": str(ws.root), "target": str(target), "pattern": pattern}
        job |= {"glob": glob, "limit": SEARCH_LIMIT}
        # A worker process: a pathological pattern runs out its deadline there and is
        # killed, instead of holding this server's GIL (see agent/server/search.py).
        worker = shlex.join([sys.executable, "-I", "-S", SEARCH_WORKER, json.dumps(job)])
        result = await run_bash(worker, ws.root, limit, OUTPUT_CAP)
        found = result.output.rstrip()
        if result.exit_code == 2:
            raise ToolError(found)
        if result.timed_out:
            return (
                f"{found}\n[search stopped after {limit:g} s with what it had found: the "
                "pattern may backtrack badly (nested quantifiers such as (a+)+) or the tree "
                "is large; narrow path or glob, or simplify the pattern]"
            ).lstrip()
        return found

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


async def _after_sandbox(
    ctx: Context | None, command: str, result: ShellResult, policy: Policy, root: Path, limit: float
) -> tuple[ShellResult, str]:
    """A result the sandbox stopped: run once more if the user allows the access it lacked,
    with a note for the model either way ("": the sandbox did not stop it)."""
    denial = find_denial(result.output, result.exit_code, policy, str(root))
    if denial is None:
        return result, ""
    wider = _wider(policy, denial)
    if wider is None:
        return result, explain(denial, policy, asked="It cannot be allowed from here.")
    if not await _allowed_once(ctx, command, denial, wider):
        asked = "The user did not allow it (or could not be asked)."
        return result, explain(denial, policy, asked=asked)
    again = await run_bash(command, root, limit, OUTPUT_CAP, wider)
    return again, (
        f"[sandbox: the first run was denied {denial.words()}; the user allowed it once "
        f"({wider.summary()}) and this is the second run's output]"
    )


def _wider(policy: Policy, denial: Denial) -> Policy | None:
    """The policy that would have let the command through (None: only hidden secrets were
    denied, which are never offered). A write whose path could not be told needs writes
    everywhere: the sandbox off for that one run."""
    if not (denial.write or denial.network):
        return None
    needs = denial.needs()
    if "/" in needs:
        return Policy(mode="off", workspace=policy.workspace)
    return policy.widened(needs, network=denial.network)


async def _allowed_once(ctx: Context | None, command: str, denial: Denial, wider: Policy) -> bool:
    """Ask the person at the agent's terminal (an elicitation) whether to run `command`
    once more with `wider`. No client that can ask, or any failure to ask, is a no."""
    # The user says yes to what they read: the whole command, its long blank runs counted
    # (padding cannot push a tail out of sight); one too long to read is not offered.
    shown = re.sub(r"\s{16,}", lambda m: f"⟨{len(m[0]):,} blanks⟩", command)
    if ctx is None or len(shown) > MAX_RETRY_SHOWN:
        return False
    grant = []
    if denial.write:
        needs = denial.needs()
        grant.append("no sandbox" if "/" in needs else f"write access to {', '.join(needs)}")
    if denial.network:
        grant.append("the network")
    message = (
        f"The sandbox stopped this command (it was denied {denial.words()}):\n  {shown}\n"
        f"Run it once more with {' and '.join(grant)}? Only this run; [sandbox] in "
        "config.toml widens it for good."
    )
    try:
        answer = await ctx.elicit(message, _Retry)
    except Exception:  # no elicitation (a script, or a client without it): not allowed
        return False
    return answer.action == "accept"


async def _not_found(ws: Workspace, path: str, target: Path, *, folder: bool = False) -> ToolError:
    """The error for a path that does not exist, naming where the model may have meant (the
    workspace walk runs in a thread)."""
    missing = functools.partial(ws.missing, path, target, folder=folder)
    return ToolError(await anyio.to_thread.run_sync(missing))


def _nearest_text(text: str, wanted: str) -> str:
    """What the file holds nearest to a missing old_text: the same text in another case,
    else the closest line (for a one-line old_text), else how to find it."""
    at = text.lower().find(wanted.lower())
    if at >= 0:
        found = text[at : at + len(wanted)]
        return f" (it is there as {found!r}: the case differs; copy it exactly)"
    if "\n" not in wanted.strip():
        lines = [line for line in text.splitlines() if line.strip()][:5000]
        close = difflib.get_close_matches(wanted.strip(), lines, n=1, cutoff=0.5)
        if close:
            return f"; the closest line is {close[0][:200]!r}: copy it exactly"
    return "; read the file and copy the text exactly"


def _open_regular(target: Path, shown: str) -> BinaryIO:
    """Open a regular file for reading. A FIFO, device or socket is refused, never waited
    on: the open does not block (O_NONBLOCK) and the type is checked on what was opened."""
    if target.is_dir():
        raise ToolError(f"'{shown}' is a directory; use list_dir")
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ToolError(f"'{shown}' does not exist") from None
    except OSError as exc:
        raise ToolError(f"cannot read '{shown}': {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(f"'{shown}' is not a regular file (a FIFO, device or socket)")
    fh = os.fdopen(fd, "rb")
    if b"\x00" in fh.read(8192):
        size = os.fstat(fd).st_size
        fh.close()
        raise ToolError(f"'{shown}' is a binary file ({size} bytes)")
    fh.seek(0)
    return fh


def _read_text(target: Path, shown: str) -> str:
    """A whole file, for edit_file: bounded by MAX_EDIT_BYTES."""
    with _open_regular(target, shown) as fh:
        data = fh.read(MAX_EDIT_BYTES + 1)
    if len(data) > MAX_EDIT_BYTES:
        raise ToolError(f"'{shown}' is larger than {MAX_EDIT_BYTES} bytes; too large to edit")
    return data.decode(errors="replace")


def _read_range(target: Path, shown: str, offset: int, limit: int) -> str:
    """Lines offset..offset+limit-1, streamed: memory is bounded by MAX_READ_CHARS, and the
    file is read no further than the range plus a bounded count of the lines after it."""
    with _open_regular(target, shown) as fh:
        number, at_start, body = 0, True, bytearray()
        while not (at_start and number >= offset - 1 + limit):
            piece = fh.readline(MAX_READ_CHARS + 1)  # a longer line comes in pieces
            if not piece:
                break
            number += at_start
            at_start = piece.endswith(b"\n")
            if number >= offset:
                body += piece
                if len(body) > MAX_READ_CHARS:
                    text = body[:MAX_READ_CHARS].decode(errors="replace")
                    return (
                        f"{text}\n[cut at {MAX_READ_CHARS} characters; read fewer lines with limit]"
                    )
        rest = _count_lines(fh)
    if number < offset and number > 0:
        return f"[offset {offset} is past the end: '{shown}' has {number} lines]"
    text = body.decode(errors="replace")
    if offset == 1 and rest == 0:
        return text
    total = f"more than {number}" if rest is None else str(number + rest)
    more = f"; next: offset={number + 1}" if rest != 0 else ""
    return f"{text}\n[lines {offset}-{number} of {total}{more}]"


def _count_lines(fh: BinaryIO) -> int | None:
    """Lines left in `fh`, or None when there are more than COUNT_BYTES to count."""
    count, seen, tail = 0, 0, b"\n"
    while seen <= COUNT_BYTES and (block := fh.read(1 << 20)):
        count += block.count(b"\n")
        seen, tail = seen + len(block), block[-1:]
    if seen > COUNT_BYTES:
        return None
    return count + (tail != b"\n")


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
