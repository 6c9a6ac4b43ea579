"""The MCP Registry API (`/v0.1/servers`, server.json): finding a server, and the
mcpServers entry that runs it.

What VS Code and Copilot CLI install from. `search` lists the latest version of the
servers whose name holds the words; `latest` fetches one server.json; `plan` turns it
into an entry: a remote first (http, or sse; OAuth is the connection's, at first use),
else a package run pinned to its version (npm -> `npx -y id@version`, pypi -> `uvx
id==version`, oci -> `docker run -i --rm image:version`). The variables, headers and
arguments it needs come from `given` (the user's `-e NAME=VALUE`) or `ask` (a terminal);
a required one that neither gives is an error naming the `-e` to add.

The pin holds: a package id must be a bare name (an image may carry its version as its
tag, as the official registry asks, or a digest, but never one that would run instead of
the `version` given), `runtimeArguments` for npx or uvx are refused (each of their options
can name another package, index or source), docker's are handed back as
`runner_options` for the caller to show and ask about, as are the loader and runner
variables whose value the registry chose (`NODE_OPTIONS`, `UV_INDEX_URL`, `DOCKER_HOST`).

Everything here is the registry's data, untrusted: text is returned for the caller to
clean before printing (agent/ui/safe.py), a package id or version is one argument of the
command (never a shell word: stdio servers are started without a shell), and
`postInstallInstructions` is text to show, never something to run. Its answers are read
bounded: redirects only within the registry's host (at most MAX_REDIRECTS), the body
streamed and cut at MAX_BYTES and DEADLINE, JSON no deeper than MAX_DEPTH; each breach is
one ConfigError line.
"""

from __future__ import annotations

import re
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2

from agent.common import json_limits
from agent.common.errors import ConfigError
from agent.config.server_env import is_loader_variable

DEFAULT_REGISTRY = "https://registry.modelcontextprotocol.io"
TIMEOUT = 20.0  # each connect, read or write
DEADLINE = 60.0  # one whole answer, redirects included (a body sent a byte at a time)
MAX_BYTES = 4 * 1024 * 1024  # a page of 100 server.json is ~0.5 MB
MAX_REDIRECTS = 5
MAX_DEPTH = 64  # a server.json is ~6 deep
# (name, description, secret, default, choices) -> the answer, or None: nobody to ask
Asker = Callable[[str, str, bool, str | None, tuple[str, ...]], str | None]
# An exact version starts with a digit: `latest`, `next` and other moving tags do not.
_VERSION = re.compile(r"^v?[0-9][A-Za-z0-9.+_-]*$")
_NPM_NAME = re.compile(r"^(@[A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*$")
_PYPI_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_IMAGE = re.compile(  # [host[:port]/]path[:tag][@sha256:digest], docker's reference grammar
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*(?::[0-9]+(?=/))?(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127}))?(?P<digest>@sha256:[a-f0-9]{64})?$"
)
# Variables a runner reads as its own settings: where it fetches the package from, which
# daemon runs it.
_RUNNER_SETTINGS = {"npm": ("NPM_CONFIG_",), "pypi": ("UV_", "PIP_"), "oci": ("DOCKER_",)}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BRACED = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Found:
    """One search result, as the registry says it (clean before printing)."""

    name: str
    version: str
    description: str
    kinds: tuple[str, ...]  # "remote", "npm", "pypi", "oci"...


@dataclass
class Plan:
    """What `mcp add REGISTRY-NAME` writes, and what it tells the user."""

    entry: dict[str, Any]
    how: str  # "remote (http)", "npm package @x/y@1.2.3"
    secrets: dict[str, str] = field(default_factory=dict)  # name -> value given or asked
    instructions: str = ""  # postInstallInstructions: shown, never run
    chosen_by_registry: set[str] = field(default_factory=set)  # a fixed value or a default
    runner_options: list[str] = field(default_factory=list)  # docker's own, from the registry
    loaders: dict[str, str] = field(default_factory=dict)  # loader/runner variables it chose


