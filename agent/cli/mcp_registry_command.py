"""`mcp search QUERY` and `mcp add REGISTRY-NAME`: the MCP Registry from the command line.

Which registry: `--registry URL`, else `[registry] url` in the user's own config.toml
(a folder's settings file may not point the user at another registry), else the
official one. What it answers is untrusted (agent/tools/mcp_registry.py): every line
printed goes through `terminal` (escapes shown inert), `postInstallInstructions` are
shown, never run, and a secret is asked without echo and never printed back.

What will run is shown before anything is written: the exact command line (a remote: its URL), every
variable with its value unless it is a secret, and, flagged, the loader variables and
docker options the registry chose. At a terminal the user then says yes or no (no by
default when something is flagged); with nobody to ask, a flagged entry is refused with
what to do instead, and any other is written as before.
"""

from __future__ import annotations

import getpass
import os
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

from agent.cli.mcp_files import add_entry
from agent.common.errors import ConfigError
from agent.common.redact import is_secret_name
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
    """Fetch `name`'s server.json, ask or take what it needs, show what will run, and
    write its entry once that is agreed (or, with nobody to ask, nothing needs a look)."""
    given = _given(env)
    at_terminal = sys.stdin.isatty()
    with Registry(registry_url(flag, dict(os.environ))) as registry:
        server = registry.latest(name)
    chosen = plan(server, given, _ask if at_terminal else None, references=storage == "env")
    saved_as = local_name or name.rsplit("/", 1)[-1]
    if storage is None:
        storage = _ask_storage(chosen) if at_terminal and chosen.secrets else "file"
    if storage not in ("file", "env"):
        raise ConfigError(f"--secrets {storage!r}: use file or env")
    entry = _with_references(chosen) if storage == "env" else chosen.entry
    parse_server(saved_as, {**entry, "enabled": False}, {}, f"mcp add {name}")  # validates
    version = str(server.get("version", ""))
    for line in _what_runs(f"{name} {version}", chosen, entry):
        terminal(line)
    unseen = _needs_a_look(chosen)
    if unseen and not at_terminal:
        raise ConfigError(
            f"{name}: the registry's entry sets {unseen}: not added without a look; run this "
            "at a terminal to review and confirm it, or write the entry yourself: "
            "run_mcp.py mcp add-json NAME JSON"
        )
    if at_terminal and not _confirm(f"add '{saved_as}' to {path}?", default=not unseen):
        terminal("not added: nothing written")
        return
    add_entry(path, saved_as, entry, "choose another: --name NAME")
    terminal(f"added '{name}' {version} as '{saved_as}' to {path}")
    _after(saved_as, chosen, entry, storage, scope)


def _what_runs(title: str, chosen: Plan, entry: dict[str, Any]) -> list[str]:
    """What the entry runs or reaches, in full: the command line as it will be started,
    each variable and header with its value (a secret's left out), then what the registry
    chose that reaches past the package, flagged."""
    lines = [f"{title} from the registry: {chosen.how}"]
    if "command" in entry:  # a remote's URL is in `how`
        lines.append(f"  will run: {shlex.join([entry['command'], *entry['args']])}")
    for key in ("env", "headers"):
        if entry.get(key):
            lines.append(f"  {key}: {_values(entry[key], chosen)}")
    for variable, value in chosen.loaders.items():
        lines.append(
            f"  ! loader variable from the registry: {variable}={value} "
            f"(it can make {entry['command']} or the server run other code)"
        )
    if chosen.runner_options:
        lines.append(
            "  ! options to docker itself from the registry: "
            f"{shlex.join(chosen.runner_options)} (they can give the container your files "
            "or more than a container's rights)"
        )
    return lines


def _values(values: dict[str, str], chosen: Plan) -> str:
    """`NAME=value, ...`, a secret's value left out: one asked or given as a secret, one
    holding such a value, or one the user gave under a name that says secret."""
    said = []
    for key, value in values.items():
        references = [f"${{{name}}}" for name in chosen.secrets]
        from_environment = any(reference in value for reference in references)
        secret = key in chosen.secrets or any(v in value for v in chosen.secrets.values())
        if (
            secret
            or from_environment
            or (key not in chosen.chosen_by_registry and is_secret_name(key))
        ):
            how = "from your environment" if from_environment else "not shown"
            said.append(f"{key} (secret, {how})")
        else:
            said.append(f"{key}={value}")
    return ", ".join(said)


def _needs_a_look(chosen: Plan) -> str:
    """What the registry chose beyond the package, in words; empty when nothing."""
    parts = []
    if chosen.loaders:
        parts.append(f"loader variables ({', '.join(chosen.loaders)})")
    if chosen.runner_options:
        parts.append(f"options to docker itself ({shlex.join(chosen.runner_options)[:200]})")
    return " and ".join(parts)


def _confirm(question: str, default: bool) -> bool:
    terminal(f"{question} {'[Y/n]' if default else '[y/N]'} ", end="")
    answer = sys.stdin.readline().strip().lower()
    return answer.startswith("y") if answer else default


def _after(
    saved_as: str, chosen: Plan, entry: dict[str, Any], storage: str, scope: str | None
) -> None:
    """What to do next, and the publisher's instructions (shown, never run)."""
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
