"""What /tools, /servers, /tasks, /resources, /prompts and /hooks show: rows for
`layout.show_table`, and one tool in full.

Kept apart from the REPL's command plumbing: these only read what they are given (the
registry's tools and statuses, the catalog's listings) and print it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence

import anyio
from mcp import types
from rich.console import Console
from rich.text import Text

from agent.config.settings import ServerConfig, Settings
from agent.extensions.hook_files import HookSet
from agent.tools.base import ServerStatus
from agent.tools.sandbox import runs_under, shell_policy
from agent.tools.tasks import TaskState
from agent.tools.toolspec import ToolSpec
from agent.ui.layout import Cell, Column, Indented, show_table
from agent.ui.safe import clean, page

DESCRIPTION_CUT = 100  # characters of a description's first line in a listing
STATE_STYLES = {
    "ready": "green",
    "failed": "red",
    "down": "red",
    "lost": "yellow",
    "reconnecting": "yellow",
}
TASK_STYLES = {
    "working": "cyan",
    "input_required": "yellow",
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
}


def own_name(public: str, spec: ToolSpec) -> str:
    """The server's own name of a tool whose public name is not `<server>__<tool>` (a name
    the model's API could not take, or one two servers would share); else ""."""
    return "" if public == f"{spec.server}__{spec.name}" else spec.name


def find_tools(tools: Mapping[str, ToolSpec], name: str) -> list[tuple[str, ToolSpec]]:
    """The tool with this public name, else every tool its server calls `name`."""
    if name in tools:
        return [(name, tools[name])]
    return [(public, spec) for public, spec in tools.items() if spec.name == name]


def hint_words(spec: ToolSpec) -> list[str]:
    """The tool's MCP annotations as words (unset ones read as the spec's cautious defaults)."""
    words = ["read-only" if spec.read_only else "writes"]
    if not spec.read_only:
        words.append("destructive" if spec.destructive else "not destructive")
    if spec.idempotent:
        words.append("idempotent")
    words.append("open world" if spec.open_world else "closed world")
    return words


def show_tools(
    console: Console,
    tools: Mapping[str, ToolSpec],
    server: str = "",
    app_only: Sequence[ToolSpec] = (),
) -> None:
    """The model's tools (`+ app`: it comes with an MCP App's page), then the tools only
    an app's page may call, by `server › tool` since the model has no name for them."""
    listed = [(p, s) for p, s in tools.items() if not server or s.server == server]
    listed += [(f"{s.server} › {s.name}", s) for s in app_only if not server or s.server == server]
    renamed = any(own_name(p, s) for p, s in listed)
    columns = [
        Column("name", key=True),
        *([Column("server's name", label="server's name")] if renamed else []),
        Column("title"),
        Column("hints", stacked="head"),
        Column("description"),
    ]
    rows = []
    for public, spec in listed:
        hints = "read-only" if spec.read_only else ("destructive" if spec.destructive else "writes")
        if not spec.for_model:
            hints += ", app only"
        elif spec.app_uri:
            hints += " + app"
        desc = spec.description.strip().splitlines()[0] if spec.description.strip() else ""
        if len(desc) > DESCRIPTION_CUT:
            desc = desc[: DESCRIPTION_CUT - 1].rstrip() + "…"
        own = [own_name(public, spec) if spec.for_model else ""] if renamed else []
        rows.append([public, *own, spec.title or "", hints, desc])
    show_table(console, columns, rows)


Listing = Callable[[Console], None]


async def fit_or_page(console: Console, *listings: Listing) -> None:
    """The first listing that fits on the screen, printed; when none does (at a terminal),
    the last, most compact one through the pager, so nothing scrolls out of sight unread.
    Into a pipe or a file, or on a dumb terminal, everything is printed whole."""
    if not console.is_terminal or console.is_dumb_terminal:  # no pager to drive there
        listings[0](console)
        return
    room = console.size.height - 2  # the command line above, the prompt below
    for listing in listings:
        with console.capture() as captured:
            listing(console)
        text = captured.get()
        if text.count("\n") <= room:
            listing(console)
            return
    if not await anyio.to_thread.run_sync(page, text):
        listings[-1](console)


