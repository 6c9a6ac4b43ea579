"""Which login-server addresses the agent will talk to: https, or plain http on loopback.

A plain-http authorization or token endpoint would carry the code, the PKCE verifier, the
client secret and the tokens in clear. The OAuth 2.1 and MCP authorization specs require
TLS for every authorization-server endpoint; a server on this machine (127.0.0.1, ::1,
localhost) is the one exception, as for redirect URIs. Checked when the metadata is read,
before any request goes to those endpoints and before a browser opens.
"""

from __future__ import annotations

import ipaddress

import httpx2
from mcp.shared.auth import OAuthMetadata

# The endpoints of authorization-server metadata the agent may send something to.
_ENDPOINTS = (
    ("authorization_endpoint", "authorization endpoint"),
    ("token_endpoint", "token endpoint"),
    ("registration_endpoint", "registration endpoint"),
)


class InsecureEndpoint(Exception):
    """A login-server address that is neither https nor on this machine; `step` is the
    login step that found it."""

    def __init__(self, message: str, step: str) -> None:
        super().__init__(message)
        self.step = step


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def secure(url: str) -> bool:
    """https, or plain http to this machine."""
    parsed = httpx2.URL(url)
    return parsed.scheme == "https" or (parsed.scheme == "http" and is_loopback(parsed.host))


_RULE = "a login server must use https (plain http only on 127.0.0.1 or localhost)"


def require_https(url: str, step: str) -> None:
    """Refuse a request of login step `step` to `url` unless `secure`."""
    if not secure(url):
        raise InsecureEndpoint(f"{url} is not https; {_RULE}", step)


def check_metadata(metadata: OAuthMetadata | None) -> None:
    """Refuse authorization-server metadata that names an endpoint that is not `secure`."""
    if metadata is None:
        return
    for field, words in _ENDPOINTS:
        value = getattr(metadata, field, None)
        if value is not None and not secure(str(value)):
            raise InsecureEndpoint(
                f"the server's metadata names the {words} {value}, which is not https; {_RULE}",
                "metadata discovery",
            )