class Registry:
    """A registry's read API at `base` (the official one unless told)."""

    def __init__(self, base: str = DEFAULT_REGISTRY, client: httpx2.Client | None = None):
        if not base.startswith(("http://", "https://")):
            raise ConfigError(f"--registry {base!r}: must start with http:// or https://")
        self.base = base.rstrip("/")
        self._client = client or httpx2.Client(timeout=TIMEOUT, follow_redirects=False)

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def _get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        """The JSON at `path` (None for a 404), read within the bounds above."""
        url = httpx2.URL(f"{self.base}{path}", params=dict(params or {}))
        deadline = time.monotonic() + DEADLINE
        for _ in range(MAX_REDIRECTS + 1):
            try:
                with self._client.stream("GET", url) as response:
                    if response.has_redirect_location:
                        url = self._redirect(url, response.headers["location"], path)
                        continue
                    if response.status_code == 404:
                        return None
                    if response.status_code >= 400:
                        raise ConfigError(
                            f"registry {self.base}: {path} answered HTTP {response.status_code}"
                        )
                    body = self._body(response, path, deadline)
            except httpx2.HTTPError as exc:
                raise ConfigError(f"registry {self.base}: cannot reach it ({exc})") from None
            return self._json(body, path)
        raise ConfigError(
            f"registry {self.base}: {path} redirected more than {MAX_REDIRECTS} times"
        )

    def _redirect(self, url: httpx2.URL, location: str, path: str) -> httpx2.URL:
        """Where a redirect goes, if it stays with the registry: the same host and port, or
        the same host moving from http to https. Another host would answer for it."""
        try:
            target: httpx2.URL | None = url.join(location)
        except (httpx2.InvalidURL, ValueError):
            target = None
        if target is None or target.host != url.host or not _same_or_upgrade(url, target):
            raise ConfigError(
                f"registry {self.base}: {path} redirected to {location[:200]}, not followed "
                "(only within the registry's host; if you trust that one, give it as --registry)"
            )
        return target

    def _body(self, response: httpx2.Response, path: str, deadline: float) -> bytes:
        """The body, streamed: never more than MAX_BYTES held, never after DEADLINE."""
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > MAX_BYTES:
                raise ConfigError(
                    f"registry {self.base}: {path} answered more than "
                    f"{MAX_BYTES // 2**20} MB, not read"
                )
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"registry {self.base}: {path} took more than {DEADLINE:.0f} s to answer"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _json(self, body: bytes, path: str) -> Any:
        """The body's JSON; nesting past MAX_DEPTH (which the parser may meet as a
        RecursionError first) is refused, so nothing after recurses through it."""
        too_deep = ConfigError(
            f"registry {self.base}: {path} answered JSON nested deeper than {MAX_DEPTH} levels"
        )
        try:
            return json_limits.loads(body, MAX_DEPTH)
        except json_limits.TooDeep:
            raise too_deep from None
        except ValueError:
            raise ConfigError(f"registry {self.base}: {path} did not answer JSON") from None

    def search(self, query: str, limit: int = 20) -> list[Found]:
        """The latest version of each server whose name holds `query`."""
        params = {"search": query, "version": "latest", "limit": str(limit)}
        doc = self._get("/v0.1/servers", params)
        items = doc.get("servers") if isinstance(doc, dict) else None
        if not isinstance(items, list):
            raise ConfigError(f"registry {self.base}: /v0.1/servers answered no 'servers' list")
        found = []
        for item in items:
            server = item.get("server") if isinstance(item, dict) else None
            if isinstance(server, dict) and isinstance(server.get("name"), str):
                found.append(_found(server))
        return found[:limit]

    def latest(self, name: str) -> dict[str, Any]:
        """One server's latest server.json, or a ConfigError saying how to find the name."""
        quoted = urllib.parse.quote(name, safe="")
        doc = self._get(f"/v0.1/servers/{quoted}/versions/latest")
        server = doc.get("server") if isinstance(doc, dict) else None
        if not isinstance(server, dict):
            raise ConfigError(
                f"no server '{name}' in the registry {self.base} "
                f"(find its name: run_mcp.py mcp search WORDS)"
            )
        meta = doc.get("_meta") if isinstance(doc.get("_meta"), dict) else {}
        return {**server, "_meta": {**server.get("_meta", {}), **meta}}


def _same_or_upgrade(url: httpx2.URL, target: httpx2.URL) -> bool:
    """The same scheme and port, or http moving to https (never https down to http)."""
    upgrade = url.scheme == "http" and target.scheme == "https"
    return upgrade or (target.scheme, target.port) == (url.scheme, url.port)


def _found(server: Mapping[str, Any]) -> Found:
    kinds = ["remote"] if server.get("remotes") else []
    for package in server.get("packages") or []:
        if isinstance(package, dict) and isinstance(package.get("registryType"), str):
            kinds.append(package["registryType"])
    return Found(
        name=str(server["name"]),
        version=str(server.get("version", "")),
        description=str(server.get("description", "")),
        kinds=tuple(dict.fromkeys(kinds)),
    )


def instructions_of(server: Mapping[str, Any]) -> str:
    """`postInstallInstructions`, where a server.json or its publisher's _meta puts it."""
    text = server.get("postInstallInstructions")
    meta = server.get("_meta")
    if not isinstance(text, str) and isinstance(meta, dict):
        for value in meta.values():
            if isinstance(value, dict) and isinstance(value.get("postInstallInstructions"), str):
                text = value["postInstallInstructions"]
                break
    return text if isinstance(text, str) else ""


