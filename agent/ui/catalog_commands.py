"""`/resources`, `/prompts` and `/prompt NAME key=value ...` (or `/NAME`): what the servers
offer besides tools, as the session's catalog (agent/tools/catalog.py) lists it.

Each listing asks the servers again first (a server may publish more at any time), says
which server failed to answer, and shows only the server named, if one is. A prompt is
fetched with its arguments (a missing required one is asked for, through the REPL's
`question`), its earlier messages go into memory as context, and its last one is run as a
turn (`run_turn`), the two callables agent/ui/commands.py hands on.

May import: the loop and everything below it (the ui layer).
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Iterator

from rich.console import Console
from rich.text import Text

from agent.common.memory import Memory
from agent.tools.catalog import Catalog
from agent.tools.registry import ToolRegistry
from agent.ui import listings

Question = Callable[[str], Awaitable[str | None]]


async def list_resources(
    console: Console, registry: ToolRegistry, catalog: Catalog, server: str
) -> None:
    """`/resources [server]`: resources and templates (attached with @server:uri), and how
    many app pages there are (they are for the app host, never attached)."""
    if not await _refreshed(console, registry, catalog, server):
        return
    shown = listings.show_resources(
        console,
        [(name, r) for name, r in catalog.resources if not server or name == server],
        [(name, t) for name, t in catalog.templates if not server or name == server],
    )
    if shown:
        console.print(Text("attach one to a request with @server:uri", style="dim"))
    else:
        console.print(Text("no resources", style="dim"))
    pages = [r for name, r in catalog.app_pages if not server or name == server]
    if pages:  # ui:// pages are for the app host, never attached
        console.print(Text(f"{len(pages)} app page(s) (MCP Apps): /apps", style="dim"))


async def list_prompts(
    console: Console, registry: ToolRegistry, catalog: Catalog, server: str
) -> None:
    """`/prompts [server]`."""
    if not await _refreshed(console, registry, catalog, server):
        return
    prompts = [(name, p) for name, p in catalog.prompts if not server or name == server]
    if not listings.show_prompts(console, prompts):
        console.print(Text("no prompts", style="dim"))


async def run_prompt(
    console: Console,
    catalog: Catalog,
    memory: Memory,
    arg: str,
    question: Question,
    run_turn: Callable[[str], Awaitable[None]],
) -> None:
    """Fetch an MCP prompt (asking for missing required arguments) and run it as a turn."""
    name, _, rest = arg.partition(" ")
    if not name:
        console.print(Text("usage: /prompt NAME key=value ...", style="yellow"))
        return
    found = catalog.find_prompt(name)
    if isinstance(found, str):  # maybe published since the last listing
        await catalog.refresh()
        found = catalog.find_prompt(name)
    if isinstance(found, str):
        console.print(Text(found, style="yellow"))
        return
    server, prompt = found
    try:
        arguments = dict(_key_values(rest))
    except ValueError as exc:
        console.print(Text(str(exc), style="yellow"))
        return
    for spec in prompt.arguments or []:
        if spec.required and not arguments.get(spec.name):
            hint = f" ({spec.description})" if spec.description else ""
            value = await question(f"{spec.name}{hint}: ")
            if not value:
                console.print(Text("prompt cancelled", style="dim"))
                return
            arguments[spec.name] = value
    try:
        messages = await catalog.get_prompt(server, prompt.name, arguments)
    except LookupError as exc:
        console.print(Text(str(exc), style="red"))
        return
    if not messages:
        console.print(Text("the prompt has no messages", style="yellow"))
        return
    *earlier, (role, last) = messages
    for earlier_role, text in earlier:  # context before the request itself
        if earlier_role == "assistant":
            memory.add_assistant(text)
        else:
            memory.add_user(text)
    if role == "assistant":
        memory.add_assistant(last)
        last = "Continue."
    await run_turn(last)


async def _refreshed(
    console: Console, registry: ToolRegistry, catalog: Catalog, server: str
) -> bool:
    """Re-list for /resources and /prompts; False (said why) for an unknown server."""
    if server and server not in registry.servers:
        known = ", ".join(registry.servers)
        console.print(Text(f"no server named {server!r} (servers: {known})", "yellow"))
        return False
    with console.status(Text("listing…", style="dim")):
        await catalog.refresh()
    for name, error in catalog.errors.items():
        if not server or name == server:
            console.print(Text(f"{name}: {registry.redact(error)}", "yellow"))
    return True


def _key_values(text: str) -> Iterator[tuple[str, str]]:
    """`key=value` pairs; values may be quoted to hold spaces."""
    for token in shlex.split(text):
        key, eq, value = token.partition("=")
        if not eq or not key:
            raise ValueError(f"'{token}' is not key=value")
        yield key, value
