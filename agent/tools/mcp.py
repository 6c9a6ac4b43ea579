"""One MCP server connection over stdio, SSE or streamable HTTP."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp.types as types
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

import agent
from agent.config import ServerConfig, server_env
from agent.tools.base import ProgressFn, ToolServer, ToolSpec

CLIENT_INFO = types.Implementation(name="mcp-agent", version=agent.__version__)
MessageHandler = Callable[[Any], Awaitable[None]]
MAX_TOOL_PAGES = 100


@dataclass(frozen=True)
class ClientCallbacks:
    """Server-to-client requests. Passing one is what advertises the capability."""

    sampling: Callable[..., Awaitable[Any]] | None = None
    elicitation: Callable[..., Awaitable[Any]] | None = None
    list_roots: Callable[..., Awaitable[Any]] | None = None


def roots_callback(workspace: Path) -> Callable[..., Awaitable[types.ListRootsResult]]:
    """Offer the workspace as the one root."""
    root = types.Root(uri=workspace.resolve().as_uri(), name=workspace.name or "workspace")  # type: ignore[arg-type]

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[root])

    return list_roots


class MCPServerConnection(ToolServer):
    """A live MCP session. Server stderr and logs go to a per-server log file."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        connect_timeout: float,
        log_dir: Path,
        environ: Mapping[str, str] | None = None,
        message_handler: MessageHandler | None = None,
        callbacks: ClientCallbacks | None = None,
    ) -> None:
        super().__init__(config, connect_timeout=connect_timeout)
        self._callbacks = callbacks or ClientCallbacks()
        self.log_path = log_dir / f"{_safe_filename(config.name)}.log"
        self.status.log_path = str(self.log_path)
        self._environ = os.environ if environ is None else environ
        self._message_handler = message_handler
        self._client: Client | None = None
        self._log: Any = None

    async def _open(self, stack: contextlib.AsyncExitStack) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = stack.enter_context(self.log_path.open("a", encoding="utf-8", buffering=1))
        client = Client(
            await self._transport(stack),
            mode=self.config.mode,
            client_info=CLIENT_INFO,
            logging_callback=self._on_log,
            message_handler=self._message_handler,
            sampling_callback=self._callbacks.sampling,
            elicitation_callback=self._callbacks.elicitation,
            list_roots_callback=self._callbacks.list_roots,
        )
        self._client = await stack.enter_async_context(client)
        self.instructions = client.instructions

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        cfg = self.config
        if cfg.type == "stdio":
            params = StdioServerParameters(
                command=cfg.command or "",
                args=list(cfg.args),
                env=server_env(cfg.env, self._environ),
                cwd=cfg.cwd,
            )
            return stdio_client(params, errlog=self._log)
        if cfg.type == "sse":
            return sse_client(
                cfg.url or "", headers=dict(cfg.headers), timeout=self.connect_timeout
            )
        http = httpx2.AsyncClient(
            headers=dict(cfg.headers),
            timeout=httpx2.Timeout(self.connect_timeout, read=300),
            follow_redirects=True,
        )
        await stack.enter_async_context(http)
        return streamable_http_client(cfg.url or "", http_client=http)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self._log is not None:
            self._log.write(f"[{params.level}] {params.logger or ''} {params.data}\n")

    def _session(self) -> Client:
        self.ensure_ready()
        assert self._client is not None
        return self._client

    async def list_tools(self) -> list[ToolSpec]:
        client = self._session()
        tools: list[ToolSpec] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(ToolSpec.from_mcp(self.name, tool) for tool in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        progress: ProgressFn | None = None,
    ) -> types.CallToolResult:
        client = self._session()
        try:
            return await client.call_tool(
                name, arguments, read_timeout_seconds=timeout, progress_callback=progress
            )
        except MCPError as exc:
            return error_result(_mcp_error_text(exc, name, timeout))

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        return await self._session().read_resource(uri)

    async def list_resources(self) -> list[types.Resource]:
        return list((await self._session().list_resources()).resources)

    async def list_prompts(self) -> list[types.Prompt]:
        return list((await self._session().list_prompts()).prompts)

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return list((await self._session().list_resource_templates()).resource_templates)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        return await self._session().get_prompt(name, arguments)

    def supports(self, feature: str) -> bool:
        """Whether the server declared `feature` ("resources", "prompts") at initialize."""
        caps = self._client.server_capabilities if self._client is not None else None
        return caps is not None and getattr(caps, feature, None) is not None


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _mcp_error_text(exc: MCPError, tool: str, timeout: float) -> str:
    if exc.code == -32001 or "timed out" in str(exc).lower():
        return (
            f"tool '{tool}' timed out after {timeout:g} s (the server may still be working on it)"
        )
    return f"tool '{tool}' failed: {exc}"


def _safe_filename(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "server"
