"""Settings: built once, frozen, passed down explicitly.

Precedence: defaults < config.toml < environment < flags. The mcpServers file uses the
Claude Desktop / Cursor format so users can paste what they already have.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from agent.config_checks import check_keys, check_trust
from agent.config_files import default_files, find_mcp_config
from agent.dialects import Dialects, InputAsker, declared_inputs
from agent.errors import ConfigError
from agent.login_files import stored_secrets
from agent.redact import PATTERNS_ONLY, Redactor, header_secrets, is_secret_name
from agent.saved_approvals import load as load_approvals
from agent.saved_approvals import with_saved as with_saved_approvals
from agent.trust import decide as decide_trust

Transport = Literal["stdio", "sse", "http", "openapi"]
REPO_ROOT = Path(__file__).resolve().parent.parent
# Run as a file with -P: the child imports the agent from this same folder, never from its
# working directory (where a project's own `agent/` package would shadow ours).
BUNDLED_MAIN = REPO_ROOT / "agent" / "server" / "__main__.py"
DEFAULT_CONFIG = Path("config/config.toml")
BUNDLED_SERVER_NAME = "local"

_TYPE_ALIASES: dict[str, Transport] = {
    "stdio": "stdio",
    "sse": "sse",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "openapi": "openapi",
}
# What a stdio server inherits from us: enough to run (PATH is never lost), never our secrets.
_SAFE_ENV_KEYS = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "TMPDIR", "TZ"}
    | {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"}
    | {"http_proxy", "https_proxy", "no_proxy", "all_proxy"}
)
# What a launcher (uvx, npx, pip, node) needs to reach its registry behind a TLS-inspecting
# proxy, and its own settings: certificate bundles, UV_* / PIP_* / NPM_CONFIG_* and the XDG
# folders (where uv and npm keep their caches). Never one whose name says secret
# (UV_INDEX_..._PASSWORD, NPM_CONFIG__AUTHTOKEN) or whose value holds a credential
# (https://user:pass@index/simple): those reach a server only through its own `env`.
_CERT_ENV_KEYS = frozenset(
    {"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}
    | {"NODE_EXTRA_CA_CERTS", "PIP_CERT", "GIT_SSL_CAINFO", "NIX_SSL_CERT_FILE"}
)
_LAUNCHER_ENV_PREFIXES = ("UV_", "PIP_", "PIPX_", "NPM_CONFIG_", "npm_config_", "XDG_")
_SECRETISH = re.compile(r"(?i)auth|token|pass|secret|key|cred")  # glued: NPM_CONFIG__AUTHTOKEN
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_ANY_REF = re.compile(r"\$\{[^}]+\}")  # ours, or another client's (${input:id}, ${env:X})


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelPrice(_Frozen):
    """US dollars per million tokens: prompt (`input`), reply (`output`), and prompt tokens
    served from the provider's cache (`cached`; the input price when not given)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached: float | None = Field(default=None, ge=0)


class LLMSettings(_Frozen):
    """Where the model lives and how to talk to it."""

    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    model: str = "gpt-4o-mini"
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)
    request_timeout: float = Field(default=120.0, gt=0)
    request_deadline: float = Field(default=600.0, gt=0)
    stream: bool = True
    context_window: int = Field(default=128_000, gt=1000)
    # The most prompt tokens (estimated) one sampling request from a server may send.
    sampling_max_prompt_tokens: int = Field(default=16_000, gt=0)
    # Probed for a local server when neither api_key nor base_url is set; [] turns it off.
    local_ports: tuple[int, ...] = (11434, 8080, 1234, 8000)
    # Images from tools to the model: true, false, or "auto" (until the endpoint refuses one).
    vision: bool | Literal["auto"] = "auto"
    # Tool calls a model writes as text (`<tool_call>`, a ```json block...): "auto" runs those
    # naming an offered tool; "text" describes the tools in the system prompt instead of
    # sending `tools` (endpoints without tool support); "native" never reads text calls.
    tool_calls: Literal["auto", "native", "text"] = "auto"
    # Prices by model name ([llm.prices."name"] input/output/cached), over agent/prices.py's
    # defaults for common hosted models; a model with neither costs "unknown".
    prices: dict[str, ModelPrice] = Field(default_factory=dict)


