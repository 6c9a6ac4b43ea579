"""Settings: built once, frozen, passed down explicitly.

The schema only: what a run's settings are, their defaults and limits, and the secrets
they hold. Where they come from (defaults < config.toml < environment < flags) is
agent/config/build.py; the mcpServers file (the Claude Desktop / Cursor format, so users
paste what they have) is read by agent/config/servers.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from agent.common.redact import Redactor, header_secrets, is_secret_name
from agent.common.sandbox import Policy
from agent.config.login_files import stored_secrets

Transport = Literal["stdio", "sse", "http", "openapi"]
SandboxMode = Literal["workspace-write", "read-only", "off"]


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
    # Prices by model name ([llm.prices."name"] input/output/cached), over agent/model/prices.py's
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
    # [llm] context_window, or up to 30% of it while that is at most 8,192) or
    # tool_search_tools, the model searches them with find_tools.
    tool_search: Literal["auto", "on", "off"] = "auto"
    tool_search_tokens: int | None = Field(default=None, gt=0)
    tool_search_tools: int = Field(default=64, gt=0)
    pinned_tools: tuple[str, ...] = ()  # public names or globs (`local__*`), always offered
    max_tools_per_server: int = Field(default=1000, gt=0)  # more are cut, with a warning
    # Folders offered as MCP roots to servers that set no `roots` of their own (none by
    # default: a server keeps the folders its own command line gives it).
    roots: tuple[str, ...] = ()
    # Tools run without asking / never run nor offered to the model (globs over `server__tool`
    # and Claude Code's `mcp__server__tool`); --allowed-tools / --disallowed-tools add to them.
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    # The agent's own update_plan tool: "auto" offers it from a 32,768-token [llm]
    # context_window (a small model's prompt and tools stay as they were); true, false.
    plan: bool | Literal["auto"] = "auto"
    # The agent's own task tool (sub-agents): "auto" offers it when an agent is defined or
    # from a 32,768-token [llm] context_window; true, false.
    subagents: bool | Literal["auto"] = "auto"


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


class SandboxSettings(_Frozen):
    """[sandbox]: what commands run under (bubblewrap, Linux; see docs/sandbox.md).

    `mode` and `network` are the bundled server's shell's, and the default of a stdio
    server whose entry says `"sandbox": true` (or of every stdio server, with `servers`).
    `required`: refuse to start where bubblewrap cannot sandbox, instead of one warning.
    """

    mode: SandboxMode = "workspace-write"
    network: bool = False
    required: bool = False
    # Stdio servers from config whose entry has no "sandbox" key: sandboxed under `mode`
    # (true) or not (false: a server's own caches, e.g. ~/.npm, would be read-only).
    servers: bool = False
    write: tuple[str, ...] = ()  # more folders the shell may write (~ and relative allowed)


class ServerSandbox(_Frozen):
    """A stdio server's own `"sandbox"`: its mode (None: [sandbox] mode), its network
    (None: [sandbox] network) and more folders it may write."""

    mode: SandboxMode | None = None
    network: bool | None = None
    write: tuple[str, ...] = ()


# The server the agent's own tools (find_tools, read_result, ...) are reported under in
# events, hooks and results: a configured server of that name would pass for them (its
# refused calls uncounted, hooks matching it as the agent's own), so none may take it.
AGENT_SERVER = "agent"


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
    # Its entry's "sandbox" (None: [sandbox] servers decides); build_settings resolves it
    # into `policy`, what its process runs under (None: not sandboxed).
    sandbox: ServerSandbox | None = None
    policy: Policy | None = Field(default=None, exclude=True)
    # The mcpServers file this server was read from (/approve save keys its approvals by it).
    config_file: str | None = Field(default=None, exclude=True)
    # Secrets it holds that no key name says are secret (a masked `${input:...}` answer).
    secrets: tuple[str, ...] = Field(default=(), repr=False, exclude=True)

    @field_validator("name")
    @classmethod
    def _name_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("server name must not be empty")
        if value == AGENT_SERVER:  # every door builds a ServerConfig: files, flags, editors
            raise PydanticCustomError(
                "reserved_name",
                f"'{AGENT_SERVER}' is the name of the agent's own tools (in hooks, approvals "
                "and results): give this server another name",
            )
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
    """OpenTelemetry traces (agent/extensions/telemetry.py); the standard OTEL_* variables
    work too."""

    endpoint: str | None = None  # OTLP/HTTP base URL: spans go to {endpoint}/v1/traces
    capture_content: bool = False  # prompts, arguments and results in spans, redacted


class Settings(_Frozen):
    """Everything a run needs, resolved once."""

    llm: LLMSettings = LLMSettings()
    agent: AgentSettings = AgentSettings()
    ui: UISettings = UISettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    sandbox: SandboxSettings = SandboxSettings()
    # Why commands run unsandboxed though the settings ask for a sandbox (no bwrap, no
    # user namespaces); None: it works, or nothing asked for it.
    sandbox_problem: str | None = None
    # Protected paths missing at start that a sandbox covers with an empty file while it
    # runs (agent/config/sandbox.py `placeholders_of`): removed when the session ends.
    sandbox_placeholders: tuple[str, ...] = ()
    servers: tuple[ServerConfig, ...] = ()
    state_dir: Path = Path(".")
    workspace: Path = Path(".")
    # Whether the working directory's own files (config/, other clients' project files,
    # hooks, skills) may be used: it is the agent's own folder, or the user trusted it.
    # Anything read from the working directory checks this first (see agent/config/trust.py).
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
    """Every value to mask wherever we write: keys and headers from the config, masked
    input answers, secret-named variables, and the tokens earlier logins stored on disk."""
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
