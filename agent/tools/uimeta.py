"""What the MCP Apps extension (`io.modelcontextprotocol/ui`, SEP-1865) says in metadata.

A tool's `_meta.ui.resourceUri` names the `ui://` page a host renders for it, and
`_meta.ui.visibility` says who may call it: `["model", "app"]` by default, `["app"]` for a
tool only its page may call. Servers built with the ext-apps SDK 2.0 also write the older
flat key `_meta["ui/resourceUri"]`; it is read when the nested one is absent.

Why this matters without any host: a page is hundreds of kilobytes of minified script
(server-system-monitor's is 428 KB) and an app-only tool is plumbing for that page, so
neither is ever offered to or read into the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXTENSION = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"
APP_SCHEME = "ui://"
LEGACY_URI_KEY = "ui/resourceUri"


def is_app_uri(uri: object) -> bool:
    """Whether `uri` names an app page (`ui://…`), never model material."""
    return str(uri).lower().startswith(APP_SCHEME)


def is_app_page(resource: Any) -> bool:
    """Whether resource contents are an app's page: a `ui://` uri or the app mime type."""
    mime = str(getattr(resource, "mime_type", None) or "").replace(" ", "").lower()
    return is_app_uri(getattr(resource, "uri", "")) or mime == APP_MIME


def tool_ui(meta: Mapping[str, Any] | None) -> tuple[str | None, tuple[str, ...]]:
    """(the tool's app page uri or None, who may call it) from a tool's `_meta`.

    An unknown or malformed visibility reads as the default: a server's typo must not
    hide a tool from the model, and "app" alone is the only value that does.
    """
    meta = meta if isinstance(meta, Mapping) else {}
    ui = meta.get("ui")
    ui = ui if isinstance(ui, Mapping) else {}
    uri = ui.get("resourceUri") or meta.get(LEGACY_URI_KEY)
    uri = uri if isinstance(uri, str) and is_app_uri(uri) else None
    seen = ui.get("visibility")
    visibility = ("model", "app")
    if isinstance(seen, list) and seen and all(v in ("model", "app") for v in seen):
        visibility = tuple(dict.fromkeys(seen))
    return uri, visibility
