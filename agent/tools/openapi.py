"""One OpenAPI tool server (mcpo, open-webui style): one tool per operation.

The spec is read once at connect; `$ref`s are resolved locally, within a size budget, in a
worker thread. Calls POST a JSON body (or GET with query parameters), only ever to the
configured origin; HTTP errors become error results the model can read.
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp.types as types

from agent.common.redact import PATTERNS_ONLY, Redactor
from agent.config.settings import ServerConfig
from agent.tools.base import DEFAULT_MAX_TOOLS, NO_HOOKS, ProgressFn, ServerHooks, ToolServer
from agent.tools.tasks import TaskWatch
from agent.tools.toolspec import ToolSpec

_METHODS = ("post", "get", "put", "patch", "delete")
# $ref hops along one branch; a longer chain is cut like a cycle (it would be one in practice).
_MAX_REF_HOPS = 32
# Expansion budgets, in schema nodes: one operation's input schema (the registry sends at
# most 20,000 characters of it anyway) and the whole document.
SCHEMA_NODES = 20_000
DOCUMENT_NODES = 400_000
MAX_REDIRECTS = 5
_PATH_PARAM = re.compile(r"\{([^{}]+)\}")
_DOT_SEGMENTS = ("", ".", "..")  # would be normalized away by the URL, changing the path


class SchemaTooLarge(Exception):
    """Expanding `$ref`s went past its node budget (refs that fan out grow exponentially)."""


@dataclass
class Budget:
    """How many schema nodes (objects and lists) expansion may still build."""

    left: int

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise SchemaTooLarge


class SchemaCycle(Exception):
    """A `$ref` names a schema it is part of (asked to refuse rather than cut cycles)."""


def resolve_refs(
    node: Any,
    root: dict[str, Any],
    chain: tuple[str, ...] = (),
    budget: Budget | None = None,
    *,
    refuse_cycles: bool = False,
) -> Any:
    """Inline local `#/...` references; cut only cycles (and absurdly long ref chains),
    or with `refuse_cycles` raise SchemaCycle naming the ref.

    `chain` is the refs being expanded above this node, so nesting depth itself is never
    limited: only a ref that is already being expanded (a cycle) is replaced, and only that
    node, by a permissive object schema. Scalars are returned untouched, keeping the schema
    valid JSON Schema (a model API rejects e.g. `{"type": {}}`). Size is what is bounded,
    as it grows: a schema whose refs each name the next one twice doubles per level, so
    every node built is paid from `budget` and SchemaTooLarge stops it at once.
    """
    budget = budget if budget is not None else Budget(SCHEMA_NODES)
    strict = refuse_cycles
    if isinstance(node, list):
        budget.spend()
        return [resolve_refs(v, root, chain, budget, refuse_cycles=strict) for v in node]
    if not isinstance(node, dict):
        return node
    budget.spend()
    ref = node.get("$ref")
    if not (isinstance(ref, str) and ref.startswith("#/")):
        return {
            k: resolve_refs(v, root, chain, budget, refuse_cycles=strict) for k, v in node.items()
        }
    siblings = {k: v for k, v in node.items() if k != "$ref"}
    if ref in chain or len(chain) >= _MAX_REF_HOPS:
        name = ref.rsplit("/", 1)[-1]
        if strict and ref in chain:
            raise SchemaCycle(ref)
        if strict:
            raise SchemaTooLarge  # a chain this long is over any budget
        return {**siblings, "type": "object", "description": f"(recursive: {name})"}
    target = _ref_target(ref, root)
    return resolve_refs({**target, **siblings}, root, (*chain, ref), budget, refuse_cycles=strict)


def _ref_target(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    """The schema a `#/a/b` pointer names; `{}` (anything) when it names no object."""
    target: Any = root
    for part in ref[2:].split("/"):
        key = part.replace("~1", "/").replace("~0", "~")
        target = target.get(key) if isinstance(target, dict) else None
    return target if isinstance(target, dict) else {}


def fill_path(path: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]] | str:
    """Put path parameters into `path`, each percent-encoded as one whole segment.

    Returns (path, the remaining arguments), or an error message. Encoding with no safe
    characters means a value can neither add segments (`../admin`) nor a query (`x?a=1`);
    values that are dot segments or empty are refused because URLs normalize them away.
    The caller's dict is never changed: it is what transcripts and JSON output show.
    """
    rest = dict(arguments)
    names = _PATH_PARAM.findall(path)
    missing = [n for n in names if rest.get(n) is None]
    if missing:
        return f"missing required path parameter(s): {', '.join(missing)}"
    values = {n: str(rest.pop(n)) for n in names}
    bad = [n for n, v in values.items() if v in _DOT_SEGMENTS]
    if bad:
        return f"path parameter(s) {', '.join(bad)} cannot be empty, '.' or '..'"
    filled = _PATH_PARAM.sub(lambda m: urllib.parse.quote(values[m.group(1)], safe=""), path)
    return filled, rest


def _tool_name(method: str, path: str, op: dict[str, Any]) -> str:
    if method == "post" and re.fullmatch(r"/[A-Za-z0-9_.-]+", path):
        return path[1:]
    op_id = op.get("operationId")
    if isinstance(op_id, str) and op_id:
        return op_id
    return f"{method}_{path.strip('/').replace('/', '_') or 'root'}"


class LeavesOrigin(Exception):
    """A request (or a redirect) would go to another origin than the configured one."""


class OpenAPIServer(ToolServer):
    """Tools from an OpenAPI document; bearer auth from `key` or an Authorization header.

    Every request stays on the configured origin (scheme, host, port): the credentials in
    the headers are for that server only. An operation whose path would lead elsewhere (an
    absolute URL in the spec) is skipped at load, and a redirect is followed only within
    the origin; one to another origin is refused, so no header or body is carried there.
    """

    def __init__(
        self,
        config: ServerConfig,
        *,
        connect_timeout: float,
        redactor: Redactor = PATTERNS_ONLY,
        hooks: ServerHooks = NO_HOOKS,
        max_tools: int = DEFAULT_MAX_TOOLS,
    ) -> None:
        super().__init__(
            config,
            connect_timeout=connect_timeout,
            redactor=redactor,
            hooks=hooks,
            max_tools=max_tools,
        )
        self._http: httpx2.AsyncClient | None = None
        self._origin: httpx2.URL | None = None
        self._routes: dict[str, tuple[str, str, bool]] = {}  # tool -> (method, path, has_body)
        self._specs: list[ToolSpec] = []

    def _headers(self) -> dict[str, str]:
        headers = dict(self.config.headers)
        if self.config.key and self.config.auth_type != "none":
            headers.setdefault("Authorization", f"Bearer {self.config.key}")
        return headers

    async def _open(self, stack: contextlib.AsyncExitStack) -> None:
        base = (self.config.url or "").rstrip("/") + "/"
        self._origin = httpx2.URL(base)
        self._http = await stack.enter_async_context(
            httpx2.AsyncClient(
                base_url=base,
                headers=self._headers(),
                follow_redirects=False,  # _send follows them, within the origin only
                timeout=httpx2.Timeout(self.connect_timeout, read=300),
            )
        )
        try:
            response = await self._send(
                self._http.build_request("GET", self.config.path.lstrip("/"))
            )
        except LeavesOrigin as exc:
            raise ConnectionError(f"GET {self.config.path}: {exc}") from None
        if response.status_code >= 400:
            raise ConnectionError(
                f"GET {self.config.path} returned HTTP {response.status_code}{_detail(response)}"
            )
        # Parsing and $ref expansion can take a while on a big spec: off the event loop, so
        # the connect timeout and Ctrl-C keep working (the budgets bound the thread's work).
        self._load_result(
            await anyio.to_thread.run_sync(self._parse, response.content, abandon_on_cancel=True)
        )

    def _parse(self, content: bytes) -> tuple[str | None, list[ToolSpec], list[str]] | str:
        """The spec's description, its tools and warnings; or why it is unusable."""
        try:
            doc = json.loads(content)
        except (ValueError, RecursionError):
            return f"{self.config.path} is not JSON"
        if not isinstance(doc, dict) or not isinstance(doc.get("paths"), dict):
            return f"{self.config.path} has no 'paths': not an OpenAPI document"
        try:
            specs, warnings = self._load(doc)
        except (SchemaTooLarge, RecursionError):
            return (
                f"{self.config.path}: its $refs expand to more than {DOCUMENT_NODES:,} schema "
                "nodes (refs that fan out grow exponentially); not loaded"
            )
        info = doc.get("info")
        description = info.get("description") if isinstance(info, dict) else None
        return (description if isinstance(description, str) else None), specs, warnings

    def _load_result(self, loaded: tuple[str | None, list[ToolSpec], list[str]] | str) -> None:
        if isinstance(loaded, str):
            raise ConnectionError(loaded)
        self.instructions, self._specs, self.list_warnings = loaded

    def _load(self, doc: dict[str, Any]) -> tuple[list[ToolSpec], list[str]]:
        specs: list[ToolSpec] = []
        warnings: list[str] = []
        document = Budget(DOCUMENT_NODES)
        for path, item in doc["paths"].items():
            if not isinstance(item, dict):
                continue
            for method in _METHODS:
                op = item.get(method)
                if not isinstance(op, dict):
                    continue
                where = f"server '{self.name}': operation {method.upper()} {str(path)[:200]!r}"
                if (problem := self._off_origin(str(path))) is not None:
                    warnings.append(f"{where} skipped: {problem}")
                    continue
                name = _tool_name(method, path, op)
                shared = item.get("parameters")
                shared = shared if isinstance(shared, list) else []
                budget = Budget(min(SCHEMA_NODES, document.left))
                try:
                    schema, has_body = _input_schema(op, doc, shared, budget)
                except (SchemaTooLarge, RecursionError):
                    if document.left <= SCHEMA_NODES:
                        raise
                    warnings.append(
                        f"{where}: its input schema expands to more than {SCHEMA_NODES:,} "
                        "nodes ($refs that fan out); the model gets it without a schema"
                    )
                    schema, has_body = {"type": "object", "additionalProperties": True}, True
                document.left -= min(SCHEMA_NODES, document.left) - budget.left
                self._routes[name] = (method, path, has_body)
                specs.append(
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
        return specs, warnings

    def _off_origin(self, path: str) -> str | None:
        """Why requests for `path` would not go to the configured origin, or None."""
        assert self._http is not None and self._origin is not None
        try:
            url = self._http.build_request("GET", _PATH_PARAM.sub("x", path).lstrip("/")).url
        except (httpx2.InvalidURL, ValueError):
            return "its path is not a valid URL path"
        if url.origin != self._origin.origin:
            return (
                f"its path leads to {url.origin.scheme}://{url.origin.host}, not to the "
                f"configured {self._origin.origin.scheme}://{self._origin.origin.host} "
                "(requests never leave the server's origin)"
            )
        return None

    async def _send(self, request: httpx2.Request) -> httpx2.Response:
        """Send, following redirects (at most MAX_REDIRECTS) only within the origin."""
        assert self._http is not None and self._origin is not None
        for _ in range(MAX_REDIRECTS + 1):
            if request.url.origin != self._origin.origin:
                raise LeavesOrigin(
                    f"the server redirected to {request.url.origin.scheme}://"
                    f"{request.url.origin.host}, another origin: not followed (credentials "
                    "and arguments are only sent to the configured server)"
                )
            response = await self._http.send(request)
            if response.next_request is None:
                return response
            await response.aclose()
            request = response.next_request
        raise LeavesOrigin(f"more than {MAX_REDIRECTS} redirects: not followed")

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
        meta: dict[str, Any] | None = None,
        task: TaskWatch | None = None,
    ) -> types.CallToolResult:
        """`task` is unused: an OpenAPI operation never becomes a task."""
        self.ensure_ready()
        assert self._http is not None
        route = self._routes.get(name)
        if route is None:
            return _error(f"unknown tool '{name}'")
        method, path, has_body = route
        filled = fill_path(path, arguments)
        if isinstance(filled, str):
            return _error(f"tool '{name}': {filled}")
        url, rest = filled
        try:
            request = self._http.build_request(
                method.upper(),
                url.lstrip("/"),
                json=rest if has_body else None,
                params=None if has_body else rest,
                timeout=timeout,
            )
            response = await self._send(request)
        except LeavesOrigin as exc:
            return _error(f"tool '{name}': {exc}")
        except httpx2.TimeoutException:
            return _error(f"tool '{name}' timed out after {timeout:g} s")
        except httpx2.HTTPError as exc:
            return _error(self.redact(f"tool '{name}': request failed: {exc}"))
        return _result(name, response, self.redact)


