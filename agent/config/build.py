"""Where a run's Settings come from, resolved in one place: defaults < config.toml <
environment < flags.

build_settings reads the settings file and the mcpServers files (agent/config/servers.py)
that trust allows (agent/config/trust.py, agent/config/files.py), adds the server named on the
command line, the saved approvals and each server's roots, and falls back to the bundled
server when none is left.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from agent.common.errors import ConfigError
from agent.config.dialects import Dialects, InputAsker, InputUnavailable, note, warning
from agent.config.files import (
    client_name,
    default_files,
    env_overrides,
    find_mcp_config,
    from_file,
    user_config_dir,
)
from agent.config.sandbox import placeholders_of
from agent.config.sandbox import resolve as resolve_sandbox
from agent.config.saved_approvals import load as load_approvals
from agent.config.saved_approvals import with_saved as with_saved_approvals
from agent.config.servers import (
    Unusable,
    default_state_dir,
    expand_vars,
    literal_secrets,
    load_mcp_config,
    validation_message,
    warn_if_world_readable,
)
from agent.config.settings import (
    AgentSettings,
    LLMSettings,
    SandboxSettings,
    ServerConfig,
    Settings,
    TelemetrySettings,
    UISettings,
)
from agent.config.trust import Trust
from agent.config.trust import decide as decide_trust

REPO_ROOT = Path(__file__).resolve().parents[2]
# Run as a file with -P: the child imports the agent from this same folder, never from its
# working directory (where a project's own `agent/` package would shadow ours).
BUNDLED_MAIN = REPO_ROOT / "agent" / "server" / "__main__.py"
DEFAULT_CONFIG = Path("config/config.toml")
BUNDLED_SERVER_NAME = "local"
# List settings a flag adds to rather than replaces: `--disallowed-tools` must not lift
# what the settings file disallows.
ADDITIVE_KEYS = frozenset({"allowed_tools", "disallowed_tools"})


def load_toml(path: Path) -> dict[str, Any]:
    """The settings file as tables; an unknown section is an error (a typo would otherwise
    be ignored), and secrets written out in a world-readable file are warned about."""
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read settings ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    unknown = set(doc) - {
        "llm",
        "agent",
        "ui",
        "trust",
        "telemetry",
        "sandbox",
        "registry",
    }  # [trust]: agent/config/trust.py; [registry]: agent/cli/mcp_command.py
    if unknown:
        raise ConfigError(
            f"{path}: unknown section [{sorted(unknown)[0]}] "
            "(use [llm] [agent] [ui] [telemetry] [sandbox] [registry])"
        )
    secrets = [k for name, table in doc.items() for k in literal_secrets(table, "", f"[{name}]")]
    warn_if_world_readable(path, secrets)
    return doc


def bundled_server(workspace: Path) -> ServerConfig:
    """The embedded default server, run with this interpreter so no install is needed.

    `-P` keeps the working directory off the child's sys.path; the file itself puts the
    folder it lives in first (agent/server/__main__.py), so the child runs this agent's
    code from a clone, a worktree or an install alike.
    """
    return ServerConfig(
        name=BUNDLED_SERVER_NAME,
        type="stdio",
        command=sys.executable,
        args=("-P", str(BUNDLED_MAIN), "--root", str(workspace)),
    )


def _resolve_sections(
    path: Path | None, environ: Mapping[str, str], flags: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per-section values: file < environment < flags.

    File strings expand ${VAR} / ${VAR:-default} as mcp.json does, so `api_key =
    "${MYKEY}"` sends the key, not the reference. A value the environment or a flag
    overrides is not expanded: an unset variable it names does not matter.
    """
    overrides: dict[str, dict[str, Any]] = {"llm": dict(env_overrides(environ))}
    for name, values in flags.items():
        overrides.setdefault(name, {}).update({k: v for k, v in values.items() if v is not None})
    sections: dict[str, dict[str, Any]] = {
        "llm": {},
        "agent": {},
        "ui": {},
        "telemetry": {},
        "sandbox": {},
    }
    for name, values in (load_toml(path) if path is not None else {}).items():
        if name in ("trust", "registry"):  # agent/config/trust.py; `mcp search` / `mcp add`
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: [{name}] must be a table")
        replaced = {k: v for k, v in overrides.get(name, {}).items() if k not in ADDITIVE_KEYS}
        kept = from_file(values, replaced)
        sections[name].update(expand_vars(kept, environ, f"{path}: [{name}]"))
    for name, values in overrides.items():
        for key in ADDITIVE_KEYS & values.keys() & sections[name].keys():  # flags add to these
            values = {**values, key: (*_listed(sections[name][key]), *values[key])}
        sections[name].update(values)
    return sections


