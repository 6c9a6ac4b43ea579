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
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
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
