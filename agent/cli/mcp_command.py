"""`run_mcp.py mcp add|list|get|remove`: manage servers without editing JSON.

The convention of Claude Code, Codex and gemini-cli: `mcp add NAME -- CMD ARGS…`,
`mcp add --transport http NAME URL`, `-e KEY=VALUE`, `-H "Name: value"`, `-s user|project`
(user by default). The user scope is the user-level `mcp.json`; the project scope is the
working directory's `.mcp.json` (Claude Code's project file, read once the folder is
trusted). Files are written atomically with their permissions kept (a new one is 0600:
it may hold secrets), through a symlink to the file it points at; env and header values are
never echoed. Everything printed goes through agent.ui.safe's `terminal`: a repository's
`.mcp.json` and a server's stderr may hold escape sequences (a window title, a screen clear,
a clipboard write, text hidden in the very command shown), and they are shown inert.

Kept apart from agent/cli/main.py: main() hands it any command line that starts with `mcp`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from agent.cli.mcp_files import add_entry, describe, read_doc, servers_of, write_doc
from agent.common.errors import ConfigError
from agent.config.build import build_settings
from agent.config.dialects import note
from agent.config.files import user_config_dir
from agent.config.servers import Unusable, parse_server
from agent.ui.safe import terminal

PROJECT_FILE = ".mcp.json"
# What a README's block may carry beside the entry, which Claude Desktop ignores: left out.
IGNORED_WORDS = ("name", "title", "id", "version", "icon", "homepage", "repository", "author")
mcp_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="Manage MCP servers: add, list, get, remove (user scope: the user-level mcp.json; "
    "project scope: ./.mcp.json).",
    context_settings={"help_option_names": ["-h", "--help"]},
)
ScopeOption = Annotated[
    str | None,
    typer.Option("--scope", "-s", help="user (the user-level mcp.json) or project (./.mcp.json)."),
]
RegistryOption = Annotated[
    str | None,
    typer.Option(
        "--registry",
        help="The MCP Registry's URL (default: [registry] url in config.toml, else the "
        "official registry.modelcontextprotocol.io).",
    ),
]


def scope_file(scope: str, environ: dict[str, str]) -> Path:
    """The file a scope writes to."""
    if scope == "project":
        return Path.cwd() / PROJECT_FILE
    if scope != "user":
        raise ConfigError(f"--scope {scope!r}: use user or project")
    folder = user_config_dir(environ)
    if folder is None:
        raise ConfigError("no user config folder: set HOME or MCP_AGENT_CONFIG_DIR")
    return folder / "mcp.json"


def _pairs(values: list[str], sep: str, flag: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, found, rest = value.partition(sep)
        if not found or not key.strip():
            shape = "KEY=VALUE" if sep == "=" else "'Name: value'"
            raise ConfigError(f"{flag} {key.strip() or value!r}: expected {shape}")
        pairs[key.strip()] = rest.strip() if sep == ":" else rest
    return pairs


def new_entry(
    transport: str, target: list[str], env: list[str], headers: list[str]
) -> dict[str, Any]:
    """The mcpServers entry `mcp add` writes (Claude Code's `.mcp.json` shape)."""
    if transport == "stdio":
        if not target:
            raise ConfigError("mcp add NAME -- COMMAND [ARGS…]: the command is missing")
        if headers:
            raise ConfigError("-H is for --transport http or sse servers")
        entry: dict[str, Any] = {"type": "stdio", "command": target[0], "args": target[1:]}
        if env:
            entry["env"] = _pairs(env, "=", "-e")
        return entry
    if transport not in ("http", "sse"):
        raise ConfigError(f"--transport {transport!r}: use stdio, http or sse")
    if len(target) != 1:
        raise ConfigError(f"mcp add --transport {transport} NAME URL: one URL")
    if not target[0].startswith(("http://", "https://")):
        raise ConfigError(f"mcp add {target[0]!r}: the URL must start with http:// or https://")
    if env:
        raise ConfigError("-e is for stdio servers (a remote server takes -H headers)")
    entry = {"type": transport, "url": target[0]}
    if headers:
        entry["headers"] = _pairs(headers, ":", "-H")
    return entry


@mcp_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The server's name (its tools' prefix).")],
    target: Annotated[
        list[str] | None, typer.Argument(help="stdio: -- COMMAND ARGS…; http/sse: the URL.")
    ] = None,
    transport: Annotated[
        str, typer.Option("--transport", "-t", help="stdio (default), http or sse.")
    ] = "stdio",
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="KEY=VALUE for a stdio server.")
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="'Name: value' for http/sse.")
    ] = None,
    scope: ScopeOption = None,
    registry: RegistryOption = None,
    local_name: Annotated[
        str | None,
        typer.Option("--name", help="From the registry: the name to save it under."),
    ] = None,
    secrets: Annotated[
        str | None,
        typer.Option(
            "--secrets",
            help="From the registry: keep secrets in the file (0600) or as ${VAR} references "
            "to set in your environment: file or env (asked at a terminal; default file).",
        ),
    ] = None,
) -> None:
    """Add a server: `mcp add NAME -- CMD ARGS…`, `mcp add --transport http NAME URL`, or
    `mcp add REGISTRY-NAME` (from the MCP Registry: see `mcp search`)."""
    environ = dict(os.environ)
    path = scope_file(scope or "user", environ)
    if not target and transport == "stdio" and ("/" in name or registry):
        from agent.cli.mcp_registry_command import add_from_registry

        add_from_registry(name, path, env or [], registry, local_name, secrets, scope)
        return
    entry = new_entry(transport, target or [], env or [], header or [])
    parse_server(name, {**entry, "enabled": False}, environ, f"mcp add {name}")  # validates
    add_entry(path, name, entry, f"run_mcp.py mcp remove {name} first")
    terminal(f"added {transport} server '{name}' to {path}")
    for line in describe(name, entry)[1:]:
        terminal(line)
    if scope == "project":
        terminal(
            "  (the project's .mcp.json is read once this folder is trusted: run_mcp.py trust)"
        )