def show_tool_names(
    console: Console, tools: Mapping[str, ToolSpec], app_only: Sequence[ToolSpec] = ()
) -> None:
    """The compact listing, when the full one would not fit on the screen: each server's
    tools by the server's own names, wrapped at spaces, and how to see them in full."""
    by_server: dict[str, list[str]] = {}
    for spec in [*tools.values(), *app_only]:
        by_server.setdefault(spec.server, []).append(spec.name)
    for server, names in by_server.items():
        head = Text(clean(server), style="bold")
        head.append(f" · {len(names)} tools · /tools {clean(server)} for details", style="dim")
        console.print(head)
        console.print(Indented(Text("  ".join(clean(n) for n in names)), 2))


def no_tools_said(statuses: Sequence[ServerStatus], server: str = "") -> str:
    """Why there is nothing to list, and what brings tools back."""
    if server:
        state = next((st.state for st in statuses if st.name == server), "unknown")
        if state == "closed":
            return f"no tools: server '{server}' is off (/servers enable {server})"
        return f"no tools from '{server}' (state: {state}; /servers shows why)"
    if not statuses:
        return "no tools: no server is configured (run_mcp.py mcp add NAME -- COMMAND)"
    off = [st.name for st in statuses if st.state == "closed"]
    if len(off) == len(statuses):
        names = ", ".join(off)
        return f"no tools: every server is off ({names}); /servers enable NAME turns one on"
    states = ", ".join(f"{st.name} {st.state}" for st in statuses)
    return f"no tools: {states} (/servers shows why; /servers enable NAME)"


def show_tool(console: Console, public: str, spec: ToolSpec, *, asks: bool) -> None:
    """One tool in full: both names, title, hints, description and input schema."""
    head = Text(public, style="bold")
    head.append(f"  ({spec.server} › {spec.name})")
    console.print(head)
    if spec.title:
        console.print(Text(spec.title))
    hints = ", ".join(hint_words(spec))
    approval = "asks before it runs" if asks else "runs without asking"
    console.print(Text(f"hints: {hints}; {approval}", style="dim"))
    if spec.app_uri:
        console.print(Text(f"comes with an app: {spec.app_uri} (/app {public})", style="dim"))
    console.print(Text(spec.description.strip() or "(no description)"))
    schema = json.dumps(spec.input_schema, indent=2, ensure_ascii=False)
    console.print(Text(schema, style="dim"))


def show_servers(
    console: Console,
    statuses: Sequence[ServerStatus],
    auth: Mapping[str, str] | None = None,
    sandbox: Mapping[str, str] | None = None,
) -> None:
    """`auth`: how each remote server logs in (logged in, needs login, static header...);
    `sandbox`: what each runs under (agent/tools/sandbox.py `runs_under`)."""
    auth = {k: v for k, v in (auth or {}).items() if v}
    sandbox = sandbox or {}
    columns = [
        Column("server", key=True),
        Column("transport", stacked="head"),
        Column("state", stacked="head"),
        Column("tools", stacked="head", label="tools"),
        Column("restarts", stacked="head", label="restarts"),
        *([Column("auth", label="auth")] if auth else []),
        *([Column("sandbox", stacked="head", label="sandbox")] if sandbox else []),
        Column("last error", label="last error"),
    ]
    rows: list[list[Cell]] = []
    for st in statuses:
        # After a successful reconnect the last error is history: shown, but dimmed.
        error_style = "dim" if st.state == "ready" else ""
        rows.append(
            [
                st.name,
                st.transport,
                Text(st.state, style=STATE_STYLES.get(st.state, "")),
                str(st.tool_count),
                str(st.restarts),
                *([Text(auth.get(st.name, ""))] if auth else []),
                *([Text(sandbox.get(st.name, ""))] if sandbox else []),
                Text(st.error or "", style=error_style),
            ]
        )
    show_table(console, columns, rows)
    for st in statuses:  # the era and extensions: under the table, which stays narrow
        if st.protocol:
            extensions = f"; extensions: {', '.join(st.extensions)}" if st.extensions else ""
            console.print(Text(f"{st.name} speaks MCP {st.protocol}{extensions}", "dim"))
    for st in statuses:  # which of several files a server came from (issue 31)
        if st.source:
            console.print(Text(f"{st.name} from {st.source}", "dim"))
    for st in statuses:
        if st.card:  # SEP-2127: what the host says it serves
            console.print(Text(f"server card of {st.name}: {st.card}", "dim"))
        if st.state in ("down", "failed") and st.stderr_tail:
            console.print(Text(f"last stderr of {st.name}:", style="bold"))
            console.print(Indented(Text("\n".join(st.stderr_tail), style="dim"), 2))