class AgentSettings(_Frozen):
    """How the loop behaves."""

    max_steps: int = Field(default=20, gt=0)
    max_observe: int = Field(default=20_000, gt=100)
    # Older turns are summarised by the model when a request would pass this share of
    # [llm] context_window (0: never; /compact still does it).
    compact_at: float = Field(default=0.8, ge=0, le=1)
    system_prompt: str | None = None
    connect_timeout: float = Field(default=30.0, gt=0)
    tool_timeout: float = Field(default=60.0, gt=0)
    # The longest a tool call that runs as a task may take in all; tool_timeout then bounds
    # each wait for the task's next sign of life (a poll answered).
    task_timeout: float = Field(default=3600.0, gt=0)
    # Tool search: when the servers' declarations exceed tool_search_tokens (default 10% of
    # [llm] context_window, or up to 4,096 while that is at most a quarter of it) or
    # tool_search_tools, the model searches them with find_tools.
    tool_search: Literal["auto", "on", "off"] = "auto"
    tool_search_tokens: int | None = Field(default=None, gt=0)
    tool_search_tools: int = Field(default=64, gt=0)
    pinned_tools: tuple[str, ...] = ()  # public names or globs (`local__*`), always offered
    max_tools_per_server: int = Field(default=1000, gt=0)  # more are cut, with a warning
    # Folders offered as MCP roots to servers that set no `roots` of their own (none by
    # default: a server keeps the folders its own command line gives it).
    roots: tuple[str, ...] = ()


class UISettings(_Frozen):
    """How the terminal front end looks."""

    quiet: bool = False
    verbose: bool = False
    approval: Literal["ask", "yes", "read-only"] = "ask"
    browser: bool = True  # MCP Apps: open app pages in a browser ($BROWSER); else print the URL


