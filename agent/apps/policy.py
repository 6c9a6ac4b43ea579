"""What an app page may do in the browser: exactly what its resource metadata asks for.

The spec (SEP-1865, "Host Behavior"): without `_meta.ui.csp` the page gets the restrictive
default below; declared origins are added to their directives and nothing else is. A
declared entry that is not a plain origin (a CSP keyword such as 'unsafe-eval', a `;` that
would start a new directive, a bare `*`) is dropped: a server must not loosen the policy by
writing it. Permissions map to the iframe's `allow` attribute, only those declared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# scheme://host[:port], host possibly "*.example.com"; nothing a CSP parser would read as
# more than one origin.
_ORIGIN = re.compile(r"^(https?|wss?)://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:(\d{1,5}|\*))?/?$")
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
    """The declared origins under `key` that are plain origins; the rest are dropped."""
    listed = csp.get(key)
    if not isinstance(listed, list):
        return []
    return [o.rstrip("/") for o in listed if isinstance(o, str) and _ORIGIN.match(o)]


def content_security_policy(ui: Mapping[str, Any]) -> str:
    """The view's CSP: the spec's restrictive default plus the declared origins."""
    csp = ui.get("csp")
    csp = csp if isinstance(csp, Mapping) else {}
    res = " ".join(origins(csp, "resourceDomains"))
    connect = " ".join(origins(csp, "connectDomains")) or "'none'"
    frames = " ".join(origins(csp, "frameDomains")) or "'none'"
    base = " ".join(origins(csp, "baseUriDomains")) or "'self'"
    extra = f" {res}" if res else ""
    directives = [
        "default-src 'none'",
        f"script-src 'self' 'unsafe-inline'{extra}",
        f"style-src 'self' 'unsafe-inline'{extra}",
        f"img-src 'self' data:{extra}",
        f"font-src 'self' data:{extra}",
        f"media-src 'self' data:{extra}",
        f"connect-src {connect}",
        f"frame-src {frames}",
        f"base-uri {base}",
        "object-src 'none'",
        "form-action 'none'",
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
    kept = {
        key: origins(csp, key)
        for key in ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
        if origins(csp, key)
    }
    asked = ui.get("permissions")
    asked = asked if isinstance(asked, Mapping) else {}
    permissions: dict[str, dict[str, Any]] = {key: {} for key in _PERMISSIONS if key in asked}
    return {"csp": kept, "permissions": permissions}
