"""Where users keep their config, and writing back to it.

Finding: besides ./config/, a user-level folder (`$MCP_AGENT_CONFIG_DIR`, else
`$XDG_CONFIG_HOME/mcp-agent`, else `~/.config/mcp-agent`), and the files other MCP clients
keep by name (`--mcp-config claude|cursor|vscode`), so a user points at what they have.

Nothing here writes to these files: `/approve save` keeps its approvals in a file of our
own (agent/saved_approvals.py), since a config may be another program's, or a symlink.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agent.errors import ConfigError

APP_DIR = "mcp-agent"
# Other clients' mcpServers files, by the name a user knows them by; the first that exists
# is read. Relative paths are the project's own (from the working directory).
WELL_KNOWN: dict[str, tuple[str, ...]] = {
    "claude": (
        "~/.config/Claude/claude_desktop_config.json",
        "~/Library/Application Support/Claude/claude_desktop_config.json",
        "$APPDATA/Claude/claude_desktop_config.json",
    ),
    "cursor": (".cursor/mcp.json", "~/.cursor/mcp.json"),
    "vscode": (
        ".vscode/mcp.json",
        "~/.config/Code/User/mcp.json",
        "~/Library/Application Support/Code/User/mcp.json",
        "$APPDATA/Code/User/mcp.json",
    ),
}
# Other clients' project files, read (once the folder is trusted) before our own
# config/mcp.json, whose entry wins for a name in both.
PROJECT_CLIENT_FILES = (".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json")
ALIASES = {"claude-desktop": "claude", "code": "vscode", "vs-code": "vscode"}


def user_config_dir(environ: Mapping[str, str]) -> Path | None:
    """The user's own config folder; None when the environment names no home at all."""
    if environ.get("MCP_AGENT_CONFIG_DIR"):
        return Path(environ["MCP_AGENT_CONFIG_DIR"])
    if environ.get("XDG_CONFIG_HOME"):
        return Path(environ["XDG_CONFIG_HOME"]) / APP_DIR
    if environ.get("HOME"):
        return Path(environ["HOME"]) / ".config" / APP_DIR
    return None


def _place(pattern: str, environ: Mapping[str, str]) -> Path | None:
    if pattern.startswith("~/"):
        home = environ.get("HOME")
        return Path(home) / pattern[2:] if home else None
    if pattern.startswith("$APPDATA/"):
        appdata = environ.get("APPDATA")
        return Path(appdata) / pattern[len("$APPDATA/") :] if appdata else None
    return Path(pattern)


def find_mcp_config(value: Path | str, environ: Mapping[str, str]) -> Path:
    """`--mcp-config`: a well-known client's file by name (claude, cursor, vscode and their
    aliases), or a path. A well-known name is always the name, whatever files the working
    directory holds (a folder's file called `claude` cannot stand in for Claude Desktop's
    config); a file of that name is reached as a path, `./claude`."""
    text = str(value)
    name = ALIASES.get(text.lower(), text.lower())
    if name not in WELL_KNOWN:
        return Path(text)
    places = [p for p in (_place(pat, environ) for pat in WELL_KNOWN[name]) if p is not None]
    for place in places:
        if place.is_file():
            return place
    looked = ", ".join(str(p) for p in places)
    local = f"; the file {text} here is ./{text}" if Path(text).is_file() else ""
    raise ConfigError(f"--mcp-config {text}: no {name} config found (looked in {looked}{local})")


def default_files(
    environ: Mapping[str, str], project: Path | None
) -> tuple[Path | None, list[Path]]:
    """The settings file and the mcpServers files read when none is named.

    Settings: `./config/config.toml`, else the user's `config.toml` (one file: a project
    that has its own settings means them). Servers: the user's `mcp.json` and then
    `./config/mcp.json`, both (the project's entry wins for a name in both): servers a user
    keeps for every project stay available in each; before `./config/mcp.json`, other
    clients' project files (Claude Code's `.mcp.json`, `.cursor/mcp.json`,
    `.vscode/mcp.json`). `project` is None while the working directory is not trusted:
    then only the user's own files.
    """
    user = user_config_dir(environ)
    own = [project] if project is not None else []
    tomls = [*(p / "config.toml" for p in own), *([user / "config.toml"] if user else [])]
    toml = next((p for p in tomls if p.is_file()), None)
    clients = [p.parent / name for p in own for name in PROJECT_CLIENT_FILES]
    servers = [*([user / "mcp.json"] if user else []), *clients, *(p / "mcp.json" for p in own)]
    return toml, [p for p in servers if p.is_file()]
