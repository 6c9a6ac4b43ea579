"""Servers started through a launcher that installs them first (`npx -y`, `uvx`, ...).

The first start of such a server downloads a package (desktop-commander: 95 s) before the
server says a word. That wait is not a dead server: it gets a longer connect limit than
`[agent] connect_timeout` (unless its own `timeout` is set), the user is told what is
happening once the wait gets noticeable, and a connect that still runs out names the
`timeout` key that lets it wait longer.
"""

from __future__ import annotations

from pathlib import PurePath

from agent.config.settings import ServerConfig

LAUNCHER_CONNECT_TIMEOUT = 180.0  # seconds: a first download of a large package
SLOW_START_NOTICE = 5.0  # seconds before "still starting" is said
# command -> the subcommand that installs-then-runs ("" when the command alone does).
_INSTALLING = {
    "npx": "",
    "uvx": "",
    "bunx": "",
    "pipx": "run",
    "pnpm": "dlx",
    "yarn": "dlx",
    "npm": "exec",
    "uv": "tool",
    "docker": "run",
    "podman": "run",
}


def installing_launcher(config: ServerConfig) -> str | None:
    """The launcher's words (`npx`, `pipx run`) when `config` starts one that installs."""
    if config.type != "stdio" or not config.command:
        return None
    name = PurePath(config.command).name.lower().removesuffix(".cmd").removesuffix(".exe")
    if name not in _INSTALLING:
        return None
    sub = _INSTALLING[name]
    if not sub:
        return name
    return f"{name} {sub}" if config.args[:1] == (sub,) else None


def connect_timeout(config: ServerConfig, default: float) -> float:
    """The connect limit for `config`: its own `timeout`, else longer for a launcher."""
    if config.timeout is not None:
        return config.timeout
    if installing_launcher(config):
        return max(default, LAUNCHER_CONNECT_TIMEOUT)
    return default


def slow_start_message(config: ServerConfig, waited: float, limit: float) -> str | None:
    """What to tell the user while a launcher's server has not answered yet."""
    launcher = installing_launcher(config)
    if launcher is None:
        return None
    return (
        f"server '{config.name}' is still starting after {waited:g} s: {launcher} may be "
        f"downloading it (first start); waiting up to {limit:g} s"
    )


def timeout_hint(config: ServerConfig) -> str:
    """How to let a server that ran out of connect time wait longer."""
    where = (
        f'raise "timeout" (seconds) in its entry in {config.config_file}'
        if config.config_file
        else 'raise its "timeout" (seconds) in the mcpServers file, or [agent] connect_timeout'
    )
    launcher = installing_launcher(config)
    if launcher:
        return f"{launcher} may still be downloading it: run it once at a terminal, or {where}"
    return f"if it is slow to start, {where}"
