"""`mcp search QUERY` and `mcp add REGISTRY-NAME`: the MCP Registry from the command line.

Which registry: `--registry URL`, else `[registry] url` in the user's own config.toml
(a folder's settings file may not point the user at another registry), else the
official one. What it answers is untrusted (agent/tools/mcp_registry.py): every line
printed goes through `terminal` (escapes shown inert), `postInstallInstructions` are
shown, never run, and a secret is asked without echo and never printed back.
"""

from __future__ import annotations

import getpass
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

from agent.cli.mcp_files import add_entry, describe
from agent.common.errors import ConfigError
from agent.config.files import user_config_dir
from agent.config.servers import parse_server
from agent.tools.mcp_registry import DEFAULT_REGISTRY, Plan, Registry, plan
from agent.ui.safe import clean, terminal

DESCRIPTION_SHOWN = 200
INSTRUCTIONS_SHOWN = 4000


def registry_url(flag: str | None, environ: dict[str, str]) -> str:
    """--registry, else the user's `[registry] url`, else the official registry."""
    if flag:
        return flag
    folder = user_config_dir(environ)
    path = folder / "config.toml" if folder else None
    if path is None or not path.is_file():
        return DEFAULT_REGISTRY
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("registry") or {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read [registry] ({exc})") from None
    url = table.get("url") if isinstance(table, dict) else None
    if url is not None and not isinstance(url, str):
        raise ConfigError(f"{path}: [registry] url must be a string")
    return url or DEFAULT_REGISTRY


def search_registry(query: str, flag: str | None, limit: int) -> bool:
    """Print the servers whose name holds `query`; False when none does."""
    with Registry(registry_url(flag, dict(os.environ))) as registry:
        found = registry.search(query, limit)
    if not found:
        terminal(f"no server in {registry.base} matches '{query}'")
        return False
    for item in found:
        kinds = f" [{', '.join(item.kinds)}]" if item.kinds else ""
        terminal(f"{item.name} {item.version}{kinds}")
        if item.description:
            terminal(f"  {_cut(item.description, DESCRIPTION_SHOWN)}")
    terminal("add one: run_mcp.py mcp add NAME (from the list above)")
    return True


def add_from_registry(
    name: str,
    path: Path,
    env: list[str],
    flag: str | None,
    local_name: str | None,
    storage: str | None,
    scope: str | None,
) -> None:
    """Fetch `name`'s server.json, ask or take what it needs, and write its entry."""
    given = _given(env)
    at_terminal = sys.stdin.isatty()
    with Registry(registry_url(flag, dict(os.environ))) as registry:
        server = registry.latest(name)
    chosen = plan(server, given, _ask if at_terminal else None)
    saved_as = local_name or name.rsplit("/", 1)[-1]
    if storage is None:
        storage = _ask_storage(chosen) if at_terminal and chosen.secrets else "file"
    if storage not in ("file", "env"):
        raise ConfigError(f"--secrets {storage!r}: use file or env")
    entry = _with_references(chosen) if storage == "env" else chosen.entry
    parse_server(saved_as, {**entry, "enabled": False}, {}, f"mcp add {name}")  # validates
    add_entry(path, saved_as, entry, "choose another: --name NAME")
    terminal(f"added '{name}' {server.get('version', '')} as '{saved_as}' to {path}")
    terminal(f"  from the registry: {chosen.how}")
    for line in describe(saved_as, entry)[1:]:
        terminal(line)
    if storage == "env" and chosen.secrets:
        terminal(f"  set in your environment: {', '.join(chosen.secrets)} (not written)")
    if entry.get("type") in ("http", "sse") and "headers" not in entry:
        terminal(f"  if it asks for a login: run_mcp.py --login {saved_as}")
    if scope == "project":
        terminal(
            "  (the project's .mcp.json is read once this folder is trusted: run_mcp.py trust)"
        )
    if chosen.instructions:
        terminal("its publisher's instructions (shown, not run):")
        for line in _cut(chosen.instructions, INSTRUCTIONS_SHOWN).splitlines():
            terminal(f"  {line}")


def _given(env: list[str]) -> dict[str, str]:
    values = {}
    for item in env:
        key, found, value = item.partition("=")
        if not found or not key.strip():
            raise ConfigError(f"-e {item!r}: expected NAME=VALUE")
        values[key.strip()] = value
    return values


def _ask(
    name: str, description: str, secret: bool, default: str | None, choices: tuple[str, ...]
) -> str | None:
    """One input at the terminal; a secret without echo."""
    hints = [f"one of {', '.join(choices)}"] if choices else []
    if default:
        hints.append(f"default {default}")
    shown = f" ({'; '.join(hints)})" if hints else ""
    said = "" if description == name else f": {_cut(description, DESCRIPTION_SHOWN)}"
    prompt = clean(f"{name}{said}{shown}: ")
    if secret:
        return getpass.getpass(prompt)
    terminal(prompt, end="")
    return sys.stdin.readline().rstrip("\n")


def _ask_storage(chosen: Plan) -> str:
    names = ", ".join(chosen.secrets)
    terminal(
        f"keep {names} in the file (readable only by you) or as ${{VAR}} references to set "
        "in your environment? [file/env] ",
        end="",
    )
    answer = sys.stdin.readline().strip().lower()
    return "env" if answer.startswith("e") else "file"


def _with_references(chosen: Plan) -> dict[str, Any]:
    """The entry with each secret's value replaced by a `${NAME}` reference."""

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            for name, secret in chosen.secrets.items():
                value = value.replace(secret, f"${{{name}}}")
            return value
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    return swap(chosen.entry)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " [...]"
