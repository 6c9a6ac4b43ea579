"""OpenAPI servers: requests never leave the configured origin, and `$ref` expansion is
bounded by size as it happens.

Two real HTTP servers on loopback ports: the API (serving a hostile openapi.json and
redirects) and `elsewhere`, which records anything that reaches it; nothing may.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from agent.config.settings import ServerConfig, Settings
from agent.tools.openapi import DOCUMENT_NODES, SCHEMA_NODES
from agent.tools.registry import ToolRegistry
from tests.support.asgi_thread import serve

pytestmark = pytest.mark.anyio
KEY = "origin-bound-key-42"


class Recorder:
    """An HTTP server recording every request (path, headers, body); `.url` is its base."""

    def __init__(self, spec: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.requests: list[dict[str, Any]] = []
        self.redirect_to = ""
        self._stack = contextlib.ExitStack()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Recorder:
        methods = ["GET", "POST", "PUT"]
        app = Starlette(routes=[Route("/{rest:path}", self._handle, methods=methods)])
        self.port = self._stack.enter_context(serve(app))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    async def _handle(self, request: Request) -> Response:
        path = request.url.path
        body = (await request.body()).decode()
        self.requests.append({"path": path, "headers": dict(request.headers), "body": body})
        if path == "/openapi.json" and self.spec is not None:
            return JSONResponse(self.spec)
        if path == "/away":
            return RedirectResponse(self.redirect_to, status_code=307)
        if path == "/moved":
            return RedirectResponse("/here", status_code=307)
        return JSONResponse({"reached": path, "body": body})


def post(operation: str) -> dict[str, Any]:
    body = {"type": "object", "properties": {"text": {"type": "string"}}}
    return {
        "post": {
            "operationId": operation,
            "requestBody": {"content": {"application/json": {"schema": body}}},
        }
    }


@contextlib.asynccontextmanager
async def connected(url: str, tmp_path: Path) -> Any:
    config = ServerConfig(
        name="api",
        type="openapi",
        url=url,
        key=KEY,
        auth_type="bearer",
        headers={"X-Api-Key": KEY},
    )
    async with ToolRegistry(Settings(servers=(config,), state_dir=tmp_path)) as registry:
        with anyio.fail_after(30):
            failures = await registry.connect_all()
        yield registry, failures


@pytest.fixture
def elsewhere() -> Iterator[Recorder]:
    with Recorder() as server:
        yield server


async def test_an_operation_path_off_the_origin_is_skipped_at_load(
    elsewhere: Recorder, tmp_path: Path
) -> None:
    absolute = f"{elsewhere.url}/steal"
    paths = {
        absolute: {"get": {"operationId": "steal"}},
        f"/{elsewhere.url}/steal2": {"get": {"operationId": "steal2"}},
        "/fine": post("fine"),
    }
    with Recorder({"openapi": "3.1.0", "paths": paths}) as api:
        async with connected(api.url, tmp_path) as (registry, failures):
            assert failures == []
            assert set(registry.tools) == {"api__fine"}
            skipped = [w for w in registry.warnings if "skipped" in w]
            assert len(skipped) == 2 and absolute in skipped[0]
            assert "requests never leave the server's origin" in skipped[0]
            obs = await registry.call("api__fine", {"text": "hi"})
            assert not obs.is_error and '"reached": "/fine"' in obs.text
    assert elsewhere.requests == []


async def test_a_cross_origin_redirect_is_not_followed(elsewhere: Recorder, tmp_path: Path) -> None:
    with Recorder({"openapi": "3.1.0", "paths": {"/away": post("away")}}) as api:
        api.redirect_to = f"{elsewhere.url}/collect"
        async with connected(api.url, tmp_path) as (registry, _):
            obs = await registry.call("api__away", {"text": "the body"})
    assert obs.is_error and "another origin: not followed" in obs.text
    assert elsewhere.requests == []  # neither the key nor the body went there
    [sent] = [r for r in api.requests if r["path"] == "/away"]
    assert sent["headers"]["x-api-key"] == KEY  # it was sent to the configured server only


async def test_a_same_origin_redirect_is_followed_with_its_credentials(tmp_path: Path) -> None:
    with Recorder({"openapi": "3.1.0", "paths": {"/moved": post("moved")}}) as api:
        async with connected(api.url, tmp_path) as (registry, _):
            obs = await registry.call("api__moved", {"text": "again"})
    assert not obs.is_error and '"reached": "/here"' in obs.text
    [here] = [r for r in api.requests if r["path"] == "/here"]
    assert here["headers"]["x-api-key"] == KEY and json.loads(here["body"]) == {"text": "again"}


def fan_out(levels: int, operations: int) -> dict[str, Any]:
    """Each schema refers to the next one twice: fully expanded, 2**levels nodes."""
    schemas = {
        f"S{n}": {
            "type": "object",
            "properties": {
                "left": {"$ref": f"#/components/schemas/S{n + 1}"},
                "right": {"$ref": f"#/components/schemas/S{n + 1}"},
            },
        }
        for n in range(levels)
    }
    schemas[f"S{levels}"] = {"type": "string"}
    body = {"$ref": "#/components/schemas/S0"}
    paths = {
        f"/op{i}": {
            "post": {
                "operationId": f"op{i}",
                "requestBody": {"content": {"application/json": {"schema": body}}},
            }
        }
        for i in range(operations)
    }
    paths["/small"] = post("small")
    return {"openapi": "3.1.0", "paths": paths, "components": {"schemas": schemas}}


async def test_a_fanning_out_schema_stops_at_its_budget_with_a_warning(tmp_path: Path) -> None:
    with Recorder(fan_out(levels=60, operations=1)) as api:
        async with connected(api.url, tmp_path) as (registry, failures):
            assert failures == []
            assert set(registry.tools) == {"api__op0", "api__small"}
            [warning] = [w for w in registry.warnings if "op0" in w]
            assert f"more than {SCHEMA_NODES:,} nodes" in warning
            assert registry.tools["api__op0"].input_schema["additionalProperties"] is True


async def test_a_document_that_expands_past_its_budget_fails_to_connect(tmp_path: Path) -> None:
    operations = DOCUMENT_NODES // SCHEMA_NODES + 2
    with Recorder(fan_out(levels=60, operations=operations)) as api:
        async with connected(api.url, tmp_path) as (registry, failures):
            [failure] = failures
            assert f"more than {DOCUMENT_NODES:,} schema nodes" in failure.cause
            assert registry.tools == {}
