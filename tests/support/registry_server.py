"""A stand-in for the MCP Registry's read API, written from its public OpenAPI document
(modelcontextprotocol/registry docs/reference/api/openapi.yaml, version 2025-12-01):

- `GET /v0.1/servers?search=&limit=&cursor=&version=latest` -> `{"servers": [ServerResponse],
  "metadata": {"nextCursor", "count"}}`, `search` a substring of the name;
- `GET /v0.1/servers/{serverName}/versions/{version}` (`latest` allowed; the name
  URL-encoded) -> `{"server": server.json, "_meta": {...}}`, or 404 `{"error": ...}`.

Served with tests/support/asgi_thread.py; `SERVERS` holds what the tests install: a
remote with a secret header, an npm package with a required secret variable and
arguments, a pypi and an oci package, and a server whose instructions hold escapes and
a command (shown inert, never run). `requests` records every path asked for.

`faulty` answers as a hostile registry would, the fault named by the first part of the
path (`--registry http://127.0.0.1:PORT/FAULT`): a redirect to another host (`localhost`, the
same port, answering a listing that looks right), to `file://`
or to itself forever, an endless body, a JSON nested a hundred thousand deep.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

OFFICIAL = "io.modelcontextprotocol.registry/official"
SERVERS: list[dict[str, Any]] = [
    {
        "name": "io.example/weather",
        "description": "Forecasts from a hosted server",
        "version": "2.0.0",
        "remotes": [
            {
                "type": "streamable-http",
                "url": "https://weather.example.com/{region}/mcp",
                "variables": {
                    "region": {"description": "Region", "default": "eu", "choices": ["eu", "us"]}
                },
                "headers": [
                    {
                        "name": "X-Api-Key",
                        "description": "Your weather API key",
                        "isRequired": True,
                        "isSecret": True,
                    }
                ],
            }
        ],
        "packages": [
            {
                "registryType": "npm",
                "identifier": "@example/weather-mcp",
                "version": "2.0.0",
                "transport": {"type": "stdio"},
            }
        ],
    },
    {
        "name": "io.example/notes",
        "description": "Notes in a local folder",
        "version": "1.4.2",
        "packages": [
            {
                "registryType": "npm",
                "identifier": "@example/notes-mcp",
                "version": "1.4.2",
                "transport": {"type": "stdio"},
                "packageArguments": [
                    {"type": "positional", "valueHint": "folder", "isRequired": True},
                    {"type": "named", "name": "--mode", "value": "readonly"},
                ],
                "environmentVariables": [
                    {
                        "name": "NOTES_TOKEN",
                        "description": "Token for the notes service",
                        "isRequired": True,
                        "isSecret": True,
                    },
                    {"name": "NOTES_LOG", "description": "Log level", "default": "info"},
                ],
            }
        ],
    },
    {
        "name": "io.example/pytime",
        "description": "Time, from PyPI",
        "version": "0.9.1",
        "packages": [
            {"registryType": "pypi", "identifier": "example-time-mcp", "version": "0.9.1"}
        ],
    },
    {
        "name": "io.example/boxed",
        "description": "In a container \x1b]0;pwned\x07",
        "version": "3.1.0",
        "packages": [
            {
                "registryType": "oci",
                "identifier": "docker.io/example/boxed",
                "version": "3.1.0",
                "transport": {"type": "stdio"},
                "environmentVariables": [{"name": "BOX_MODE", "default": "safe"}],
            }
        ],
        "postInstallInstructions": "Run this now:\n\x1b[2J$(touch {marker})\nthen enjoy.",
    },
]


def app(servers: list[dict[str, Any]] | None = None) -> tuple[Starlette, list[str]]:
    """The stand-in over `servers` (SERVERS unless told), and the paths it was asked for."""
    listed = servers if servers is not None else SERVERS
    requests: list[str] = []

    def response(server: dict[str, Any]) -> dict[str, Any]:
        meta = {OFFICIAL: {"status": "active", "isLatest": True}}
        return {"server": server, "_meta": meta}

    async def list_servers(request: Request) -> JSONResponse:
        requests.append(str(request.url.path) + "?" + str(request.url.query))
        query = request.query_params.get("search", "").lower()
        limit = int(request.query_params.get("limit", "30"))
        start = int(request.query_params.get("cursor") or 0)
        matching = [s for s in listed if query in s["name"].lower()]
        page = matching[start : start + limit]
        more = start + limit < len(matching)
        metadata = {"count": len(page), **({"nextCursor": str(start + limit)} if more else {})}
        return JSONResponse({"servers": [response(s) for s in page], "metadata": metadata})

    async def one_version(request: Request) -> JSONResponse:
        requests.append(str(request.url.path))
        name = urllib.parse.unquote(request.path_params["name"])
        version = request.path_params["version"]
        for server in listed:
            if server["name"] == name and version in ("latest", server["version"]):
                return JSONResponse(response(server))
        return JSONResponse({"error": "Server not found"}, status_code=404)

    routes = [
        Route("/v0.1/servers", list_servers),
        Route("/v0.1/servers/{name:path}/versions/{version}", one_version),
    ]
    return Starlette(routes=routes), requests


NESTED = 100_000


def faulty() -> Starlette:
    """A registry whose every answer is the fault its URL's first part names."""

    async def endless() -> AsyncIterator[bytes]:
        yield b'{"servers": [{"server": {"name": "io.example/x", "description": "'
        while True:
            yield b"x" * 65536

    async def answer(request: Request) -> Response:
        fault, rest = request.path_params["fault"], request.path_params["rest"]
        port, query = request.url.port, f"?{request.url.query}" if request.url.query else ""
        if fault == "elsewhere":
            return RedirectResponse(f"http://localhost:{port}/other/v0.1/{rest}{query}")
        if fault == "other":  # what the other host answers: a listing that looks right
            return JSONResponse({"servers": [{"server": SERVERS[2]}], "metadata": {}})
        if fault == "file":
            return RedirectResponse("file:///etc/passwd")
        if fault == "loop":
            return RedirectResponse(f"/loop/v0.1/{rest}{query}")
        if fault == "endless":
            return StreamingResponse(endless(), media_type="application/json")
        if fault == "nested":
            return Response("[" * NESTED + "]" * NESTED, media_type="application/json")
        return JSONResponse({"error": f"no fault {fault}"}, status_code=404)

    return Starlette(routes=[Route("/{fault}/v0.1/{rest:path}", answer)])
