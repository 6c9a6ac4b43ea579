"""OpenAPI tool servers against a small recording OpenAPI server of our own.

`RecordingAPI` serves an openapi.json (a path parameter, a JSON body, refs nested 8 deep and
a self-recursive ref, a route that answers 401) on a free loopback port from a thread, and
records every request exactly as it arrived (raw path, query, body), so the tests see what
actually went over the wire rather than what the client meant to send.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent.common.redact import Redactor
from agent.config.settings import ServerConfig, Settings
from agent.tools.openapi import resolve_refs
from agent.tools.registry import ToolRegistry
from tests.support.asgi_thread import serve

pytestmark = pytest.mark.anyio

DEPTH = 8  # levels of nested objects reached only through $refs
KEY = "sekrit-key-123"


def _level_schemas() -> dict[str, Any]:
    """L1 -> L2 -> ... -> L8, each a $ref away, the last holding a string leaf."""
    schemas: dict[str, Any] = {}
    for n in range(1, DEPTH + 1):
        child = {"$ref": f"#/components/schemas/L{n + 1}"} if n < DEPTH else {"type": "string"}
        field = f"l{n + 1}" if n < DEPTH else "leaf"
        schemas[f"L{n}"] = {"type": "object", "properties": {field: child}, "required": [field]}
    return schemas


def _openapi() -> dict[str, Any]:
    item_id = {"name": "item_id", "in": "path", "required": True, "schema": {"type": "string"}}
    node = {
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
        },
    }
    body = {"$ref": "#/components/schemas/ItemUpdate"}
    tree_body = {
        "type": "object",
        "properties": {
            "deep": {"$ref": "#/components/schemas/L1"},
            "root": {"$ref": "#/components/schemas/Node"},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "recording", "version": "1"},
        "paths": {
            "/items/{item_id}": {
                "parameters": [item_id],
                "get": {"operationId": "get_item"},
                "put": {
                    "operationId": "update_item",
                    "requestBody": {"content": {"application/json": {"schema": body}}},
                },
            },
            "/tree": {
                "post": {"requestBody": {"content": {"application/json": {"schema": tree_body}}}}
            },
            "/secure": {"get": {"operationId": "secure"}},
        },
        "components": {
            "schemas": {
                **_level_schemas(),
                "Node": node,
                "ItemUpdate": {"type": "object", "properties": {"name": {"type": "string"}}},
            }
        },
    }


class RecordingAPI:
    """Run as a context manager; `.url` is the base URL, `.requests` what arrived."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self._stack = contextlib.ExitStack()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def calls(self) -> list[dict[str, Any]]:
        """The requests other than the spec download at connect."""
        return [r for r in self.requests if r["raw_path"] != "/openapi.json"]

    def __enter__(self) -> RecordingAPI:
        app = Starlette(
            routes=[Route("/{rest:path}", self._handle, methods=["GET", "POST", "PUT"])]
        )
        self.port = self._stack.enter_context(serve(app))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    async def _handle(self, request: Request) -> Response:
        raw_path = request.scope["raw_path"].decode()
        body = await request.body()
        self.requests.append(
            {
                "method": request.method,
                "raw_path": raw_path,
                "query": request.scope["query_string"].decode(),
                "body": json.loads(body) if body else None,
            }
        )
        if raw_path == "/openapi.json":
            return JSONResponse(_openapi())
        if raw_path == "/secure":
            echoed = request.headers.get("authorization", "")
            return JSONResponse({"detail": f"bad credentials: Authorization: {echoed}"}, 401)
        segments = raw_path.split("/")
        if len(segments) == 3 and segments[1] == "items":
            return JSONResponse({"item_id": unquote(segments[2])})
        return JSONResponse({"detail": "not found"}, 404)


@pytest.fixture
def api() -> Iterator[RecordingAPI]:
    with RecordingAPI() as server:
        yield server


async def _call(
    api: RecordingAPI, tmp_path: Path, tool: str, arguments: dict[str, Any], **auth: Any
) -> Any:
    config = ServerConfig(name="api", type="openapi", url=api.url, **auth)
    settings = Settings(servers=(config,), state_dir=tmp_path)
    with anyio.fail_after(30):
        async with ToolRegistry(settings) as registry:
            assert await registry.connect_all() == []
            return await registry.call(f"api__{tool}", arguments)


async def _tools(api: RecordingAPI, tmp_path: Path) -> dict[str, Any]:
    config = ServerConfig(name="api", type="openapi", url=api.url)
    with anyio.fail_after(30):
        async with ToolRegistry(Settings(servers=(config,), state_dir=tmp_path)) as registry:
            assert await registry.connect_all() == []
            return {name: spec.input_schema for name, spec in registry.tools.items()}


