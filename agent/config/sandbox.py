"""What each server runs under, decided once with the rest of the settings.

[sandbox] in config.toml gives the default (mode, network, required, servers, write); a
stdio server's entry may carry its own "sandbox". Resolved here into a `Policy`
(agent/common/sandbox.py) per server: the bundled server gets its shell's policy on its
command line (`--sandbox JSON`: it wraps each command, its file tools are confined to the
workspace already), and a stdio server from config that asks for a sandbox gets
`ServerConfig.policy`, which wraps its whole process (agent/tools/sandbox.py).

Where bubblewrap cannot sandbox (not installed, no user namespaces), the run goes on
unsandboxed after one warning (`Settings.sandbox_problem`, said by the session's start-up),
or refuses to start when `required = true`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from agent.common.errors import ConfigError
from agent.common.sandbox import (
    Policy,
    bwrap_path,
    hidden_paths,
    placeholders,
    protected_paths,
    unavailable,
)
from agent.config.settings import SandboxSettings, ServerConfig

SANDBOX_FLAG = "--sandbox"  # the bundled server's: its shell's policy as JSON


def resolve(
    servers: Iterable[ServerConfig],
    settings: SandboxSettings,
    *,
    root: Path,
    environ: Mapping[str, str],
    hide: Iterable[str] = (),
    protect: Iterable[str] = (),
    bundled_main: str,
) -> tuple[list[ServerConfig], str | None]:
    """The servers with their sandboxes, and why there are none though some were asked for
    (None: bubblewrap works, or nothing asked). `hide`: more secrets (the state folder, the
    user's config folder); `protect`: more read-only files (the config files in use)."""
    servers = list(servers)
    for server in servers:
        if server.sandbox is not None and server.type != "stdio":
            where = server.config_file or "the command line"
            raise ConfigError(
                f"{where}: mcpServers.{server.name}.sandbox: only a stdio server runs here "
                f"and can be sandboxed ('{server.name}' is {server.type})"
            )
    wanted = {s.name: _mode(s, settings, bundled_main) for s in servers}
    if all(mode == "off" for mode in wanted.values()):
        return servers, None
    problem = unavailable(environ.get("PATH"))
    if problem is not None:
        if settings.required:
            raise ConfigError(
                f"[sandbox] required = true but {problem}; install it, or set required = false"
            )
        return servers, problem
    home = Path(environ.get("HOME") or Path.home())
    base = Policy(
        workspace=str(root),
        read_only=protected_paths(root, protect, home),
        hidden=hidden_paths(home, hide),
        bwrap=bwrap_path(environ.get("PATH")),
    )
    return [_sandboxed(s, wanted[s.name], base, settings, bundled_main) for s in servers], None


def placeholders_of(servers: Iterable[ServerConfig]) -> tuple[str, ...]:
    """The protected paths missing now that the servers' sandboxes will cover with an empty
    file (agent/common/sandbox.py `placeholders`): recorded before anything starts, so that
    what bwrap leaves behind is told from a file the user had, and removed at the end."""
    found: list[str] = []
    for server in servers:
        policy = server.policy
        if policy is None and SANDBOX_FLAG in server.args[:-1]:
            try:
                policy = Policy.from_json(server.args[list(server.args).index(SANDBOX_FLAG) + 1])
            except ValueError:
                continue
        if policy is not None:
            found += placeholders(policy)
    return tuple(dict.fromkeys(found))


def unsandboxed_warning(problem: str) -> str:
    """The one line said at start-up when the settings ask for a sandbox it cannot have."""
    return (
        f'sandbox: {problem}; commands run unsandboxed ([sandbox] mode = "off" says so and '
        "stops this warning; required = true refuses to start)"
    )


def _mode(server: ServerConfig, settings: SandboxSettings, bundled_main: str) -> str:
    """The mode `server` (or, for the bundled server, its shell) asks for."""
    if server.type != "stdio":
        return "off"
    if server.sandbox is not None:
        return server.sandbox.mode or settings.mode
    if bundled_main in server.args or settings.servers:
        return settings.mode
    return "off"


def _sandboxed(
    server: ServerConfig, mode: str, base: Policy, settings: SandboxSettings, bundled_main: str
) -> ServerConfig:
    if mode == "off":
        return server
    own = server.sandbox
    network = own.network if own is not None and own.network is not None else settings.network
    write = own.write if own is not None else settings.write
    policy = Policy(
        mode="read-only" if mode == "read-only" else "workspace-write",
        network=network,
        workspace=base.workspace,
        read_only=base.read_only,
        hidden=base.hidden,
        bwrap=base.bwrap,
    ).widened(_absolute(p, Path(base.workspace)) for p in write)  # `.git` listed: writable
    if bundled_main in server.args and own is None:  # its shell wraps each command itself
        if SANDBOX_FLAG in server.args:
            return server
        return server.model_copy(update={"args": (*server.args, SANDBOX_FLAG, policy.to_json())})
    return server.model_copy(update={"policy": policy})


def _absolute(path: str, base: Path) -> str:
    return str((base / Path(path).expanduser()).resolve())
