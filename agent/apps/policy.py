"""What an app page may do in the browser: exactly what its resource metadata asks for.

The spec (SEP-1865, "Host Behavior"): without `_meta.ui.csp` the page gets the restrictive
default below; declared origins are added to their directives and nothing else is. A
declared entry that is not a plain origin (a CSP keyword such as 'unsafe-eval', a `;` that
would start a new directive, a bare `*`) is dropped: a server must not loosen the policy by
writing it. Nor may it point the page at this machine or its network: the page is served
from 127.0.0.1, so browsers' Private Network Access does not stand between it and a local
service; loopback, private and link-local addresses, local names (`localhost`, `*.local`),
any-port (`:*`) and wildcards as wide as a top-level domain (`https://*.com`) are dropped
too, each with its reason (`refused`), which the host shows. Permissions map to the
iframe's `allow` attribute, only those declared.

WebRTC is outside CSP in the browsers that ship today: `webrtc 'block'` (CSP Level 3) is
added for those that implement it; Chromium and Firefox ignore it, so a page can still send
STUN/TURN packets (docs/extensions.md says how to close that in the browser).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterator, Mapping
from typing import Any

# scheme://host[:port], host possibly "*.example.com" or "[v6]"; nothing a CSP parser would
# read as more than one origin.
_ORIGIN = re.compile(
    r"^(?P<scheme>https?|wss?)://(?P<host>(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])"
    r"(:(?P<port>\d{1,5}|\*))?/?$"
)
CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
# Names that mean this machine or its network, whatever DNS says elsewhere (RFC 6761, 6762,
# 8375), and public names that resolve to any address written in them (127.0.0.1.nip.io).
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa", ".localdomain")
_ANY_ADDRESS_DNS = ("nip.io", "sslip.io", "xip.io", "localtest.me", "lvh.me", "traefik.me")
# Second-level labels under which anyone registers (co.uk, com.au): `*.co.uk` is a TLD.
_REGISTRY_LABELS = {"co", "com", "net", "org", "gov", "edu", "ac", "or", "ne", "go", "gob"}
_PERMISSIONS = {
    "camera": "camera",
    "microphone": "microphone",
    "geolocation": "geolocation",
    "clipboardWrite": "clipboard-write",
}


def ui_meta(meta: Any) -> Mapping[str, Any]:
    """`_meta.ui` of a resource (contents or listing entry), or {}."""
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    return ui if isinstance(ui, Mapping) else {}


def origins(csp: Mapping[str, Any], key: str) -> list[str]:
    """The declared origins under `key` that may be granted; the rest are dropped."""
    listed = csp.get(key)
    if not isinstance(listed, list):
        return []
    return [o.rstrip("/") for o in listed if isinstance(o, str) and why_refused(o) is None]


def refused(ui: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(key, entry, reason) of each declared CSP entry that is dropped."""
    csp = ui.get("csp")
    csp = csp if isinstance(csp, Mapping) else {}
    for key in CSP_KEYS:
        listed = csp.get(key)
        for entry in listed if isinstance(listed, list) else ():
            reason = why_refused(entry) if isinstance(entry, str) else "not a string"
            if reason is not None:
                yield key, str(entry), reason


def why_refused(entry: str) -> str | None:
    """Why a declared origin is not granted, or None when it may be."""
    match = _ORIGIN.match(entry)
    if match is None:
        return "not a plain origin (scheme://host[:port])"
    reason = _host_refused(match["host"].lower())
    if reason is None and match["port"] == "*":
        return "any port"
    return reason


def _host_refused(host: str) -> str | None:
    if host.startswith("["):
        return _address_refused(host[1:-1])
    labels = host.split(".")
    if labels[-1].isdigit() or labels[-1].startswith("0x"):  # browsers read 127.1, 0x7f.1
        try:
            return _address_refused(socket.inet_ntoa(socket.inet_aton(host)))
        except OSError:
            return "not a plain origin (scheme://host[:port])"
    name = host.removeprefix("*.")
    if name == "localhost" or name.endswith(_LOCAL_SUFFIXES):
        return "a name on this machine or its network"
    if any(name == s or name.endswith("." + s) for s in _ANY_ADDRESS_DNS):
        return "a name that resolves to any address, local ones included"
    wide = len(labels) == 3 and labels[1] in _REGISTRY_LABELS
    if host.startswith("*.") and (len(labels) == 2 or wide):
        return "a wildcard as wide as a top-level domain"
    if "." not in name:
        return "a name on this machine or its network"
    return None