def show_sandbox(console: Console, configs: Sequence[ServerConfig], settings: Settings) -> None:
    """/sandbox: what each server runs under, the defaults, and how to widen them."""
    rows: list[list[Cell]] = [
        [c.name, Text(runs_under(c, settings.sandbox_problem))] for c in configs
    ]
    show_table(console, [Column("server", key=True), Column("runs under")], rows)
    own = settings.sandbox
    said = f"[sandbox] mode = {own.mode}, network = {str(own.network).lower()}, "
    said += f"required = {str(own.required).lower()}, servers = {str(own.servers).lower()}"
    console.print(Text(said, style="dim"))
    if settings.sandbox_problem:
        console.print(Text(f"not sandboxed: {settings.sandbox_problem}", style="yellow"))
    policy = next((p for c in configs if (p := c.policy or shell_policy(c))), None)
    if policy is not None:
        console.print(Text(f"read-only: {_present(policy.read_only)}", "dim"))
        console.print(Text(f"hidden (secrets): {_present(policy.hidden)}", "dim"))
    console.print(
        Text(
            "A command the sandbox stops is offered to you once with the access it lacked; "
            'to widen it for good: [sandbox] in config.toml, or the "sandbox" key of a '
            "server's entry (docs/sandbox.md).",
            style="dim",
        )
    )


def _present(paths: Sequence[str]) -> str:
    """The paths that exist (only those are mounted), or "none"."""
    return ", ".join(p for p in paths if os.path.exists(p)) or "none"


def show_resources(
    console: Console,
    resources: Sequence[tuple[str, types.Resource]],
    templates: Sequence[tuple[str, types.ResourceTemplate]],
) -> bool:
    """False when there is nothing to show."""
    columns = [
        Column("resource", key=True),
        Column("name", stacked="head"),
        Column("type", stacked="head"),
    ]
    rows: list[list[str]] = [
        [f"@{server}:{r.uri}", r.name, r.mime_type or ""] for server, r in resources
    ]
    rows += [[f"@{server}:{t.uri_template}", f"{t.name} (template)", ""] for server, t in templates]
    if rows:
        show_table(console, columns, rows)
    return bool(rows)


def show_prompts(console: Console, prompts: Sequence[tuple[str, types.Prompt]]) -> bool:
    """False when there is nothing to show."""
    columns = [
        Column("prompt", key=True),
        Column("server", stacked="head", style="dim"),
        Column("arguments", label="arguments"),
        Column("description"),
    ]
    rows = []
    for server, prompt in prompts:
        args = " ".join(f"{a.name}{'' if a.required else '?'}" for a in prompt.arguments or [])
        desc = (prompt.description or "").strip().splitlines()
        rows.append([prompt.name, server, args, desc[0] if desc else ""])
    if rows:
        show_table(console, columns, rows)
    return bool(rows)


def show_hooks(console: Console, hookset: HookSet) -> None:
    """The active hooks (event, matcher, command, timeout, file) and what was left out."""
    columns = [
        Column("event", key=True),
        Column("matcher", stacked="head"),
        Column("timeout", stacked="head", label="timeout"),
        Column("command", label="command"),
        Column("from", label="from", style="dim"),
    ]
    rows = [
        [h.event, h.matcher or "*", f"{h.timeout:g} s", h.command, h.source] for h in hookset.hooks
    ]
    if rows:
        show_table(console, columns, rows)
    else:
        console.print(Text("no hooks are active (hooks.json in the user config folder)"))
    for note in (*hookset.ignored, *hookset.notes):
        console.print(Text(note, style="yellow"))


def show_tasks(console: Console, tasks: Sequence[TaskState]) -> bool:
    """Running tasks first, then the recent ones; False when there is nothing to show."""
    columns = [
        Column("task", key=True),
        Column("tool", stacked="head"),
        Column("status", stacked="head"),
        Column("time", stacked="head"),
        Column("message", label="message"),
    ]
    ordered = [t for t in tasks if t.running] + [t for t in tasks if not t.running]
    rows: list[list[Cell]] = [
        [
            clean(t.task_id),
            clean(f"{t.server} › {t.tool}" if t.tool else f"{t.server} (listed by it)"),
            Text(t.status, style=TASK_STYLES.get(t.status, "")),
            f"{t.elapsed():.1f} s",
            Text(clean(t.message or "")),
        ]
        for t in ordered
    ]
    if rows:
        show_table(console, columns, rows)
    return bool(rows)