def _input_schema(
    op: dict[str, Any], doc: dict[str, Any], shared: list[Any], budget: Budget
) -> tuple[dict[str, Any], bool]:
    """The tool's arguments: a JSON body's schema (plus path parameters), or the parameters.

    Path parameters join a body's schema too, or the model could never fill them in.
    """
    params = _parameters([*shared, *(op.get("parameters") or [])], doc, budget)
    body = ((op.get("requestBody") or {}).get("content") or {}).get("application/json") or {}
    if body.get("schema"):
        schema = resolve_refs(body["schema"], doc, budget=budget)
        if isinstance(schema, dict) and schema.get("type", "object") == "object":
            path_params = [p for p in params if p["in"] == "path"]
            return _with_params(schema, path_params) if path_params else schema, True
    return _with_params({"type": "object", "properties": {}}, params), False


def _parameters(raw: list[Any], doc: dict[str, Any], budget: Budget) -> list[dict[str, Any]]:
    """Query and path parameters, resolved; an operation's override its path item's."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for param in raw:
        param = resolve_refs(param, doc, budget=budget)
        if isinstance(param, dict) and param.get("in") in ("query", "path") and param.get("name"):
            found[(param["name"], param["in"])] = param
    return list(found.values())


def _with_params(schema: dict[str, Any], params: list[dict[str, Any]]) -> dict[str, Any]:
    props = dict(schema.get("properties") or {})
    required = list(schema.get("required") or [])
    for param in params:
        props[param["name"]] = param.get("schema") or {"type": "string"}
        if (param.get("required") or param["in"] == "path") and param["name"] not in required:
            required.append(param["name"])
    return {**schema, "type": "object", "properties": props, "required": required}


def _detail(response: httpx2.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return f": {text[:300]}" if text else ""
    detail = body.get("detail", body) if isinstance(body, dict) else body
    return f": {json.dumps(detail, ensure_ascii=False)[:300]}"


# Hints are ours and must survive redaction (which masks `Bearer <4+ chars>` and
# `Authorization: <value>`), so they never write a header the way it is sent.
_STATUS_HINTS = {
    401: 'authentication required: set the server\'s "key" in mcp.json, or pass -H with an '
    'Authorization header whose value is "Bearer <token>"',
    403: "the key was rejected: check the server's key",
    404: "no such operation on the server",
    422: "the arguments do not match the tool's schema",
}


def _result(name: str, response: httpx2.Response, redact: Redactor) -> types.CallToolResult:
    """The response as a tool result; on HTTP errors, our hint plus the server's redacted detail.

    Only the detail is redacted: it may echo what we sent (a key), while the hint is ours.
    """
    if response.status_code >= 400:
        hint = _STATUS_HINTS.get(response.status_code, "the server failed")
        return _error(
            f"tool '{name}' failed with HTTP {response.status_code} ({hint})"
            f"{redact(_detail(response))}"
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
