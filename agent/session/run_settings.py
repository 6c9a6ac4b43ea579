"""A session's Settings from the command line's options, and the folder's trust settled
before any server starts: the same for every front end that opens a session (the CLI's
run, `batch`, `serve`, `acp`, and the Python API, whose keywords are these options).

`SESSION_OPTIONS` names the options (as `run`'s parameters: `max_steps` is `--max-steps`)
with their defaults. agent/cli/main.py's `run` declares each as a flag with its help, and
its other options are about one run's input and output (`--prompt`, `--output`, ...);
tests/api/test_api.py holds the two in step. Here, below the front ends, so that the
Python API resolves its settings without importing the command line.

May import: ui, loop and everything below them (the session layer). Never cli or api.
"""

from __future__ import annotations

import getpass
import shlex
import sys
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from agent.common.errors import ConfigError
from agent.config.build import build_settings
from agent.config.servers import infer_type
from agent.config.settings import ServerConfig, Settings
from agent.config.trust import STORE_NAME, WORKSPACE_FILES, decide, hint, remember
from agent.config.trust_listing import question, with_changes

CLI_SERVER_NAME = "main"

# The options that shape a session, and their defaults; a list option's default is ().
SESSION_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {
        "connection": None,
        "server_url": None,
        "server_command": None,
        "header": (),
        "server_name": CLI_SERVER_NAME,
        "mcp_config": None,
        "servers": None,
        "config": None,
        "model": None,
        "base_url": None,
        "max_steps": None,
        "yes": False,
        "allowed_tools": (),
        "disallowed_tools": (),
        "resume": None,
        "all_folders": False,
        "quiet": False,
        "verbose": False,
        "no_browser": False,
        "trust_workspace": False,
    }
)


def parse_header(value: str) -> tuple[str, str]:
    name, sep, rest = value.partition(":")
    if not sep or not name.strip():
        raise ConfigError(f"--header {value!r}: expected 'Name: value'")
    return name.strip(), rest.strip()


def cli_server(
    connection: str | None,
    server_url: str | None,
    server_command: str | None,
    headers: list[str],
    name: str,
) -> ServerConfig | None:
    """The server named on the command line, if any. Without --connection: stdio, or for
    --server-url what the mcpServers file would infer (`.../sse` is sse, else http)."""
    if connection is None:
        connection = "stdio" if not server_url else infer_type({"url": server_url}, "--server-url")
    if connection not in ("stdio", "sse", "http", "openapi"):
        raise ConfigError(f"--connection {connection!r}: use stdio, sse, http or openapi")
    parsed = dict(parse_header(h) for h in headers)
    if connection == "stdio":
        if server_url:
            raise ConfigError("--server-url needs --connection sse, http or openapi")
        if parsed:
            raise ConfigError("--header is for sse, http or openapi servers (see --connection)")
        if server_command is None:
            return None
        try:
            argv = shlex.split(server_command)
        except ValueError as exc:
            raise ConfigError(f"--server-command: {exc}") from None
        if not argv:
            raise ConfigError("--server-command is empty")
        return ServerConfig(
            name=name, type="stdio", command=argv[0], args=tuple(argv[1:]), required=True
        )
    if not server_url:
        raise ConfigError(f"--connection {connection} needs --server-url URL")
    if not server_url.startswith(("http://", "https://")):
        raise ConfigError(f"--server-url {server_url!r}: must start with http:// or https://")
    return ServerConfig(name=name, type=connection, url=server_url, headers=parsed, required=True)  # type: ignore[arg-type]


def resolve_settings(opts: dict[str, Any], environ: dict[str, str]) -> Settings:
    """The Settings of a session opened with these options (`SESSION_OPTIONS`' names)."""
    try:
        server = cli_server(
            opts["connection"],
            opts["server_url"],
            opts["server_command"],
            opts["header"],
            opts["server_name"],
        )
    except ValidationError as exc:  # ServerConfig's rules for a name: not blank, not 'agent'
        said = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise ConfigError(f"--server-name {opts['server_name']!r}: {said}") from None
    flags = {
        "llm": {"model": opts["model"], "base_url": opts["base_url"]},
        "agent": {
            "max_steps": opts["max_steps"],
            "allowed_tools": tuple(opts["allowed_tools"]) or None,
            "disallowed_tools": tuple(opts["disallowed_tools"]) or None,
        },
        "ui": {
            "quiet": opts["quiet"] or None,
            "verbose": opts["verbose"] or None,
            "approval": "yes" if opts["yes"] else None,
            "browser": False if opts["no_browser"] else None,
        },
    }
    return build_settings(
        config_path=opts["config"],
        mcp_config_path=opts["mcp_config"],
        cli_server=server,
        environ=environ,
        flags=flags,
        workspace=opts.get("workspace"),  # `acp`: each session's cwd
        trust_workspace=opts["trust_workspace"],
        ask_input=ask_at_terminal if sys.stdin.isatty() else None,
        only=tuple(n.strip() for n in (opts.get("servers") or "").split(",") if n.strip()),
    )


def ask_at_terminal(input_id: str, description: str, password: bool) -> str:
    """VS Code's `${input:ID}`: asked here once per run, hidden when it is a password."""
    from agent.ui.safe import clean, terminal  # late: a run loads rich only when it needs it

    hidden = ", hidden" if password else ""
    prompt = f"{clean(description)} (input '{clean(input_id)}'{hidden}): "  # from a file
    if password:
        return getpass.getpass(prompt)
    terminal(prompt, err=True, end="")
    return sys.stdin.readline().rstrip("\n")


def settle(
    settings: Settings,
    environ: Mapping[str, str],
    *,
    ask: bool,
    trusted: Callable[[], Settings],
) -> Settings:
    """The run's settings once the folder's trust is settled (before any server starts).

    An untrusted folder with files of its own: the REPL asks (unless the answer was
    "never", or a file is one the question cannot read: then it says so in one line, and
    the run goes on with the folder untrusted); any other run says in one stderr line what
    was ignored and how to trust. `trusted` builds the settings again with the folder trusted.
    """
    if settings.workspace_trusted or not settings.untrusted_files:
        return settings
    from agent.ui.safe import terminal  # cleaned: a folder's name, a file's words may hold escapes

    # Its envFiles the servers would read are in untrusted_files beside its own files.
    env_files = tuple(f for f in settings.untrusted_files if f not in WORKSPACE_FILES)
    found = decide(settings.workspace, environ, settings.state_dir, env_files=env_files)
    shown = question(found, environ)
    if not ask or found.never or shown.unreadable:
        terminal(hint(found, environ, shown), err=True)
        return settings
    from prompt_toolkit import PromptSession

    from agent.ui.safe import SafeConsole
    from agent.ui.trust_question import ask_trust

    lines = with_changes(found, shown.lines)
    reply = ask_trust(found, lines, SafeConsole(stderr=True), PromptSession())
    if reply == "not now":
        return settings
    try:
        remember(settings.state_dir, found.folder, reply, found, shown)
    except OSError as exc:
        where = settings.state_dir / STORE_NAME
        terminal(f"warning: cannot remember it in {where}: {exc.strerror}", err=True)
    return trusted() if reply == "trust" else settings
