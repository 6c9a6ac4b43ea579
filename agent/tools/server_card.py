"""MCP Server Cards (SEP-2127): a host's own description of its MCP server, read before
connecting, so `--server-url https://host` (no path) finds the endpoint by itself.

Looked for, in order: `/.well-known/mcp/server-card.json`, `/.well-known/mcp/server-card`
(the SEP's name without the suffix), then the catalog form `/.well-known/mcp/catalog.json`
(`entries` of type `application/mcp-server-card+json`, each naming where its card is).
The card's `remotes` name the endpoint and its transport (`streamable-http` or `sse`).

Only the host's own origin is followed: a card or catalog entry naming another scheme, host
or port is refused, so a page on one host cannot send the agent (with the headers and login
meant for that host) to another. Nothing secret is sent for a card: it is public by design.
A host without any card keeps its URL as given (a server may live at the root); if that
connection fails too, the error names the card locations tried.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2

from agent.common import json_limits
from agent.config.settings import ServerConfig
from agent.tools.server_errors import ConnectProblem

CARD_PATHS = ("/.well-known/mcp/server-card.json", "/.well-known/mcp/server-card")
CATALOG_PATH = "/.well-known/mcp/catalog.json"
CARD_TYPE = "application/mcp-server-card+json"
MAX_CARD_BYTES = 256 * 1024
TRANSPORTS: dict[str, Literal["http", "sse"]] = {"streamable-http": "http", "sse": "sse"}
_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class ServerCard:
    """What a card says, and the endpoint chosen from it."""

    name: str
    version: str
    description: str
    endpoint: str
    transport: Literal["http", "sse"]
    source: str  # the URL the card was read from

    def summary(self) -> str:
        about = f" — {self.description}" if self.description else ""
        return f"{self.name} {self.version}{about} (card: {self.source})"


@dataclass
class Lookup:
    """The card found (or None) and every URL asked, for the error when nothing works."""

    card: ServerCard | None = None
    tried: list[str] = field(default_factory=list)

    def missing(self) -> str:
        return f"no server card at {', '.join(self.tried)}"


def wants_card(config: ServerConfig) -> bool:
    """A streamable HTTP server given as a bare origin (`https://host`, no path)."""
    if config.type != "http" or not config.url:
        return False
    url = httpx2.URL(config.url)
    return url.path in ("", "/") and not url.query


def origin(url: str) -> str:
    parsed = httpx2.URL(url)
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"


async def discover(base_url: str, *, timeout: float) -> Lookup:
    """The host's card (following its catalog if it has only that); raises ConnectProblem
    for a card that is there but unusable, returns an empty Lookup when there is none (or
    the host does not answer: the connection itself will say why)."""
    lookup = Lookup()
    try:
        return await _discover(origin(base_url), lookup, timeout)
    except _Unreachable:
        return Lookup()  # nothing was learnt: the connect's own error says why


class _Unreachable(Exception):
    """The host did not answer at all: asking it more would only repeat the wait."""


async def _discover(home: str, lookup: Lookup, timeout: float) -> Lookup:
    headers = {"Accept": f"{CARD_TYPE}, application/json"}
    async with httpx2.AsyncClient(timeout=timeout, headers=headers) as http:
        for path in CARD_PATHS:
            doc = await _get(http, home + path, lookup)
            if doc is not None:
                lookup.card = parse_card(doc, home, home + path)
                return lookup
        catalog = await _get(http, home + CATALOG_PATH, lookup)
        if catalog is not None:
            where = _catalog_card(catalog, home, home + CATALOG_PATH)
            doc = await _get(http, where, lookup)
            if doc is None:
                raise ConnectProblem(f"server card {where} (named by {CATALOG_PATH}) not found")
            lookup.card = parse_card(doc, home, where)
    return lookup


async def _get(http: httpx2.AsyncClient, url: str, lookup: Lookup) -> Any:
    """The JSON at `url`, or None when no card is there: an error status (servers answer
    unknown paths with 404, 400 or 405) or a body that is not JSON. The body is read only
    when it says it is JSON: a server at the root may answer every GET with an SSE stream
    that never ends."""
    lookup.tried.append(url)
    try:
        async with http.stream("GET", url) as response:
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if not response.is_success:
                lookup.tried[-1] += f" (HTTP {response.status_code})"
                return None
            if kind != "application/json" and not kind.endswith("+json"):
                lookup.tried[-1] += f" ({kind or 'no content type'}, not JSON)"
                return None
            body = b""
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_CARD_BYTES:
                    raise ConnectProblem(
                        f"server card {url} is larger than {MAX_CARD_BYTES:,} bytes"
                    )
    except httpx2.HTTPError:
        raise _Unreachable from None
    try:
        return json_limits.loads(body)
    except ValueError:
        raise ConnectProblem(f"server card {url} is not valid JSON") from None


def _catalog_card(doc: Any, home: str, where: str) -> str:
    """The card URL of the catalog's first MCP server card entry (on this origin only)."""
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ConnectProblem(f"MCP catalog {where} has no 'entries' list")
    cards = [
        e for e in entries if isinstance(e, dict) and e.get("type") == CARD_TYPE and e.get("url")
    ]
    if not cards:
        raise ConnectProblem(f"MCP catalog {where} lists no entry of type {CARD_TYPE}")
    url = str(httpx2.URL(home).join(str(cards[0]["url"])))
    if origin(url) != home:
        raise ConnectProblem(
            f"MCP catalog {where} points at a card on another origin ({url}); not followed"
        )
    return url


def parse_card(doc: Any, home: str, where: str) -> ServerCard:
    """The card's identity and the endpoint to use: same origin, streamable HTTP first."""
    if not isinstance(doc, dict):
        raise ConnectProblem(f"server card {where} is not a JSON object")
    for key in ("name", "version"):
        if not isinstance(doc.get(key), str) or not doc[key].strip():
            raise ConnectProblem(f"server card {where} has no '{key}'")
    remotes = doc.get("remotes")
    if not isinstance(remotes, list) or not remotes:
        raise ConnectProblem(f"server card {where} names no endpoint ('remotes' is empty)")
    usable: list[tuple[str, str]] = []
    foreign: list[str] = []
    for remote in remotes:
        if not isinstance(remote, dict) or remote.get("type") not in TRANSPORTS:
            continue
        url = str(httpx2.URL(home).join(_fill(remote, where)))
        if origin(url) != home:
            foreign.append(url)
        else:
            usable.append((remote["type"], url))
    if not usable and foreign:
        raise ConnectProblem(
            f"server card {where} names endpoints on another origin only ({', '.join(foreign)}); "
            f"not followed: give that URL with --server-url if you trust it"
        )
    if not usable:
        raise ConnectProblem(f"server card {where} names no streamable-http or sse endpoint")
    kind, url = min(usable, key=lambda item: item[0] != "streamable-http")
    description = doc.get("description")
    description = description if isinstance(description, str) else ""
    return ServerCard(doc["name"], doc["version"], description, url, TRANSPORTS[kind], where)


def _fill(remote: dict[str, Any], where: str) -> str:
    """The remote's URL with its `{variables}` set to their defaults."""
    url = str(remote.get("url") or "")
    variables = remote.get("variables")
    variables = variables if isinstance(variables, dict) else {}

    def value(match: re.Match[str]) -> str:
        spec = variables.get(match.group(1))
        default = spec.get("default") if isinstance(spec, dict) else None
        if not isinstance(default, str):
            raise ConnectProblem(
                f"server card {where}: endpoint {url} needs a value for {{{match.group(1)}}}"
            )
        return default

    return _VARIABLE.sub(value, url)