def _find(name: str, scope: str | None, environ: dict[str, str]) -> tuple[Path, dict[str, Any]]:
    scopes = [scope] if scope else ["user", "project"]
    found = [
        (path, doc)
        for path in (scope_file(s, environ) for s in scopes)
        if path.exists() and name in servers_of(doc := read_doc(path))
    ]
    if not found:
        looked = ", ".join(str(scope_file(s, environ)) for s in scopes)
        raise ConfigError(f"no server '{name}' in {looked}")
    if len(found) > 1:
        raise ConfigError(
            f"server '{name}' is in {found[0][0]} and {found[1][0]}: add -s user|project"
        )
    return found[0]


@mcp_app.command("get")
def get(name: Annotated[str, typer.Argument()], scope: ScopeOption = None) -> None:
    """Show one server's entry (env and header values are not shown)."""
    path, doc = _find(name, scope, dict(os.environ))
    for line in describe(name, servers_of(doc)[name], str(path)):
        terminal(line)
    terminal(f"  file: {path}")


@mcp_app.command("remove")
def remove(name: Annotated[str, typer.Argument()], scope: ScopeOption = None) -> None:
    """Remove a server from the file it is in."""
    path, doc = _find(name, scope, dict(os.environ))
    del servers_of(doc)[name]
    write_doc(path, doc)
    terminal(f"removed server '{name}' from {path}")


@mcp_app.command("list")
def list_servers() -> None:
    """Every configured server with its live status (each is connected to once), and the
    files left unread; exits 1 when a server failed to connect or cannot be used (an
    unset ${VAR}: the others are still connected to)."""
    environ = dict(os.environ)
    unusable: list[Unusable] = []
    settings = build_settings(
        config_path=None,
        mcp_config_path=None,
        cli_server=None,
        environ=environ,
        unusable=unusable,
    )
    for unread in settings.untrusted_files:  # `mcp get` reads them: say why list does not
        terminal(f"not read: {unread} (this folder is not trusted: run_mcp.py trust)")
    if not unusable and not any(s.config_file for s in settings.servers):
        terminal("no servers configured (add one: run_mcp.py mcp add NAME -- COMMAND ARGS…)")
        return
    redact = settings.redactor(environ)
    lines, failed = anyio.run(_live_status, settings) if settings.servers else ([], False)
    lines += [f"{s.name}: ✗ failed: {s.error}" for s in unusable]  # the error names the file
    for line in lines:
        terminal(line, redact=redact)  # a server's stderr may hold escapes and secrets
    if failed or unusable:
        raise typer.Exit(1)


