"""One OpenAPI tool server (mcpo, open-webui style): one tool per operation.

The spec is read once at connect; `$ref`s are resolved locally. Calls POST a JSON body
(or GET with query parameters); HTTP errors become error results the model can read.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import httpx2
import mcp.types as types

from agent.config import ServerConfig
from agent.redact import PATTERNS_ONLY, Redactor
from agent.tools.base import ProgressFn, ToolServer, ToolSpec

_METHODS = ("post", "get", "put", "patch", "delete")
_MAX_REF_DEPTH = 20


def resolve_refs(node: Any, root: dict[str, Any], depth: int = 0) -> Any:
    """Inline local `#/...` references (bounded, so cyclic schemas cannot loop forever)."""
    if depth > _MAX_REF_DEPTH:
        return {}
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = (
                    target.get(part.replace("~1", "/").replace("~0", "~"), {})
                    if isinstance(target, dict)
                    else {}
                )
            merged = {k: v for k, v in node.items() if k != "$ref"}
            return resolve_refs({**target, **merged}, root, depth + 1)
        return {k: resolve_refs(v, root, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve_refs(v, root, depth + 1) for v in node]
    return node


def _tool_name(method: str, path: str, op: dict[str, Any]) -> str:
    if method == "post" and re.fullmatch(r"/[A-Za-z0-9_.-]+", path):
        return path[1:]
    op_id = op.get("operationId")
    if isinstance(op_id, str) and op_id:
        return op_id
    return f"{method}_{path.strip('/').replace('/', '_') or 'root'}"


class OpenAPIServer(ToolServer):
    """Tools from an OpenAPI document; bearer auth from `key` or an Authorization header."""

    def __init__(
        self, config: ServerConfig, *, connect_timeout: float, redactor: Redactor = PATTERNS_ONLY
    ) -> None:
        super().__init__(config, connect_timeout=connect_timeout, redactor=redactor)
        self._http: httpx2.AsyncClient | None = None
        self._routes: dict[str, tuple[str, str, bool]] = {}  # tool -> (method, path, has_body)
        self._specs: list[ToolSpec] = []

    def _headers(self) -> dict[str, str]:
        headers = dict(self.config.headers)
        if self.config.key and self.config.auth_type != "none":
            headers.setdefault("Authorization", f"Bearer {self.config.key}")
        return headers

    async def _open(self, stack: contextlib.AsyncExitStack) -> None:
        base = (self.config.url or "").rstrip("/") + "/"
        self._http = await stack.enter_async_context(
            httpx2.AsyncClient(
                base_url=base,
                headers=self._headers(),
                follow_redirects=True,
                timeout=httpx2.Timeout(self.connect_timeout, read=300),
            )
        )
        response = await self._http.get(self.config.path.lstrip("/"))
        if response.status_code >= 400:
            raise ConnectionError(
                f"GET {self.config.path} returned HTTP {response.status_code}{_detail(response)}"
            )
        try:
            doc = response.json()
        except ValueError:
            raise ConnectionError(f"{self.config.path} is not JSON") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("paths"), dict):
            raise ConnectionError(f"{self.config.path} has no 'paths': not an OpenAPI document")
        self.instructions = (doc.get("info") or {}).get("description") or None
        self._load(doc)

    def _load(self, doc: dict[str, Any]) -> None:
        for path, item in doc["paths"].items():
            if not isinstance(item, dict):
                continue
            for method in _METHODS:
                op = item.get(method)
                if not isinstance(op, dict):
                    continue
                name = _tool_name(method, path, op)
                schema, has_body = _input_schema(op, doc)
                self._routes[name] = (method, path, has_body)
                self._specs.append(
                    ToolSpec(
                        server=self.name,
                        name=name,
                        description=op.get("description") or op.get("summary") or "",
                        input_schema=schema,
                        title=op.get("summary"),
                        read_only=method == "get",
                        destructive=method in ("delete", "put"),
                    )
                )

    async def list_tools(self) -> list[ToolSpec]:
        self.ensure_ready()
        return list(self._specs)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        progress: ProgressFn | None = None,
    ) -> types.CallToolResult:
        self.ensure_ready()
        assert self._http is not None
        route = self._routes.get(name)
        if route is None:
            return _error(f"unknown tool '{name}'")
        method, path, has_body = route
        url = path.lstrip("/")
        for key in list(arguments):
            if "{" + key + "}" in url:
                url = url.replace("{" + key + "}", str(arguments.pop(key)))
        try:
            response = await self._http.request(
                method.upper(),
                url,
                json=arguments if has_body else None,
                params=None if has_body else arguments,
                timeout=timeout,
            )
        except httpx2.TimeoutException:
            return _error(f"tool '{name}' timed out after {timeout:g} s")
        except httpx2.HTTPError as exc:
            return _error(self.redact(f"tool '{name}': request failed: {exc}"))
        result = _result(name, response)
        if result.is_error:  # the error text may echo what we sent
            return _error(self.redact(str(getattr(result.content[0], "text", ""))))
        return result


def _input_schema(op: dict[str, Any], doc: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    body = ((op.get("requestBody") or {}).get("content") or {}).get("application/json") or {}
    if body.get("schema"):
        schema = resolve_refs(body["schema"], doc)
        if isinstance(schema, dict) and schema.get("type", "object") == "object":
            return schema, True
    props: dict[str, Any] = {}
    required: list[str] = []
    for param in op.get("parameters") or []:
        param = resolve_refs(param, doc)
        if isinstance(param, dict) and param.get("in") in ("query", "path"):
            props[param["name"]] = param.get("schema") or {"type": "string"}
            if param.get("required"):
                required.append(param["name"])
    return {"type": "object", "properties": props, "required": required}, False


def _detail(response: httpx2.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return f": {text[:300]}" if text else ""
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return f": {json.dumps(detail, ensure_ascii=False)[:300]}"


_STATUS_HINTS = {
    401: 'authentication required: set the server\'s "key" in mcp.json or pass '
    "-H 'Authorization: Bearer ...'",
    403: "the key was rejected: check the server's key",
    404: "no such operation on the server",
    422: "the arguments do not match the tool's schema",
}


def _result(name: str, response: httpx2.Response) -> types.CallToolResult:
    if response.status_code >= 400:
        hint = _STATUS_HINTS.get(response.status_code, "the server failed")
        return _error(
            f"tool '{name}' failed with HTTP {response.status_code} ({hint}){_detail(response)}"
        )
    try:
        value = response.json()
    except ValueError:
        return types.CallToolResult(content=[types.TextContent(text=response.text)])
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=2)
    structured = value if isinstance(value, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured
    )


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