def plan(
    server: Mapping[str, Any],
    given: Mapping[str, str],
    ask: Asker | None,
    *,
    references: bool = False,
) -> Plan:
    """The entry for a server.json: a remote if it has one, else its first package we run.
    `references` (`--secrets env`): a secret not given is written as a `${NAME}` reference,
    never asked for (its value would only be thrown away)."""
    inputs = _Inputs(dict(given), ask, references)
    remotes = [r for r in server.get("remotes") or [] if isinstance(r, dict)]
    remote = next((r for r in remotes if r.get("type") in ("streamable-http", "sse")), None)
    if remote is not None:
        result = _remote(remote, inputs)
    else:
        packages = [p for p in server.get("packages") or [] if isinstance(p, dict)]
        usable = [p for p in packages if p.get("registryType") in _RUNNERS]
        if not usable:
            kinds = ", ".join(str(p.get("registryType")) for p in packages) or "none"
            raise ConfigError(
                f"{server.get('name')}: no remote and no package we can run (packages: {kinds}; "
                "we run npm, pypi and oci)"
            )
        result = _package(str(server.get("name")), usable[0], inputs)
    unused = sorted(set(given) - inputs.used)
    if unused:
        raise ConfigError(f"-e {unused[0]}: {server.get('name')} takes no such variable")
    result.secrets = {k: v for k, v in inputs.values.items() if k in inputs.secret and v}
    result.instructions = instructions_of(server)
    result.chosen_by_registry = inputs.chosen_by_registry
    return result


class _Inputs:
    """Values for the registry's inputs: given with -e, else asked, else the default."""

    def __init__(self, given: dict[str, str], ask: Asker | None, references: bool = False) -> None:
        self.given, self.ask, self.references = given, ask, references
        self.values: dict[str, str] = {}
        self.secret: set[str] = set()
        self.used: set[str] = set()
        self.chosen_by_registry: set[str] = set()

    def value(self, name: str, spec: Mapping[str, Any]) -> str | None:
        """The value of one input (None: an optional one left out)."""
        fixed = spec.get("value")
        if isinstance(fixed, str):
            self.chosen_by_registry.add(name)
            return self.fill(fixed, spec.get("variables") or {})
        self.used.add(name)
        if spec.get("isSecret"):
            self.secret.add(name)
            if self.references and name not in self.given:
                self.values[name] = f"${{{name}}}"  # set in the environment, not here
                return self.values[name]
        default = spec.get("default") if isinstance(spec.get("default"), str) else None
        choices = tuple(str(c) for c in spec.get("choices") or ())
        answer = self.given.get(name)
        if answer is None and self.ask is not None:
            description = str(spec.get("description") or name)
            answer = self.ask(name, description, bool(spec.get("isSecret")), default, choices)
        if not answer and default:
            answer = default
            self.chosen_by_registry.add(name)
        if not answer and spec.get("isRequired"):
            what = f" ({spec['description']})" if spec.get("description") else ""
            raise ConfigError(f"needs {name}{what}: give it with -e {name}=VALUE")
        if answer and choices and answer not in choices:
            raise ConfigError(f"{name}: {answer!r} is not one of {', '.join(choices)}")
        if answer:
            self.values[name] = answer
        return answer

    def fill(self, template: str, variables: Mapping[str, Any]) -> str:
        """`{name}` in a value or url, from its `variables` (asked like any input)."""

        def one(match: re.Match[str]) -> str:
            spec = variables.get(match.group(1))
            if not isinstance(spec, dict):
                return match.group(0)
            return self.value(match.group(1), spec) or ""

        return _BRACED.sub(one, template)


def _remote(remote: Mapping[str, Any], inputs: _Inputs) -> Plan:
    url = inputs.fill(str(remote.get("url", "")), remote.get("variables") or {})
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"the registry's remote url {url[:80]!r} is not http(s)")
    kind = "http" if remote.get("type") == "streamable-http" else "sse"
    entry: dict[str, Any] = {"type": kind, "url": url}
    headers = {}
    for header in remote.get("headers") or []:
        if isinstance(header, dict) and isinstance(header.get("name"), str):
            value = inputs.value(header["name"], header)
            if value:
                headers[header["name"]] = value
    if headers:
        entry["headers"] = headers
    return Plan(entry, f"remote ({kind}) {url}")


def _npm(identifier: str, version: str) -> list[str]:
    if not _NPM_NAME.match(identifier):
        raise ConfigError(
            f"the registry's npm package id {identifier[:80]!r} is not a package name"
        )
    return ["npx", "-y", f"{identifier}@{_exact(identifier, version)}"]


