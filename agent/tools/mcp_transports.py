"""One opener per MCP transport (stdio, SSE, streamable HTTP): each turns what a connection
knows into the SDK transport it hands to `Client`, its resources entered on the attempt's
exit stack. A new transport is a new opener here and a line in OPENERS, not a branch in
the connection class.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from agent.config.server_env import server_env
from agent.config.settings import ServerConfig
from agent.tools.mcp_stdio import StopGrace, ToolCap, stdio_transport
from agent.tools.prestart import Prestarted
from agent.tools.sandbox import launch_argv
from agent.tools.server_errors import ConnectProblem
from agent.tools.server_log import ServerLog

ResponseHook = Callable[[httpx2.Response], Awaitable[None]]


@dataclass(frozen=True)
class Opening:
    """What an opener needs of the connection it opens a transport for.

    `on_response` sees every HTTP response (the connection notes the status of a failed
    one, which the SDK drops). For stdio: `prestarted` is a server started before the
    imports, `tool_cap` the most tools its reader parses from one page, `stop` its grace
    after stdin closes.
    """

    config: ServerConfig
    connect_timeout: float
    environ: Mapping[str, str]
    log: ServerLog
    auth: httpx2.Auth | None = None
    on_response: ResponseHook | None = None
    prestarted: Prestarted | None = None
    tool_cap: ToolCap | None = None
    stop: StopGrace | None = None

    def hooks(self) -> dict[str, list[ResponseHook]]:
        return {"response": [self.on_response]} if self.on_response is not None else {}


async def open_stdio(opening: Opening, stack: contextlib.AsyncExitStack) -> Any:
    """A child process whose stderr is pumped into the server's log (or the prestarted one)."""
    cfg = opening.config
    if cfg.cwd and not await anyio.Path(cfg.cwd).is_dir():
        raise ConnectProblem(f"working directory not found: {cfg.cwd} (check 'cwd')")
    command, *args = launch_argv(cfg)  # in bwrap when it is sandboxed (agent/tools/sandbox.py)
    params = StdioServerParameters(
        command=command,
        args=args,
        env=server_env(cfg.env, opening.environ),
        cwd=cfg.cwd,
        # One bad byte on stdout would otherwise stall the connection for good.
        encoding_error_handler="replace",
    )
    started = opening.prestarted
    errlog = await opening.log.stderr_pipe(stack, started.stderr if started else None)
    if started is not None:
        started.stderr = -1  # the log pump owns it now
    return stdio_transport(
        params,
        errlog=errlog,
        prestarted=started,
        tool_cap=opening.tool_cap,
        stop=opening.stop,
        log=opening.log.write,
    )


async def open_sse(opening: Opening, stack: contextlib.AsyncExitStack) -> Any:
    """SSE on a client of ours made as the SDK would make it (its 30 s timeouts, 300 s to
    read), with the connection's response hook."""

    def http_client(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout or httpx2.Timeout(30, read=300),
            auth=auth,
            event_hooks=opening.hooks(),
        )

    return sse_client(
        opening.config.url or "",
        headers=dict(opening.config.headers),
        timeout=opening.connect_timeout,
        auth=opening.auth,
        httpx_client_factory=http_client,
    )


async def open_http(opening: Opening, stack: contextlib.AsyncExitStack) -> Any:
    """Streamable HTTP on a client of ours (redirects followed, a long read timeout)."""
    http = httpx2.AsyncClient(
        auth=opening.auth,
        headers=dict(opening.config.headers),
        timeout=httpx2.Timeout(opening.connect_timeout, read=300),
        follow_redirects=True,
        event_hooks=opening.hooks(),
    )
    await stack.enter_async_context(http)
    return streamable_http_client(opening.config.url or "", http_client=http)


OPENERS: dict[str, Callable[[Opening, contextlib.AsyncExitStack], Awaitable[Any]]] = {
    "stdio": open_stdio,
    "sse": open_sse,
    "http": open_http,
}