def _listed(value: Any) -> tuple[Any, ...]:
    """A file's list setting as a tuple (a lone string is one item, as pydantic would not)."""
    return tuple(value) if isinstance(value, list | tuple) else (value,)


def build_settings(
    *,
    config_path: Path | None,
    mcp_config_path: Path | str | None,
    cli_server: ServerConfig | None,
    environ: Mapping[str, str],
    flags: Mapping[str, Mapping[str, Any]] | None = None,
    workspace: Path | None = None,
    trust_workspace: bool = False,
    ask_input: InputAsker | None = None,
    only: tuple[str, ...] = (),
    unusable: list[Unusable] | None = None,
) -> Settings:
    """The one place settings are resolved: defaults < file < environment < flags.

    `flags` holds per-section overrides from the command line ({"llm": {"model": ...}}).
    Explicit paths must exist; the default paths are used only when present, and the
    working directory's own (`config/`) only when it is trusted (agent/config/trust.py;
    `trust_workspace` is --trust-workspace). `only`: --servers, the configured servers
    to connect to by name (the command line's own server is always kept). A server this
    run cannot use (an unset `${VAR}`) is left out with a warning, or put in `unusable`
    for a caller that says it in its own words (`mcp list`).
    """
    root = (workspace or Path.cwd()).resolve()
    state_dir = default_state_dir(environ)
    named_mcp = find_mcp_config(mcp_config_path, environ) if mcp_config_path else None
    if mcp_config_path and client_name(mcp_config_path):  # a name: say which file it meant
        note(f"--mcp-config {mcp_config_path}: reading {named_mcp}")
    trust = workspace_trust(root, environ, state_dir, named_mcp=named_mcp, flag=trust_workspace)
    project = DEFAULT_CONFIG.parent if root == Path.cwd().resolve() else root / "config"
    default_toml, default_mcp = default_files(environ, project if trust.trusted else None)
    path = config_path or default_toml
    sections = _resolve_sections(path, environ, flags or {})
    where = str(path) if path else "settings"
    try:
        llm = LLMSettings(**sections["llm"])
        agent = AgentSettings(**sections["agent"])
        ui = UISettings(**sections["ui"])
        telemetry = TelemetrySettings(**sections["telemetry"])
        sandbox = SandboxSettings(**sections["sandbox"])
    except ValidationError as exc:
        section = next(n for n, m in _SECTION_MODELS.items() if exc.title == m.__name__)
        raise ConfigError(validation_message(exc, f"{where}: [{section}]")) from None

    # VS Code's ${input:...} answers are asked by `ask_input` (None: nobody to ask); an
    # envFile in the working directory is read only once it is trusted.
    dialects = Dialects(root, environ, ask_input, trusted=trust.trusted)
    mcp_paths = [named_mcp] if named_mcp else default_mcp
    skipped: list[Unusable] = []
    servers = _configured_servers(mcp_paths, environ, dialects, state_dir, cli_server, skipped)
    if only:
        servers = pick_servers(servers, only, [s.name for s in skipped])
        skipped = [s for s in skipped if s.name in only]
    enabled = [_with_roots(s, agent.roots, root) for s in servers if s.enabled]
    _say_unusable(skipped, servers, named=named_mcp is not None, alone=not enabled, out=unusable)
    if not enabled and not skipped:  # no server at all (or all switched off): the bundled one
        enabled.append(bundled_server(root))
    enabled, sandbox_problem = resolve_sandbox(
        enabled,
        sandbox,
        root=root,
        environ=environ,
        hide=[str(state_dir), *([str(user)] if (user := user_config_dir(environ)) else [])],
        protect=[str(p) for p in ([path] if path else []) + mcp_paths],
        bundled_main=str(BUNDLED_MAIN),
    )
    return Settings(
        llm=llm,
        agent=agent,
        ui=ui,
        telemetry=telemetry,
        sandbox=sandbox,
        sandbox_problem=sandbox_problem,
        sandbox_placeholders=placeholders_of(enabled),
        servers=tuple(enabled),
        state_dir=state_dir,
        workspace=root,
        workspace_trusted=trust.trusted,
        untrusted_files=trust.unread(named_settings=config_path, named_servers=named_mcp),
        config_files=tuple(str(p) for p in ([path] if path else []) + mcp_paths),
    )


def workspace_trust(
    root: Path,
    environ: Mapping[str, str],
    state_dir: Path,
    *,
    named_mcp: Path | None = None,
    flag: bool = False,
) -> Trust:
    """Whether `root`'s own files may be used, with every file of it a run would read once
    trusted: its config files, and the envFiles that the servers files (the user's own,
    the named one, the folder's) name inside it. Those are what the trust question shows
    and what the remembered trust's digest covers (agent/config/trust.py)."""
    project = DEFAULT_CONFIG.parent if root == Path.cwd().resolve() else root / "config"
    candidates = [named_mcp] if named_mcp else default_files(environ, project)[1]
    env_files = Dialects(root, environ).workspace_env_files(candidates)
    return decide_trust(
        root, environ, state_dir, flag=flag, own_root=REPO_ROOT, env_files=env_files
    )