def _pypi(identifier: str, version: str) -> list[str]:
    if not _PYPI_NAME.match(identifier):
        raise ConfigError(
            f"the registry's pypi package id {identifier[:80]!r} is not a package name"
        )
    return ["uvx", f"{identifier}=={_exact(identifier, version)}"]


def _oci(identifier: str, version: str) -> list[str]:
    """`docker run` of the image at its version: the tag the registry now puts in the id, or
    a digest, or `version`; never an id's tag or digest that would run instead of it."""
    image = _IMAGE.match(identifier)
    if image is None:
        raise ConfigError(f"the registry's oci image {identifier[:80]!r} is not an image name")
    tag, digest = image["tag"], image["digest"]
    if version and digest:
        raise ConfigError(f"{identifier[:120]}: its digest would run instead of {version}")
    if version and tag and tag != version:
        raise ConfigError(f"{identifier}: its tag {tag!r} would run instead of {version}")
    if digest:  # a digest names one image for ever: the exact pin
        return ["docker", "run", "-i", "--rm", identifier]
    pinned = _exact(identifier, version or tag or "")
    return ["docker", "run", "-i", "--rm", f"{image['name']}:{pinned}"]


def _exact(identifier: str, version: str) -> str:
    if not _VERSION.match(version):
        raise ConfigError(f"{identifier}: the registry gives no exact version to pin ({version!r})")
    return version


_RUNNERS: dict[str, Callable[[str, str], list[str]]] = {"npm": _npm, "pypi": _pypi, "oci": _oci}


def _package(server_name: str, package: Mapping[str, Any], inputs: _Inputs) -> Plan:
    kind = str(package["registryType"])
    identifier = str(package.get("identifier", ""))
    version = package.get("version")
    version = version if isinstance(version, str) else ""
    argv = _RUNNERS[kind](identifier, version)
    transport = package.get("transport") or {}
    if isinstance(transport, dict) and transport.get("type", "stdio") != "stdio":
        raise ConfigError(f"{identifier}: a package served over {transport.get('type')} is not run")
    if kind != "oci" and package.get("runtimeArguments"):
        words = " ".join(_words(package["runtimeArguments"]))
        raise ConfigError(
            f"{server_name}: the registry's entry gives {argv[0]} options of its own "
            f"({words[:200]}), which could run another package: not added"
        )
    env = {}
    for variable in package.get("environmentVariables") or []:
        if isinstance(variable, dict) and isinstance(variable.get("name"), str):
            if not _ENV_NAME.match(variable["name"]):
                raise ConfigError(
                    f"{server_name}: {variable['name'][:80]!r} is not a variable name"
                )
            value = inputs.value(variable["name"], variable)
            if value:
                env[variable["name"]] = value
    runtime = _arguments(package.get("runtimeArguments"), inputs)
    if kind == "oci":  # docker passes the variables it is told of, by name
        argv[-1:-1] = [*runtime, *(a for name in env for a in ("-e", name))]
    argv += _arguments(package.get("packageArguments"), inputs)
    entry: dict[str, Any] = {"type": "stdio", "command": argv[0], "args": argv[1:]}
    if env:
        entry["env"] = env
    result = Plan(entry, f"{kind} package {identifier} {version}".rstrip(), runner_options=runtime)
    result.loaders = {
        name: value
        for name, value in env.items()
        if name in inputs.chosen_by_registry
        and (is_loader_variable(name) or name.upper().startswith(_RUNNER_SETTINGS[kind]))
    }
    return result


def _words(specs: Any) -> list[str]:
    """Runtime arguments as the registry gives them, without asking for any value."""
    words: list[str] = []
    for spec in specs if isinstance(specs, list) else ():
        if isinstance(spec, dict):
            hint = f"<{spec.get('valueHint') or spec.get('name') or 'value'}>"
            value = str(spec["value"]) if "value" in spec else hint
            named = spec.get("type") == "named" and isinstance(spec.get("name"), str)
            words += [spec["name"], value] if named else [value]
    return words


def _arguments(specs: Any, inputs: _Inputs) -> list[str]:
    """Positional (`value`, or asked by its valueHint) and named (`--flag value`) arguments."""
    argv: list[str] = []
    for spec in specs if isinstance(specs, list) else ():
        if not isinstance(spec, dict):
            continue
        if spec.get("type") == "named" and isinstance(spec.get("name"), str):
            flag = spec["name"]
            optional_switch = spec.get("format") == "boolean" and not spec.get("isRequired")
            if "value" not in spec and optional_switch:
                continue
            value = inputs.value(flag.lstrip("-"), spec)
            if value is not None:
                argv += [flag, value]
        else:
            label = str(spec.get("valueHint") or spec.get("name") or "argument")
            value = inputs.value(label, spec)
            if value is not None:
                argv.append(value)
    return argv
