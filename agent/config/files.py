"""Where users keep their config, and writing back to it.

Finding: besides ./config/, a user-level folder (`$MCP_AGENT_CONFIG_DIR`, else
`$XDG_CONFIG_HOME/mcp-agent`, else `~/.config/mcp-agent`), and the user-level files other
MCP clients keep by name (`--mcp-config claude|claude-code|cursor|vscode|windsurf|cline|
zed|codex|gemini|goose|opencode`), each from the places that client documents, so a
user points at what they have. A client's name never reaches the working directory: a
cloned repository's `.cursor/mcp.json` is its own file, read only once the folder is
trusted (agent/config/trust.py) or when the user names it by its path.

Which value wins: the environment's OPENAI_* over a file's [llm] (`env_overrides`,
`from_file`), one rule that the settings and the trust question (agent/config/trust.py) share.

Nothing here writes to these files: `/approve save` keeps its approvals in a file of our
own (agent/config/saved_approvals.py), since a config may be another program's, or a symlink.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.common.errors import ConfigError

APP_DIR = "mcp-agent"
# Other clients' user-level mcpServers files, by the name a user knows them by; the first
# that exists is read. Never a project's own file: those go through workspace trust.
WELL_KNOWN: dict[str, tuple[str, ...]] = {
    "claude": (
        "~/.config/Claude/claude_desktop_config.json",
        "~/Library/Application Support/Claude/claude_desktop_config.json",
        "$APPDATA/Claude/claude_desktop_config.json",
    ),
    "cursor": ("~/.cursor/mcp.json",),
    "vscode": (
        "~/.config/Code/User/mcp.json",
        "~/Library/Application Support/Code/User/mcp.json",
        "$APPDATA/Code/User/mcp.json",
    ),
    # Claude Code's user and per-folder ("local") servers: agent/config/clients.py
    "claude-code": ("~/.claude.json",),
    "windsurf": ("~/.codeium/windsurf/mcp_config.json",),
    "cline": (  # the VS Code extension's file, then the Cline CLI's
        "~/.config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
        "~/Library/Application Support/Code/User/globalStorage/saoudrizwan.claude-dev/"
        "settings/cline_mcp_settings.json",
        "$APPDATA/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
        "~/.cline/data/settings/cline_mcp_settings.json",
    ),
    "zed": (
        "$XDG_CONFIG_HOME/zed/settings.json",
        "~/.config/zed/settings.json",
        "$APPDATA/Zed/settings.json",
    ),
    "codex": ("$CODEX_HOME/config.toml", "~/.codex/config.toml"),
    "gemini": ("~/.gemini/settings.json",),
    "goose": (
        "$XDG_CONFIG_HOME/goose/config.yaml",
        "~/.config/goose/config.yaml",
        "$APPDATA/Block/goose/config/config.yaml",
    ),
    "opencode": (
        "$OPENCODE_CONFIG",
        "$XDG_CONFIG_HOME/opencode/opencode.json",
        "$XDG_CONFIG_HOME/opencode/opencode.jsonc",
        "~/.config/opencode/opencode.json",
        "~/.config/opencode/opencode.jsonc",
    ),
}
# Other clients' project files, read (once the folder is trusted) before our own
# config/mcp.json, whose entry wins for a name in both.
PROJECT_CLIENT_FILES = (".mcp.json", ".cursor/mcp.json", ".vscode/mcp.json")
# A client's project file, named in the error of `--mcp-config NAME` when only it exists.
PROJECT_FILE_OF = {
    "cursor": ".cursor/mcp.json",
    "vscode": ".vscode/mcp.json",
    "claude-code": ".mcp.json",
}
ALIASES = {
    "claude-desktop": "claude",
    "code": "vscode",
    "vs-code": "vscode",
    "claudecode": "claude-code",
    "claude_code": "claude-code",
    "gemini-cli": "gemini",
    "codex-cli": "codex",
    "roo": "cline",
}
# A variable that names a client's folder (or, for $OPENCODE_CONFIG, its file).
_PLACE_VARS = ("$APPDATA", "$XDG_CONFIG_HOME", "$CODEX_HOME", "$OPENCODE_CONFIG")


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
    """A user-level place: under $HOME, or a folder a variable names ($APPDATA,
    $XDG_CONFIG_HOME, $CODEX_HOME; None when the environment does not set it)."""
    if pattern.startswith("~/"):
        home = environ.get("HOME")
        return Path(home) / pattern[2:] if home else None
    for var in _PLACE_VARS:
        if pattern == var or pattern.startswith(f"{var}/"):
            base = environ.get(var[1:])
            rest = pattern[len(var) + 1 :]
            return (Path(base) / rest if rest else Path(base)) if base else None
    raise ValueError(f"not a user-level place: {pattern}")  # WELL_KNOWN holds only those


def client_name(value: Path | str) -> str | None:
    """The well-known client `--mcp-config` names (WELL_KNOWN's keys), or None (a path)."""
    text = str(value).lower()
    name = ALIASES.get(text, text)
    return name if name in WELL_KNOWN else None


def find_mcp_config(value: Path | str, environ: Mapping[str, str]) -> Path:
    """`--mcp-config`: a well-known client's user-level file by name (WELL_KNOWN's keys and
    their aliases), or a path. A well-known name is always the name, whatever files the
    working directory holds: neither a folder's file called `claude` nor its
    `.cursor/mcp.json` can stand in for the user's own (those are reached by their path,
    `./claude`, `.cursor/mcp.json`, or through workspace trust)."""
    text = str(value)
    name = client_name(text)
    if name is None:
        return Path(text)
    places = [p for p in (_place(pat, environ) for pat in WELL_KNOWN[name]) if p is not None]
    for place in places:
        if place.is_file():
            return place
    looked = ", ".join(str(p) for p in places) or "nowhere: HOME is not set"
    local = f"; the file {text} here is ./{text}" if Path(text).is_file() else ""
    project = PROJECT_FILE_OF.get(name)
    if project is not None and Path(project).is_file():
        local += (
            f"; this folder's own {project} is read once you trust the folder, or name it: "
            f"--mcp-config {project}"
        )
    raise ConfigError(f"--mcp-config {text}: no {name} config found (looked in {looked}{local})")


# The OPENAI_* variables every OpenAI-compatible tool reads, and the [llm] key each sets.
LLM_ENV = {"OPENAI_BASE_URL": "base_url", "OPENAI_API_KEY": "api_key", "OPENAI_MODEL": "model"}


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """The [llm] values the environment sets; each wins over a settings file's."""
    return {key: environ[var] for var, key in LLM_ENV.items() if environ.get(var)}


def from_file(table: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The values of a settings file's table that are used: those no override replaces.

    The one statement of the precedence (file < environment < flags): the settings apply
    it, and the trust question decides with it whose key would go to a folder's endpoint.
    """
    return {k: v for k, v in table.items() if k not in overrides}


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
