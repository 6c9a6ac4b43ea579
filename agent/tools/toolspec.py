"""A tool as its server describes it: what approval, the offer and the pages rely on.

Apart from the `ToolServer` contract (agent/tools/base.py) because most of its readers
(approval, the loop's offer, the REPL's listings, the apps host) need the tool only, never
the connection that listed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp.types as types

from agent.tools.uimeta import tool_ui


@dataclass(frozen=True)
class ToolSpec:
    """A tool as its server describes it, plus the hints approval relies on."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    title: str | None = None
    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True
    app_uri: str | None = None  # the `ui://` page that comes with it (MCP Apps)
    visibility: tuple[str, ...] = ("model", "app")  # who may call it: the model, its page
    # The schema as the model gets it (local $refs inlined, agent/tools/schemas.py); None:
    # `input_schema` as it is. `input_schema` stays as the server sent it, for the server's
    # own uses (an app's tools/list, an echo): 2020-12 keywords such as $anchor survive.
    model_schema: dict[str, Any] | None = None

    @property
    def schema_for_model(self) -> dict[str, Any]:
        return self.input_schema if self.model_schema is None else self.model_schema

    @property
    def for_model(self) -> bool:
        """Offered to the model; an app-only tool is called by its page alone."""
        return "model" in self.visibility

    @classmethod
    def from_mcp(cls, server: str, tool: types.Tool) -> ToolSpec:
        ann = tool.annotations
        schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
        app_uri, visibility = tool_ui(tool.meta)
        return cls(
            server=server,
            name=tool.name,
            description=tool.description or "",
            input_schema=schema or {"type": "object", "properties": {}},
            title=tool.title or (ann.title if ann else None),
            # A tool that claims both read-only and destructive is taken at its worse word.
            read_only=bool(ann and ann.read_only_hint and ann.destructive_hint is not True),
            destructive=not (ann and ann.destructive_hint is False),
            idempotent=bool(ann and ann.idempotent_hint),
            open_world=not (ann and ann.open_world_hint is False),
            app_uri=app_uri,
            visibility=visibility,
        )
