"""Conformance client for @modelcontextprotocol/conformance, built on the agent's own layer.

The runner appends the server URL as the last argument and names the scenario in
MCP_CONFORMANCE_SCENARIO. We connect through MCPServerConnection (mode auto, as a modern
client would), list tools, and call what the scenario expects.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent.config import ServerConfig  # noqa: E402
from agent.tools.mcp import ClientCallbacks, MCPServerConnection, roots_callback  # noqa: E402

SCENARIO_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
    "sse-retry": ("test_reconnection", {}),
}


async def accept_defaults(context: Any, params: Any) -> types.ElicitResult:
    """Accept a form elicitation, filling every field that has a schema default."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {
        key: prop["default"]
        for key, prop in (schema.get("properties") or {}).items()
        if isinstance(prop, dict) and "default" in prop
    }
    return types.ElicitResult(action="accept", content=content)


async def canned_sampling(context: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(text="conformance"), model="conformance"
    )


async def main(url: str, scenario: str) -> int:
    config = ServerConfig(name="conformance", type="http", url=url, mode="auto")
    callbacks = ClientCallbacks(
        sampling=canned_sampling,
        elicitation=accept_defaults,
        list_roots=roots_callback([Path.cwd()]),
    )
    server = MCPServerConnection(
        config,
        connect_timeout=20,
        log_dir=Path(tempfile.gettempdir()) / "mcp-conformance",
        callbacks=callbacks,
    )
    async with anyio.create_task_group() as tg:
        try:
            await server.start(tg)
            tools = {t.name for t in await server.list_tools()}
            name, arguments = SCENARIO_CALLS.get(scenario, ("", {}))
            if name in tools:
                result = await server.call_tool(name, arguments, timeout=30)
                print(f"{name}: is_error={result.is_error}")
        finally:
            await server.close()
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