def _address_refused(text: str) -> str | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return "not a plain origin (scheme://host[:port])"
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "a loopback address (this machine)"
    if address.is_link_local:
        return "a link-local address (cloud metadata, the local link)"
    if not address.is_global:
        return "a private or reserved address (the local network)"
    return None


def content_security_policy(ui: Mapping[str, Any]) -> str:
    """The view's CSP: the spec's restrictive default plus the declared origins.

    Beyond the spec's list, what the page makes itself, as the reference host
    (ext-apps' basic-host) allows: scripts and workers from `blob:` and `data:` URLs,
    images, fonts and media from `blob:`. The reference PDF viewer ships PDF.js's worker as
    a `data:` module that a `blob:` worker imports; map libraries start workers from blobs.
    Such a URL holds only code the page already has (and may run inline anyway), and a
    worker inherits this policy (its connect-src included), so nothing new can reach out.
    Declared resource origins may serve workers, as they may serve scripts."""
    csp = ui.get("csp")
    csp = csp if isinstance(csp, Mapping) else {}
    res = " ".join(origins(csp, "resourceDomains"))
    connect = " ".join(origins(csp, "connectDomains")) or "'none'"
    frames = " ".join(origins(csp, "frameDomains")) or "'none'"
    base = " ".join(origins(csp, "baseUriDomains")) or "'self'"
    extra = f" {res}" if res else ""
    directives = [
        "default-src 'none'",
        f"script-src 'self' 'unsafe-inline' blob: data:{extra}",
        f"style-src 'self' 'unsafe-inline'{extra}",
        f"img-src 'self' data: blob:{extra}",
        f"font-src 'self' data: blob:{extra}",
        f"media-src 'self' data: blob:{extra}",
        f"worker-src 'self' blob: data:{extra}",
        f"connect-src {connect}",
        f"frame-src {frames}",
        f"base-uri {base}",
        "object-src 'none'",
        "form-action 'none'",
        "webrtc 'block'",
    ]
    return "; ".join(directives)


def allow_attribute(ui: Mapping[str, Any]) -> str:
    """The iframe `allow` list: the permissions the page declared, and no others."""
    asked = ui.get("permissions")
    asked = asked if isinstance(asked, Mapping) else {}
    return "; ".join(feature for key, feature in _PERMISSIONS.items() if key in asked)


def granted(ui: Mapping[str, Any]) -> dict[str, Any]:
    """`hostCapabilities.sandbox`: what this host applied (the declared, valid parts)."""
    csp = ui.get("csp")
    csp = csp if isinstance(csp, Mapping) else {}
    kept = {key: origins(csp, key) for key in CSP_KEYS if origins(csp, key)}
    asked = ui.get("permissions")
    asked = asked if isinstance(asked, Mapping) else {}
    permissions: dict[str, dict[str, Any]] = {key: {} for key in _PERMISSIONS if key in asked}
    return {"csp": kept, "permissions": permissions}


# Powerful features a page may be granted (by its declared permissions) or not at all; the
# header binds the sandbox page and every frame in it, whatever `allow` a frame is given.
_FEATURES = (
    ("camera", "camera"),
    ("microphone", "microphone"),
    ("geolocation", "geolocation"),
    ("clipboardWrite", "clipboard-write"),
    ("", "display-capture"),
    ("", "usb"),
    ("", "serial"),
    ("", "hid"),
    ("", "bluetooth"),
    ("", "payment"),
    ("", "midi"),
    ("", "publickey-credentials-get"),
    ("", "screen-wake-lock"),
    ("", "xr-spatial-tracking"),
)


def permissions_policy(ui: Mapping[str, Any]) -> str:
    """The sandbox page's `Permissions-Policy`: declared permissions for its own origin (the
    app's frame shares it), every other powerful feature off."""
    asked = ui.get("permissions")
    asked = asked if isinstance(asked, Mapping) else {}
    return ", ".join(
        f"{feature}=(self)" if key and key in asked else f"{feature}=()"
        for key, feature in _FEATURES
    )