@mcp_app.command("add-json")
def add_json(
    name: Annotated[str, typer.Argument(help="The server's name (its tools' prefix).")],
    text: Annotated[str, typer.Argument(help="The entry as JSON, as a README shows it.")],
    scope: ScopeOption = None,
) -> None:
    """Add a server from its JSON entry: `mcp add-json NAME '{"command": …}'` (a README's
    `"name": {…}` block and a whole `{"mcpServers": {…}}` are read too)."""
    environ = dict(os.environ)
    path = scope_file(scope or "user", environ)
    entry = pasted_entry(name, text)
    if ignored := [key for key in IGNORED_WORDS if key in entry]:
        note(f"mcp add-json {name}: left out {', '.join(ignored)} (not part of a server's entry)")
        entry = {k: v for k, v in entry.items() if k not in ignored}
    parse_server(name, {**entry, "enabled": False}, environ, f"mcp add-json {name}")
    add_entry(path, name, entry, f"run_mcp.py mcp remove {name} first")
    terminal(f"added server '{name}' to {path}")
    for line in describe(name, entry)[1:]:
        terminal(line)


def pasted_entry(name: str, text: str) -> dict[str, Any]:
    """One server's entry from pasted JSON: the entry itself, `"name": {…}` as a README
    shows it (braces added), `{"name": {…}}`, or `{"mcpServers": {"name": {…}}}`; a
    fragment without `mcpServers` is said in one line."""
    try:
        doc = json.loads(text)
    except ValueError:
        try:
            doc = json.loads("{" + text.strip().rstrip(",") + "}")
        except ValueError as exc:
            raise ConfigError(f"mcp add-json {name}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"mcp add-json {name}: expected a JSON object")
    wrapped = next((k for k in ("mcpServers", "servers") if isinstance(doc.get(k), dict)), None)
    if wrapped is not None:
        doc = doc[wrapped]
    if any(k in doc for k in ("command", "url", "serverUrl", "httpUrl")):
        return doc
    entries = {k: v for k, v in doc.items() if isinstance(v, dict)}
    if name in entries or len(entries) == 1:
        chosen = name if name in entries else next(iter(entries))
        if wrapped is None:
            note(f"mcp add-json {name}: no 'mcpServers' object: read the entry '{chosen}'")
        return dict(entries[chosen])
    listed = ", ".join(entries) or "none"
    raise ConfigError(
        f"mcp add-json {name}: no entry with 'command' or 'url' (entries: {listed}; "
        "name one of them)"
    )


@mcp_app.command("search")
def search(
    query: Annotated[list[str], typer.Argument(help="Words of the server's name.")],
    registry: RegistryOption = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many.")] = 20,
) -> None:
    """Find servers in the MCP Registry by name; `mcp add NAME` adds one."""
    from agent.cli.mcp_registry_command import search_registry

    if not search_registry(" ".join(query), registry, limit):
        raise typer.Exit(1)


async def _live_status(settings: Any) -> tuple[list[str], bool]:
    """A line per server (with the file it came from), and whether any failed."""
    from agent.tools.registry import ToolRegistry  # heavy: only here

    redact = settings.redactor(os.environ)
    failed = False
    async with ToolRegistry(settings) as registry:
        await registry.connect_all()
        lines = []
        for server in registry.servers.values():
            cfg, status = server.config, server.status
            what = cfg.url if cfg.url else " ".join([cfg.command or "", *cfg.args])
            if status.state == "ready":
                state = f"✓ connected ({status.tool_count} tools)"
            else:
                failed = True
                state = f"✗ {status.state}: {status.error}"
            source = f" [{cfg.config_file}]" if cfg.config_file else ""
            lines.append(redact(f"{cfg.name}: {what} ({cfg.type}) - {state}{source}"))
    return lines, failed