async def test_path_traversal_in_a_path_parameter_stays_inside_the_segment(
    api: RecordingAPI, tmp_path: Path
) -> None:
    obs = await _call(api, tmp_path, "get_item", {"item_id": "../admin/delete"})
    assert not obs.is_error, obs.text
    assert [r["raw_path"] for r in api.calls()] == ["/items/..%2Fadmin%2Fdelete"]
    assert '"item_id": "../admin/delete"' in obs.text


async def test_question_mark_in_a_path_parameter_adds_no_query(
    api: RecordingAPI, tmp_path: Path
) -> None:
    obs = await _call(api, tmp_path, "get_item", {"item_id": "x?admin=1"})
    assert not obs.is_error, obs.text
    [request] = api.calls()
    assert request["raw_path"] == "/items/x%3Fadmin%3D1" and request["query"] == ""
    assert '"item_id": "x?admin=1"' in obs.text


@pytest.mark.parametrize("arguments", [{}, {"item_id": None}, {"item_id": ".."}, {"item_id": ""}])
async def test_missing_or_dot_segment_path_parameter_is_refused_without_a_request(
    api: RecordingAPI, tmp_path: Path, arguments: dict[str, Any]
) -> None:
    obs = await _call(api, tmp_path, "get_item", arguments)
    assert obs.is_error and "item_id" in obs.text
    assert api.calls() == []


async def test_call_leaves_the_callers_arguments_unchanged(
    api: RecordingAPI, tmp_path: Path
) -> None:
    arguments = {"item_id": "a b", "name": "renamed"}
    before = copy.deepcopy(arguments)
    obs = await _call(api, tmp_path, "update_item", arguments)
    assert not obs.is_error, obs.text
    assert arguments == before
    [request] = api.calls()
    assert request["method"] == "PUT" and request["raw_path"] == "/items/a%20b"
    assert request["body"] == {"name": "renamed"}


async def test_path_parameters_join_the_body_schema(api: RecordingAPI, tmp_path: Path) -> None:
    schema = (await _tools(api, tmp_path))["api__update_item"]
    assert set(schema["properties"]) == {"item_id", "name"}
    assert schema["required"] == ["item_id"]


def _types(node: Any) -> list[Any]:
    """Every value of a "type" key anywhere (the test spec has no property named "type")."""
    if isinstance(node, dict):
        own = [node["type"]] if "type" in node else []
        return own + [t for v in node.values() for t in _types(v)]
    if isinstance(node, list):
        return [t for v in node for t in _types(v)]
    return []


async def test_deep_ref_nesting_is_kept_and_a_self_reference_terminates(
    api: RecordingAPI, tmp_path: Path
) -> None:
    schema = (await _tools(api, tmp_path))["api__tree"]
    assert "$ref" not in json.dumps(schema)
    assert all(isinstance(t, str) for t in _types(schema))
    level = schema["properties"]["deep"]
    for n in range(2, DEPTH + 1):
        assert level["type"] == "object" and level["required"] == [f"l{n}"]
        level = level["properties"][f"l{n}"]
    assert level["properties"]["leaf"] == {"type": "string"}
    root = schema["properties"]["root"]
    assert root["properties"]["label"] == {"type": "string"}
    cut = root["properties"]["children"]["items"]
    assert cut == {"type": "object", "description": "(recursive: Node)"}


def test_nesting_deeper_than_twenty_levels_is_not_cut() -> None:
    inner: dict[str, Any] = {"type": "string"}
    for _ in range(30):
        inner = {"type": "object", "properties": {"x": {"type": "array", "items": inner}}}
    assert resolve_refs(inner, {}) == inner


def test_mutual_recursion_cuts_only_the_repeated_ref() -> None:
    doc = {
        "components": {
            "schemas": {
                "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
                "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}},
            }
        }
    }
    out = resolve_refs({"$ref": "#/components/schemas/A"}, doc)
    b = out["properties"]["b"]
    assert b["type"] == "object"
    assert b["properties"]["a"] == {"type": "object", "description": "(recursive: A)"}


async def test_401_hint_survives_redaction_and_the_servers_echo_does_not(
    api: RecordingAPI, tmp_path: Path
) -> None:
    obs = await _call(api, tmp_path, "secure", {}, key=KEY, auth_type="bearer")
    assert obs.is_error and "HTTP 401" in obs.text
    assert KEY not in obs.text and "[REDACTED]" in obs.text
    for words in ('"key" in mcp.json', "-H with an Authorization header", "Bearer <token>"):
        assert words in obs.text
    assert Redactor.of([KEY])(obs.text) == obs.text  # a second pass (a transcript) keeps it
