"""MCP Apps servers in a terminal: the model never gets an app's plumbing.

Real servers from npm (`server-system-monitor`, `server-basic-vanillajs` 2.0.3, as the ext-apps
repository publishes them) through `python run_mcp.py`, asserted on what the scripted model
received: the app-only tool `poll-system-stats` is never offered, and no `ui://` page (428 KB
of script) is listed for, attached to or read into a request.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import everything_stdio_command, npm_server_js

pytestmark = pytest.mark.slow

PAGE = "ui://system-monitor/mcp-app.html"


def app_server(package: str) -> dict[str, Any]:
    return {"command": "node", "args": [str(npm_server_js(package)), "--stdio"]}


def app_servers(tmp_path: Path, *, everything: bool = False) -> Path:
    """An mcpServers file as a Claude Desktop user writes it (`node dist/index.js --stdio`
    stands in for `npx -y @modelcontextprotocol/server-system-monitor --stdio`)."""
    servers: dict[str, Any] = {
        "sysmon": app_server("server-system-monitor"),
        "clock": app_server("server-basic-vanillajs"),
    }
    if everything:  # publishes ordinary resources, so the model gets read_resource
        command, args = everything_stdio_command()
        servers["every"] = {"command": command, "args": args}
    config = mcp_json(tmp_path, servers)
    return config


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def test_app_only_tools_and_app_pages_never_reach_the_model(tmp_path: Path) -> None:
    config = app_servers(tmp_path, everything=True)
    script = [
        tool_calls(
            ("read_resource", {"server": "sysmon", "uri": PAGE}),
            ("sysmon__get-system-info", {}),
        ),
        text("Your machine is fine."),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            ["--mcp-config", str(config), "--yes", "-p", f"how is my machine? @sysmon:{PAGE}"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "Your machine is fine.\n"
    assert "app's page (MCP Apps)" in proc.stderr  # the @-attachment was refused, visibly
    assert "http://127.0.0.1" not in proc.stderr  # -p never shows a page (nor serves one)
    for request in llm.requests:
        names = tool_names(request)
        assert "sysmon__get-system-info" in names and "clock__get-time" in names
        assert not any("poll-system-stats" in name for name in names)
        own = {t["function"]["name"]: t["function"] for t in request["tools"]}
        assert "ui://" not in own["read_resource"]["description"]
        assert "<!doctype html" not in json.dumps(request).lower()  # no page, anywhere
    first_user = next(m for m in llm.requests[0]["messages"] if m["role"] == "user")
    assert len(first_user["content"]) < 500  # the request as typed, nothing attached
    refused, info = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "app's page (MCP Apps)" in refused and "hostname" in info
    llm.assert_complete()


def test_tools_listing_marks_tools_with_an_app_and_the_app_only_ones(tmp_path: Path) -> None:
    config = app_servers(tmp_path)
    with ScriptedLLM() as llm:
        proc = run_cli(
            ["--mcp-config", str(config), "-i"],
            tmp_path,
            base_url=llm.base_url,
            stdin="/tools\n/tools get-system-info\n/resources\n",
        )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "sysmon__get-system-info · destructive + app" in out
    assert "clock__get-time · destructive + app" in out
    assert "sysmon › poll-system-stats · destructive, app only" in out
    assert f"comes with an app: {PAGE} (/app sysmon__get-system-info)" in out
    assert "no resources" in out and "2 app page(s) (MCP Apps): /apps" in out
    assert llm.requests == []  # listing asks no model


CAPS_SERVER = """
from mcp.server.mcpserver import MCPServer, Context
from mcp.types import ToolAnnotations

app = MCPServer("caps")


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def client_capabilities(ctx: Context) -> str:
    caps = ctx.session.client_params.capabilities
    return repr(caps.model_dump(by_alias=True, exclude_none=True))


app.run()
"""


@pytest.mark.parametrize("mode", ["repl", "single-shot"])
def test_the_ui_extension_is_declared_only_where_apps_are_shown(tmp_path: Path, mode: str) -> None:
    server = tmp_path / "caps_server.py"
    server.write_text(CAPS_SERVER)
    config = mcp_json(tmp_path, {"caps": {"command": sys.executable, "args": [str(server)]}})
    script = [tool_calls(("caps__client_capabilities", {})), text("checked")]
    args = ["--mcp-config", str(config)]
    with ScriptedLLM(*script) as llm:
        if mode == "repl":
            proc = run_cli([*args, "-i"], tmp_path, base_url=llm.base_url, stdin="caps?\n")
        else:
            proc = run_cli([*args, "-p", "caps?"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    [seen] = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "{" in seen and "Error" not in seen  # the server reported what it was told
    declared = "'io.modelcontextprotocol/ui': {'mimeTypes': ['text/html;profile=mcp-app']}"
    assert (declared in seen) == (mode == "repl")