class OAuthConfig(_Frozen):
    """How to log in to a remote server (the `oauth` key as an object).

    Everything is optional: with none of it the client registers itself (client ID
    metadata document or dynamic registration) and asks for the scopes the server names.
    """

    scope: str | None = None
    client_id: str | None = None
    client_secret: str | None = Field(default=None, repr=False)
    client_metadata_url: str | None = None
    redirect_port: int | None = Field(default=None, ge=0, le=65535)
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    issuer: str | None = None  # the authorization server that issued client_id/secret

    @model_validator(mode="after")
    def _credentials_for_the_grant(self) -> OAuthConfig:
        if self.grant == "client_credentials" and not (self.client_id and self.client_secret):
            raise ValueError("grant client_credentials needs client_id and client_secret")
        return self

    @field_validator("client_metadata_url")
    @classmethod
    def _https_document(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("https://"):
            raise ValueError("must be an https:// URL of the client ID metadata document")
        return value


class ServerConfig(_Frozen):
    """One tool server, as declared in mcpServers or on the command line."""

    name: str
    type: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    enabled: bool = True
    required: bool = False  # a run without it fails (exit 1); true for the command line's
    timeout: float | None = Field(default=None, gt=0)
    tool_timeout: float | None = Field(default=None, gt=0)
    include_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    # None: decided by the connection (legacy handshake first, 2026-07-28 when it is refused).
    mode: Literal["legacy", "auto", "2026-07-28"] | None = None
    # True / an object: log in with OAuth; False: never. None: on for http and sse servers
    # without an Authorization header (a static header always wins).
    oauth: bool | OAuthConfig | None = None
    path: str = "openapi.json"
    auth_type: Literal["none", "bearer"] | None = None
    key: str | None = Field(default=None, repr=False)
    # Folders offered as MCP roots: a list, false (none), or None ([agent] roots decides).
    # build_settings resolves it to absolute paths, or False.
    roots: tuple[str, ...] | Literal[False] | None = None
    # Tools approved without asking: true (all of this server's), or the server's own names.
    trust: bool | tuple[str, ...] = False
    # The mcpServers file this server was read from (/approve save keys its approvals by it).
    config_file: str | None = Field(default=None, exclude=True)
    # Secrets it holds that no key name says are secret (a masked `${input:...}` answer).
    secrets: tuple[str, ...] = Field(default=(), repr=False, exclude=True)

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("server name must not be empty")
        return value

    def offered_roots(self) -> tuple[Path, ...]:
        """The folders this server is offered as roots (none unless configured)."""
        return tuple(Path(p) for p in self.roots) if self.roots else ()

    def trusts(self, tool: str) -> bool:
        """Whether the user's config approves `tool` (the server's own name) without asking."""
        return self.trust is True or (isinstance(self.trust, tuple) and tool in self.trust)

    def oauth_config(self) -> OAuthConfig | None:
        """The OAuth settings in force for this server, or None when it does not log in."""
        if self.type not in ("http", "sse") or self.oauth is False:
            return None
        if any(k.lower() == "authorization" for k in self.headers):
            return None
        return self.oauth if isinstance(self.oauth, OAuthConfig) else OAuthConfig()

    def wants_tool(self, tool: str) -> bool:
        """Apply include_tools / exclude_tools."""
        if self.include_tools is not None and tool not in self.include_tools:
            return False
        return tool not in self.exclude_tools


class TelemetrySettings(_Frozen):
    """OpenTelemetry traces (agent/telemetry.py); the standard OTEL_* variables work too."""

    endpoint: str | None = None  # OTLP/HTTP base URL: spans go to {endpoint}/v1/traces
    capture_content: bool = False  # prompts, arguments and results in spans, redacted


class Settings(_Frozen):
    """Everything a run needs, resolved once."""

    llm: LLMSettings = LLMSettings()
    agent: AgentSettings = AgentSettings()
    ui: UISettings = UISettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    servers: tuple[ServerConfig, ...] = ()
    state_dir: Path = Path(".")
    workspace: Path = Path(".")
    # Whether the working directory's own files (config/, other clients' project files,
    # hooks, skills) may be used: it is the agent's own folder, or the user trusted it.
    # Anything read from the working directory checks this first (see agent/trust.py).
    workspace_trusted: bool = False
    untrusted_files: tuple[str, ...] = ()  # its own files left unread: it is not trusted
    config_files: tuple[str, ...] = ()  # the files these settings were read from

    def trusts(self, server: str, tool: str) -> bool:
        """Whether the config approves `server`'s own tool `tool` without asking."""
        return any(s.name == server and s.trusts(tool) for s in self.servers)

    def redactor(self, environ: Mapping[str, str] | None = None) -> Redactor:
        """Every secret these settings (and the secret-named variables of `environ`) hold."""
        return Redactor.of(secret_values(self, environ or {}))


def secret_values(settings: Settings, environ: Mapping[str, str]) -> list[str]:
    values: list[str | None] = [settings.llm.api_key]
    for server in settings.servers:
        values += header_secrets(server.headers)
        values.append(server.key)
        if isinstance(server.oauth, OAuthConfig):
            values.append(server.oauth.client_secret)
        values += [v for k, v in server.env.items() if is_secret_name(k)]
        values += server.secrets
    values += [v for k, v in environ.items() if is_secret_name(k) and k.isupper()]
    values += stored_secrets(settings.state_dir)  # tokens kept on disk by earlier logins
    return [v for v in values if v]


# --------------------------------------------------------------------------- expansion


def expand_vars(value: Any, environ: Mapping[str, str], where: str, strict: bool = True) -> Any:
    """Expand ${VAR} and ${VAR:-default} in every string of a JSON-like value.

    Strict: an unset variable without a default is an error naming the key. Lenient (for
    disabled servers) leaves it as written.
    """
    if isinstance(value, str):

        def repl(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in environ and (environ[name] or default is None):
                return environ[name]
            if default is not None:
                return default
            if not strict:
                return match.group(0)
            raise ConfigError(
                f"{where}: environment variable {name} is not set "
                f"(set it, or write ${{{name}:-default}})"
            )

        return _VAR.sub(repl, value)
    if isinstance(value, dict):
        return {k: expand_vars(v, environ, f"{where}.{k}", strict) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_vars(v, environ, f"{where}[{i}]", strict) for i, v in enumerate(value)]
    return value


def server_env(own: Mapping[str, str], parent: Mapping[str, str]) -> dict[str, str]:
    """A stdio server's environment: a safe base from the parent plus its own `env`.

    PATH, locale, proxy and certificate settings survive (a `uvx` or `npx -y` server must
    reach its registry); API keys and other secrets of ours never reach a server unless
    its own `env` names them.
    """
    base = {k: v for k, v in parent.items() if _passed_to_servers(k, v)}
    base.update(own)
    return base


def _passed_to_servers(name: str, value: str) -> bool:
    """The rule of `server_env` for one of our variables (see _CERT_ENV_KEYS)."""
    if name in _SAFE_ENV_KEYS or name.startswith("LC_"):
        return True
    if name not in _CERT_ENV_KEYS and not name.startswith(_LAUNCHER_ENV_PREFIXES):
        return False
    if is_secret_name(name) or _SECRETISH.search(name):
        return False
    return PATTERNS_ONLY(value) == value


# --------------------------------------------------------------------------- mcpServers


def _validation_message(exc: ValidationError, where: str) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"])
    key = f"{where}.{loc}" if loc else where
    return f"{key}: {first['msg']}"


def infer_type(raw: Mapping[str, Any], where: str) -> Transport:
    declared = raw.get("type", raw.get("transport"))
    if declared is not None:
        if not isinstance(declared, str) or declared.lower() not in _TYPE_ALIASES:
            allowed = "stdio, sse, http, openapi"
            raise ConfigError(f"{where}.type: unknown server type {declared!r} (use {allowed})")
        return _TYPE_ALIASES[declared.lower()]
    if "command" in raw:
        return "stdio"
    url = raw.get("url")
    if isinstance(url, str):
        return "sse" if url.rstrip("/").endswith("/sse") else "http"
    raise ConfigError(f"{where}: needs either 'command' (stdio) or 'url' (sse/http/openapi)")


_IGNORED_KEYS = {"type", "transport", "disabled", "description", "autoApprove", "alwaysAllow"}
_NOT_EXPANDED = _IGNORED_KEYS - {"type", "transport"}  # free text and lists we never read


def _entry_keys() -> frozenset[str]:
    internal = {"name", "config_file", "secrets"}
    return frozenset(set(ServerConfig.model_fields) - internal | _IGNORED_KEYS)


_ENTRY_KEYS = _entry_keys()


def parse_server(name: str, raw: Any, environ: Mapping[str, str], where: str) -> ServerConfig:
    """Turn one mcpServers entry into a ServerConfig, or a ConfigError naming the key.

    ${VAR} references expand before the type is decided: `"url": "${SSE_URL}"` is an sse
    server when SSE_URL ends in /sse, and `"type": "${T:-http}"` is a type like any other.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be an object, got {type(raw).__name__}")
    disabled = raw.get("disabled") is True or raw.get("enabled") is False
    kept = {k: v for k, v in raw.items() if k not in _NOT_EXPANDED}
    data = expand_vars(kept, environ, where, strict=not disabled)
    if disabled and _VAR.search(str(data.get("type", data.get("transport", "")))):
        data = {k: v for k, v in data.items() if k not in ("type", "transport")}
    check_keys(raw, _ENTRY_KEYS, where)
    check_trust(data.get("trust"), where)
    kind = infer_type(data, where)
    data = {k: v for k, v in data.items() if k not in _IGNORED_KEYS}
    if disabled:
        data["enabled"] = False
    needed = "command" if kind == "stdio" else "url"
    if not isinstance(data.get(needed), str) or not data[needed].strip():
        raise ConfigError(f"{where}.{needed}: required for a {kind} server")
    try:
        return ServerConfig(name=name, type=kind, **data)
    except ValidationError as exc:
        raise ConfigError(_validation_message(exc, where)) from None
    except TypeError as exc:  # e.g. a key that collides with `name`
        raise ConfigError(f"{where}: {exc}") from None


def load_mcp_config(
    path: Path, environ: Mapping[str, str], dialects: Dialects | None = None
) -> list[ServerConfig]:
    """Read an mcpServers JSON file. Every problem is one ConfigError naming file and key.

    Other clients' words (VS Code's inputs and ${workspaceFolder}, Cursor's envFile,
    Windsurf's serverUrl, Cline's autoApprove) are read as those clients read them
    (agent/dialects.py); `dialects` carries the workspace and who answers `${input:...}`.
    """
    dialects = dialects or Dialects(Path.cwd().resolve(), environ)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read mcp config ({exc.strerror})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    # Claude Desktop / Cursor say "mcpServers"; VS Code's mcp.json says "servers".
    key = (
        "servers"
        if isinstance(doc, dict) and "mcpServers" not in doc and "servers" in doc
        else "mcpServers"
    )
    if not isinstance(doc, dict) or not isinstance(doc.get(key, {}), dict):
        raise ConfigError(f"{path}: expected an object with an 'mcpServers' object")
    if doc and key not in doc:
        found = ", ".join(repr(k) for k in list(doc)[:5])
        raise ConfigError(f"{path}: no 'mcpServers' object (found {found})")
    warn_if_world_readable(path, literal_secrets(doc.get(key), "", key))
    inputs = declared_inputs(doc, path)
    servers = []
    for name, raw in doc.get(key, {}).items():
        where = f"{path}: {key}.{name}"
        entry, secrets = dialects.entry(raw, inputs, where) if isinstance(raw, dict) else (raw, ())
        server = parse_server(name, entry, environ, where)
        servers.append(server.model_copy(update={"config_file": str(path), "secrets": secrets}))
    return servers


def literal_secrets(value: Any, key: str = "", where: str = "") -> list[str]:
    """Where a secret is written out in full, not as a ${VAR} reference.

    Decided per value: a `${...}` elsewhere in the file says nothing about this one. A
    value is a secret when its name says so (api_key, key, Authorization, X-Api-Key,
    GITHUB_TOKEN, DB_PASS...) or when it looks like one (`Bearer ...`, `sk-...`,
    `user:password@host`, `?api_key=...`).
    """
    if isinstance(value, dict):
        return [
            found
            for name, item in value.items()
            for found in literal_secrets(item, str(name), f"{where}.{name}" if where else str(name))
        ]
    if isinstance(value, list):
        return [
            found
            for index, item in enumerate(value)
            for found in literal_secrets(item, key, f"{where}[{index}]")
        ]
    if not isinstance(value, str) or not value.strip() or _ANY_REF.search(value):
        return []
    return [where] if is_secret_name(key) or PATTERNS_ONLY(value) != value else []


def warn_if_world_readable(path: Path, secret_keys: list[str]) -> None:
    """Secrets in a file others can read deserve a warning, not a refusal."""
    try:
        world_readable = bool(path.stat().st_mode & 0o004)
    except OSError:
        return
    if world_readable and secret_keys:
        shown = ", ".join(secret_keys[:3]) + (", ..." if len(secret_keys) > 3 else "")
        print(
            f"warning: {path} holds secrets written out in full ({shown}) and is readable "
            f"by every user (chmod 600 it, or use ${{VAR}} references)",
            file=sys.stderr,
        )


# --------------------------------------------------------------------------- settings


def load_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read settings ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    unknown = set(doc) - {"llm", "agent", "ui", "trust", "telemetry"}  # [trust]: agent/trust.py
    if unknown:
        raise ConfigError(
            f"{path}: unknown section [{sorted(unknown)[0]}] (use [llm] [agent] [ui] [telemetry])"
        )
    secrets = [k for name, table in doc.items() for k in literal_secrets(table, "", f"[{name}]")]
    warn_if_world_readable(path, secrets)
    return doc


def _env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    mapping = {"OPENAI_BASE_URL": "base_url", "OPENAI_API_KEY": "api_key", "OPENAI_MODEL": "model"}
    return {key: environ[var] for var, key in mapping.items() if environ.get(var)}


def default_state_dir(environ: Mapping[str, str]) -> Path:
    if environ.get("MCP_AGENT_STATE_DIR"):
        return Path(environ["MCP_AGENT_STATE_DIR"])
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mcp-agent"


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
    overrides: dict[str, dict[str, Any]] = {"llm": _env_overrides(environ)}
    for name, values in flags.items():
        overrides.setdefault(name, {}).update({k: v for k, v in values.items() if v is not None})
    sections: dict[str, dict[str, Any]] = {"llm": {}, "agent": {}, "ui": {}, "telemetry": {}}
    for name, values in (load_toml(path) if path is not None else {}).items():
        if name == "trust":  # read by agent/trust.py, from the user-level file only
            continue
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: [{name}] must be a table")
        kept = {k: v for k, v in values.items() if k not in overrides.get(name, {})}
        sections[name].update(expand_vars(kept, environ, f"{path}: [{name}]"))
    for name, values in overrides.items():
        sections[name].update(values)
    return sections


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
) -> Settings:
    """The one place settings are resolved: defaults < file < environment < flags.

    `flags` holds per-section overrides from the command line ({"llm": {"model": ...}}).
    Explicit paths must exist; the default paths are used only when present, and the
    working directory's own (`config/`) only when it is trusted (agent/trust.py;
    `trust_workspace` is --trust-workspace).
    """
    root = (workspace or Path.cwd()).resolve()
    state_dir = default_state_dir(environ)
    trust = decide_trust(root, environ, state_dir, flag=trust_workspace, own_root=REPO_ROOT)
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
    except ValidationError as exc:
        section = next(n for n, m in _SECTION_MODELS.items() if exc.title == m.__name__)
        raise ConfigError(_validation_message(exc, f"{where}: [{section}]")) from None

    # VS Code's ${input:...} answers are asked by `ask_input` (None: nobody to ask).
    dialects = Dialects(root, environ, ask_input)
    named_mcp = find_mcp_config(mcp_config_path, environ) if mcp_config_path else None
    mcp_paths = [named_mcp] if named_mcp else default_mcp
    by_name: dict[str, ServerConfig] = {}
    for mcp_path in mcp_paths:  # a later file's entry wins (the project's over the user's)
        by_name.update((s.name, s) for s in load_mcp_config(mcp_path, environ, dialects))
    saved = load_approvals(state_dir)  # /approve save keeps them in a file of our own
    servers = [with_saved_approvals(s, saved) for s in by_name.values()]
    if cli_server is not None:
        if clash := by_name.get(cli_server.name):
            raise ConfigError(
                f"server name '{cli_server.name}' is used in {clash.config_file} and on the "
                "command line"
            )
        servers.append(cli_server)
    enabled = [_with_roots(s, agent.roots, root) for s in servers if s.enabled]
    if not enabled:  # no server at all (or all switched off): the bundled one
        enabled.append(bundled_server(root))
    return Settings(
        llm=llm,
        agent=agent,
        ui=ui,
        telemetry=telemetry,
        servers=tuple(enabled),
        state_dir=state_dir,
        workspace=root,
        workspace_trusted=trust.trusted,
        untrusted_files=trust.unread(named_settings=config_path, named_servers=named_mcp),
        config_files=tuple(str(p) for p in ([path] if path else []) + mcp_paths),
    )


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
}
