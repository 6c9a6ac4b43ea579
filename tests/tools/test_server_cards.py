"""Server Cards (SEP-2127) through the CLI: `--server-url http://127.0.0.1:PORT` with no path
reads the host's card, connects to the endpoint it names, and /servers shows the card.

The host is tests/support/modern_server.py's streamable HTTP app with a `/.well-known/` route in
front of it (the card, or the catalog form pointing at a card); the card's endpoint is
built from the request, so the card is right for whatever port the test got.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.support import modern_server
from tests.support.asgi_thread import serve
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls

Card = Callable[[str], dict[str, Any]]


def card(endpoint: str, name: str = "io.example/notes") -> dict[str, Any]:
    return {
        "$schema": "https://static.modelcontextprotocol.io/schemas/v2/server-card.schema.json",
        "name": name,
        "version": "1.4.2",
        "description": "Notes of the day, and greetings",
        "remotes": [
            {"type": "sse", "url": "https://elsewhere.example/sse"},
            {"type": "streamable-http", "url": endpoint},
        ],
    }


def host(documents: dict[str, Card]) -> Any:
    """The MCP app behind a router for `documents` (path -> card given the origin)."""
    mcp_app = modern_server.app()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path in documents:
            request = Request(scope, receive)
            origin = f"http://{request.headers['host']}"
            response: Response = JSONResponse(documents[path](origin))
            await response(scope, receive, send)
        elif scope["type"] == "http" and path.startswith("/.well-known/"):
            await Response(status_code=404)(scope, receive, send)
        else:
            await mcp_app(scope, receive, send)

    return app


def greet_script() -> list[Any]:
    return [tool_calls(("notes__greet", {"name": "Ada"})), text("greeted")]


def run_against(port: int, tmp_path: Path, llm: ScriptedLLM, *args: str) -> Any:
    return run_cli(
        ["--server-url", f"http://127.0.0.1:{port}", "--server-name", "notes", *args],
        tmp_path,
        base_url=llm.base_url,
    )


def test_a_card_on_the_host_leads_to_a_working_connection(tmp_path: Path) -> None:
    documents = {"/.well-known/mcp/server-card.json": lambda origin: card(f"{origin}/mcp")}
    with serve(host(documents), lifespan="on") as port, ScriptedLLM(*greet_script()) as llm:
        proc = run_against(port, tmp_path, llm, "-p", "greet Ada", "-y")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "greeted\n"
    first, second = llm.requests
    assert "notes__greet" in [t["function"]["name"] for t in first["tools"]]
    assert "hello Ada" in json.dumps(second["messages"][-1])
    llm.assert_complete()


def test_servers_shows_the_cards_name_version_and_description(tmp_path: Path) -> None:
    documents = {"/.well-known/mcp/server-card": lambda origin: card("/mcp")}  # relative URL
    with serve(host(documents), lifespan="on") as port, ScriptedLLM() as llm:
        proc = run_cli(
            ["-c", "http", "--server-url", f"http://127.0.0.1:{port}/", "--server-name", "notes"]
            + ["-i"],
            tmp_path,
            base_url=llm.base_url,
            stdin="/servers\n",
        )
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "server card of notes: io.example/notes 1.4.2 — Notes of the day, and greetings" in out
    assert f"http://127.0.0.1:{port}/.well-known/mcp/server-card" in out


def test_a_config_entry_with_only_a_base_url_follows_the_catalog_to_the_card(
    tmp_path: Path,
) -> None:
    documents = {
        "/.well-known/mcp/catalog.json": lambda origin: {
            "specVersion": "draft",
            "entries": [
                {
                    "identifier": "urn:air:example.com:notes",
                    "displayName": "Notes",
                    "type": "application/mcp-server-card+json",
                    "url": "/mcp/server-card",
                }
            ],
        },
        "/mcp/server-card": lambda origin: card(f"{origin}/mcp"),
    }
    with serve(host(documents), lifespan="on") as port, ScriptedLLM(*greet_script()) as llm:
        config = mcp_json(tmp_path, {"notes": {"url": f"http://127.0.0.1:{port}"}})
        proc = run_cli(
            ["--mcp-config", str(config), "-p", "greet Ada", "-y"], tmp_path, base_url=llm.base_url
        )
    assert proc.returncode == 0, proc.stderr
    assert "hello Ada" in json.dumps(llm.requests[1]["messages"][-1])


def test_a_card_pointing_at_another_origin_is_refused(tmp_path: Path) -> None:
    documents = {
        "/.well-known/mcp/server-card.json": lambda origin: card("https://attacker.example/mcp")
    }
    with serve(host(documents), lifespan="on") as port, ScriptedLLM() as llm:
        proc = run_against(port, tmp_path, llm, "-p", "greet Ada", "-y")
    assert proc.returncode == 1
    assert "names endpoints on another origin only" in proc.stderr
    assert "https://attacker.example/mcp" in proc.stderr
    assert not llm.requests  # the run stopped before the model was asked


def test_an_invalid_or_missing_card_is_an_error_naming_what_was_tried(tmp_path: Path) -> None:
    invalid = {"/.well-known/mcp/server-card.json": lambda origin: {"version": "1"}}
    with serve(host(invalid), lifespan="on") as port, ScriptedLLM() as llm:
        proc = run_against(port, tmp_path, llm, "-p", "hi")
    assert proc.returncode == 1
    assert f"server card http://127.0.0.1:{port}/.well-known/mcp/server-card.json" in proc.stderr
    assert "has no 'name'" in proc.stderr

    async def nothing(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await Response(status_code=404)(scope, receive, send)

    with serve(nothing) as port, ScriptedLLM() as llm:
        proc = run_against(port, tmp_path, llm, "-p", "hi")
    assert proc.returncode == 1
    message = " ".join(proc.stderr.split())
    assert f"no server card at http://127.0.0.1:{port}/.well-known/mcp/server-card.json" in message
    assert f"http://127.0.0.1:{port}/.well-known/mcp/catalog.json" in message
