"""Reading an MCP server's lists: every page, up to a limit of pages and of tools.

A tool list is read until `max_tools` wanted tools (a server announcing ten thousand must
not cost ten thousand schemas); a page the SDK rejects as a whole is read again tool by
tool, so one malformed tool costs only itself, with a warning naming it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import mcp.types as types
import pydantic
from mcp import Client

from agent.common.sdk_private import absorb_tool_listing, send_raw_request
from agent.config.settings import ServerConfig
from agent.tools.mcp_stdio import ToolCap
from agent.tools.schemas import UnusableSchema, inline_refs
from agent.tools.toolspec import ToolSpec

MAX_PAGES = 100  # of any listing


async def all_pages(page: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
    """Follow `next_cursor` through at most MAX_PAGES pages (a server that never stops
    paging must not hold us forever), collecting `field` of each."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        result = await page(cursor)
        items.extend(getattr(result, field))
        cursor = result.next_cursor
        if not cursor:
            break
    return items


class ToolListing:
    """One reading of a server's tool list. `warnings` (tools skipped) fills as pages are
    read; `cut` says why the reading stopped short; `task_support` is each tool's
    execution.taskSupport (2025-11-25)."""

    def __init__(self, server: str, config: ServerConfig, max_tools: int, cap: ToolCap) -> None:
        self.server = server
        self.config = config
        self.max_tools = max_tools
        self.cap = cap  # what the stdio reader saw of a page too big to parse (toolcap)
        self.warnings: list[str] = []
        self.cut: str | None = None
        self.task_support: dict[str, str | None] = {}

    async def read(self, client: Client) -> list[ToolSpec]:
        """All pages, until `max_tools` wanted tools (include/exclude_tools): listing stops
        at the cap. Unwanted tools are returned too (a misspelt filter is reported)."""
        tools: list[ToolSpec] = []
        cursor: str | None = None
        wanted = 0
        self.cap.limit, self.cap.announced = self.max_tools, 0
        for _ in range(MAX_PAGES):
            page = await self._page(client, cursor)
            for tool in page.tools:
                try:
                    spec = ToolSpec.from_mcp(self.server, tool)
                    spec = replace(spec, model_schema=inline_refs(spec.input_schema))
                except UnusableSchema as exc:
                    skipped = f"server '{self.server}': skipped tool {tool.name[:80]!r}: {exc}"
                    self.warnings.append(skipped)
                    continue
                if self.config.wants_tool(tool.name):
                    if wanted == self.max_tools:
                        self.cut = f"announced more than {self.max_tools} tools"
                        break
                    wanted += 1
                tools.append(spec)
                execution = tool.execution
                self.task_support[tool.name] = execution.task_support if execution else None
            cursor = page.next_cursor
            if self.cap.announced:
                self.cut = f"announced {self.cap.announced} tools in one page"
            elif cursor and wanted == self.max_tools:
                self.cut = f"announced more than {self.max_tools} tools"
            if self.cut or not cursor:
                break
        return tools

    async def _page(self, client: Client, cursor: str | None) -> types.ListToolsResult:
        """One page of tools. When the SDK rejects the page as a whole, it is read again as
        raw JSON and each tool checked on its own: a malformed one is skipped with a warning
        naming it, the rest are kept (and handed back to the SDK so it can still check their
        structured output). This uses the SDK's dispatcher directly (agent.common.sdk_private)."""
        try:
            return await client.list_tools(cursor=cursor, cache_mode="refresh")
        except pydantic.ValidationError:
            pass
        raw = await send_raw_request(
            client.session, "tools/list", {"cursor": cursor} if cursor else None
        )
        tools: list[types.Tool] = []
        for item in raw.get("tools") or []:
            try:
                tools.append(types.Tool.model_validate(item, by_name=False))
            except pydantic.ValidationError as exc:
                name = item.get("name") if isinstance(item, dict) else None
                problem = exc.errors()[0]
                where = ".".join(str(p) for p in problem["loc"]) or "tool"
                self.warnings.append(
                    f"server '{self.server}': skipped tool {str(name)[:80]!r}, which is "
                    f"malformed ({where}: {problem['msg']})"
                )
        next_cursor = raw.get("nextCursor")
        page = types.ListToolsResult(
            tools=tools, next_cursor=next_cursor if isinstance(next_cursor, str) else None
        )
        absorb_tool_listing(
            client.session, page, complete=cursor is None and page.next_cursor is None
        )
        return page