def _configured_servers(
    mcp_paths: list[Path],
    environ: Mapping[str, str],
    dialects: Dialects,
    state_dir: Path,
    cli_server: ServerConfig | None,
    skipped: list[Unusable],
) -> list[ServerConfig]:
    """The mcpServers files' servers with their saved approvals, then the command line's.

    The rule for a name in several files: the later file's entry wins (the user's
    `mcp.json` < `.mcp.json` < `.cursor/mcp.json` < `.vscode/mcp.json` < `config/mcp.json`),
    and a warning names the entry it overrides. An entry that cannot be used in this run
    goes to `skipped` (an earlier file's entry of that name, if any, is used), unless a
    later file overrides it anyway. The command line's server may not reuse a name a
    file gives.
    """
    by_name: dict[str, ServerConfig] = {}
    for mcp_path in mcp_paths:
        found: list[Unusable] = []
        loaded = load_mcp_config(mcp_path, environ, dialects, found)
        for server in loaded:
            if (earlier := by_name.get(server.name)) is not None:
                warning(
                    f"server '{server.name}': the entry in {mcp_path} overrides the one in "
                    f"{earlier.config_file} (the later file wins)"
                )
            by_name[server.name] = server
        overridden = {s.name for s in loaded} | {s.name for s in found}
        skipped[:] = [*(s for s in skipped if s.name not in overridden), *found]
    saved = load_approvals(state_dir)  # /approve save keeps them in a file of our own
    servers = [with_saved_approvals(s, saved) for s in by_name.values()]
    if cli_server is not None:
        if clash := by_name.get(cli_server.name):
            raise ConfigError(
                f"server name '{cli_server.name}' is used in {clash.config_file} and on the "
                "command line"
            )
        servers.append(cli_server)
    return servers


def _say_unusable(
    skipped: list[Unusable],
    servers: list[ServerConfig],
    *,
    named: bool,
    alone: bool,
    out: list[Unusable] | None,
) -> None:
    """The servers this run wanted but cannot use, once it is known which it wanted
    (none excluded by --servers; switched-off ones never get here). Each is a warning
    naming the server and the variable, and the others run; it is the error when the
    run needs it: `"required": true`, a named file's `${input:...}` (as before), or
    nothing else left to run. `out` (`mcp list`) takes them instead, to show as failed."""
    if out is not None:
        out.extend(skipped)
        return
    for entry in skipped:
        kept = next((s for s in servers if s.name == entry.name), None)
        fatal = entry.required or (named and isinstance(entry.error, InputUnavailable))
        if (fatal or alone) and kept is None:
            raise entry.error
        instead = f"; using the one in {kept.config_file}" if kept else ""
        warning(f"server '{entry.name}' skipped: {entry.error}{instead}")


def pick_servers(
    servers: list[ServerConfig], names: tuple[str, ...], unusable: list[str] | None = None
) -> list[ServerConfig]:
    """`--servers a,b`: only the configured servers named (switched-off ones included: a
    name picks it), in the files' order; a name no file gives is an error listing them
    (one the run cannot use, `unusable`, is given: build_settings says why it is left out)."""
    known = {s.name: s for s in servers if s.config_file is not None}
    unknown = [n for n in names if n not in known and n not in (unusable or [])]
    if unknown:
        listed = ", ".join([*known, *(n for n in unusable or [] if n not in known)]) or "none"
        raise ConfigError(f"--servers {unknown[0]}: no such server (configured: {listed})")
    picked = [s.model_copy(update={"enabled": True}) for s in known.values() if s.name in names]
    return picked + [s for s in servers if s.config_file is None]  # the command line's


def _with_roots(server: ServerConfig, default: tuple[str, ...], base: Path) -> ServerConfig:
    """The server's roots as absolute folders (`~` expanded, relative to `base`), or False.

    No roots unless configured: a server given folders on its command line (the Claude
    Desktop way, e.g. server-filesystem's `args`) would otherwise have them replaced by ours.
    """
    chosen = default if server.roots is None else server.roots
    if not chosen:
        return server.model_copy(update={"roots": False})
    paths = tuple(str((base / Path(p).expanduser()).resolve()) for p in chosen)
    return server.model_copy(update={"roots": paths})


_SECTION_MODELS: dict[str, type[BaseModel]] = {
    "llm": LLMSettings,
    "agent": AgentSettings,
    "ui": UISettings,
    "telemetry": TelemetrySettings,
    "sandbox": SandboxSettings,
}
