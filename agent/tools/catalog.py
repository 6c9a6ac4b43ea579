"""Resources and prompts of the connected MCP servers: listed on demand, read, expanded.

Tools are the registry's business (the model needs them every step); resources and prompts
are asked for by people (/resources, /prompts, `@server:uri`) or by the model through the
agent's `read_resource` tool. They are listed at start, when asked, and again when a server
says its prompts or resources changed (the registry relays those notifications here).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import mcp.types as types
from mcp import MCPError

from agent.common.errors import ToolServerError
from agent.tools.agent_tool import AgentTool
from agent.tools.base import ToolServer
from agent.tools.registry import ListKind, ToolRegistry
from agent.tools.results import Image, Observation, block_text, envelope, error_observation
from agent.tools.server_errors import ServerStopped, describe_exception
from agent.tools.uimeta import is_app_page, is_app_uri

READ_RESOURCE = "read_resource"
LIST_TIMEOUT = 10.0  # seconds one server gets to list its resources or prompts
REF_PATTERN = re.compile(r"(?<!\S)@([A-Za-z0-9_.-]+):(\S+)")
MAX_RESOURCE_CHARS = 100_000
COMPLETE_TIMEOUT = 2.0  # seconds a server gets to offer completions (Tab is waiting)
TEMPLATES_LISTED = 20  # resource templates named in read_resource's description


def untrusted(server: str, text: str) -> str:
    """Server-published text for the model, in the same envelope as tool output."""
    return envelope(server, text)


@dataclass
class Catalog:
    registry: ToolRegistry
    resources: list[tuple[str, types.Resource]] = field(default_factory=list)
    templates: list[tuple[str, types.ResourceTemplate]] = field(default_factory=list)
    prompts: list[tuple[str, types.Prompt]] = field(default_factory=list)
    app_pages: list[tuple[str, types.Resource]] = field(default_factory=list)  # ui:// (apps)
    errors: dict[str, str] = field(default_factory=dict)
    attached: set[tuple[str, str]] = field(default_factory=set)  # @server:uri of past requests
    changed: dict[tuple[str, str], str] = field(default_factory=dict)  # re-read after updates
    _own_tools: dict[str, AgentTool] = field(default_factory=dict)
    # Reads that load a skill instead (agent.extensions.skills): (server, uri) -> result,
    # None if not one.
    skill_reader: Callable[[str, str], Awaitable[Observation | None]] | None = None

    def __post_init__(self) -> None:
        self.registry.list_listeners.append(self._on_list_changed)
        self.registry.update_listeners.append(self._on_updated)

    async def _on_updated(self, server: str, uri: str) -> None:
        """An attached resource changed: read it again; the next request carries it."""
        if (server, uri) not in self.attached:
            return
        try:
            self.changed[(server, uri)] = await self.read(server, uri)
        except LookupError:
            return

    async def _on_list_changed(self, server: str, kind: ListKind) -> None:
        await self.refresh()

    def agent_tools(self) -> dict[str, AgentTool]:
        """The agent's own tools that come from here: read_resource while servers publish
        resources. The same object until a refresh changes it (the loop caches on it)."""
        return self._own_tools

    def _servers(self, feature: str) -> list[ToolServer]:
        return [
            s
            for s in self.registry.servers.values()
            if s.status.state == "ready" and s.supports(feature)
        ]

    async def refresh(self) -> None:
        """List resources, templates and prompts of every server that offers them, at once.

        A server that fails or is slow (LIST_TIMEOUT) keeps what it listed before, and the
        reason is in `errors`: one stuck server must not empty the others' lists.
        """
        resources: list[tuple[str, types.Resource]] = []
        templates: list[tuple[str, types.ResourceTemplate]] = []
        prompts: list[tuple[str, types.Prompt]] = []
        self.errors = {}

        def kept(listed: list[tuple[str, Any]], server: str) -> list[Any]:
            return [item for name, item in listed if name == server]

        async def list_kind(
            server: ToolServer,
            fetch: Callable[[], Awaitable[list[Any]]],
            before: list[tuple[str, Any]],
            into: list[tuple[str, Any]],
            *,
            main_error: bool = False,
        ) -> None:
            """One kind of one server; each kind stands alone (resources without templates).
            The resources' error is the one shown when several kinds of a server fail."""
            try:
                with anyio.fail_after(LIST_TIMEOUT):
                    found = await fetch()
            except _LISTING_ERRORS as exc:
                if main_error:
                    self.errors[server.name] = _listing_error(exc)
                else:
                    self.errors.setdefault(server.name, _listing_error(exc))
                found = kept(before, server.name)
            into.extend((server.name, item) for item in found)

        async with anyio.create_task_group() as tg:
            for server in self._servers("resources"):
                tg.start_soon(
                    partial(list_kind, main_error=True),
                    server,
                    server.list_resources,
                    self.resources,
                    resources,
                )
                tg.start_soon(
                    list_kind, server, server.list_resource_templates, self.templates, templates
                )
            for server in self._servers("prompts"):
                tg.start_soon(list_kind, server, server.list_prompts, self.prompts, prompts)
        # App pages (ui://) are for an app host, never for the model: not listed for it,
        # not attachable, not readable through read_resource.
        self.app_pages = [(name, r) for name, r in resources if is_app_uri(r.uri)]
        self.resources = [(name, r) for name, r in resources if not is_app_uri(r.uri)]
        self.templates = [(name, t) for name, t in templates if not is_app_uri(t.uri_template)]
        self.prompts = prompts
        self._own_tools = (
            {READ_RESOURCE: AgentTool(self.read_resource_schema(), self.read_resource_tool)}
            if self.has_resources
            else {}
        )

    @property
    def has_resources(self) -> bool:
        return bool(self.resources or self.templates)

    def refs(self) -> list[str]:
        """`server:uri` of every listed resource, for completion."""
        return [f"{server}:{r.uri}" for server, r in self.resources]

    # -- resources -----------------------------------------------------------------------

    async def read(self, server_name: str, uri: str) -> str:
        """The text of a resource (blobs described, not dumped); raises LookupError."""
        return (await self.read_with_images(server_name, uri))[0]

    async def read_with_images(self, server_name: str, uri: str) -> tuple[str, list[Image]]:
        """The text of a resource, and its images (image/* blobs) for a vision model."""
        server = self.registry.servers.get(server_name)
        if server is None or not server.publishes:
            known = ", ".join(s.name for s in self._servers("resources")) or "none"
            raise LookupError(
                f"no MCP server named '{server_name}' (servers with resources: {known})"
            )
        if is_app_uri(uri):
            raise LookupError(f"{uri} is an app's page (MCP Apps): shown to the user, not read")
        try:
            with anyio.fail_after(server.config.tool_timeout or 60):
                result = await server.read_resource(uri)
        except MCPError as exc:
            raise LookupError(f"cannot read {uri} from '{server_name}': {exc}") from None
        except TimeoutError:
            raise LookupError(f"reading {uri} from '{server_name}' timed out") from None
        parts: list[str] = []
        images: list[Image] = []
        for content in result.contents:
            if isinstance(content, types.TextResourceContents):
                parts.append(content.text)
            else:
                parts.append(f"[{_describe_blob(content)}]")
                if (content.mime_type or "").startswith("image/"):
                    images.append(Image(content.mime_type or "image/png", content.blob))
        text = "\n".join(parts)
        if len(text) > MAX_RESOURCE_CHARS:
            cut = len(text) - MAX_RESOURCE_CHARS
            text = f"{text[:MAX_RESOURCE_CHARS]}\n[… {cut} more characters cut]"
        return text, images

    async def expand_refs(self, request: str) -> tuple[str, list[str]]:
        """Attach every `@server:uri` the request mentions; returns (text, problems)."""
        attachments: list[str] = []
        problems: list[str] = []
        seen: set[tuple[str, str]] = set()
        for (server, uri), text in self._take_changes():
            attachments.append(untrusted(server, f"resource {uri} (updated since):\n{text}"))
        for match in REF_PATTERN.finditer(request):
            server, uri = match.group(1), match.group(2).rstrip(".,;!?)")
            if server not in self.registry.servers or (server, uri) in seen:
                continue  # an e-mail address or a handle, not a reference
            seen.add((server, uri))
            try:
                text = await self.read(server, uri)
            except LookupError as exc:
                problems.append(str(exc))
                continue
            attachments.append(untrusted(server, f"resource {uri}:\n{text}"))
            await self._watch(server, uri)
        if not attachments:
            return request, problems
        return request + "\n\n" + "\n\n".join(attachments), problems

    def _take_changes(self) -> list[tuple[tuple[str, str], str]]:
        changes, self.changed = list(self.changed.items()), {}
        return changes

    async def _watch(self, server_name: str, uri: str) -> None:
        """Subscribe to updates of an attached resource (best effort: not every server can)."""
        server = self.registry.servers.get(server_name)
        if (server_name, uri) in self.attached or server is None or not server.publishes:
            return
        self.attached.add((server_name, uri))
        try:
            with anyio.fail_after(LIST_TIMEOUT):
                await server.subscribe(uri)
        except _LISTING_ERRORS:
            return

    async def read_resource_tool(self, arguments: dict[str, Any]) -> Observation:
        """The agent's `read_resource` tool: the model reads what servers publish."""
        server, uri = str(arguments.get("server", "")), str(arguments.get("uri", ""))
        if not server or not uri:
            return error_observation(None, "read_resource needs both 'server' and 'uri'")
        if self.skill_reader and (loaded := await self.skill_reader(server, uri)) is not None:
            return loaded
        try:
            text, images = await self.read_with_images(server, uri)
        except LookupError as exc:
            return error_observation(server if server in self.registry.servers else None, str(exc))
        return Observation(untrusted(server, text), images=tuple(images))

    def read_resource_schema(self) -> dict[str, Any]:
        listed = ", ".join(f"{s}:{r.uri}" for s, r in self.resources[:20])
        templates = ", ".join(
            f"{s}:{t.uri_template[:200]}" for s, t in self.templates[:TEMPLATES_LISTED]
        )
        return {
            "type": "function",
            "function": {
                "name": READ_RESOURCE,
                "description": "Read a resource an MCP server publishes (documents, files, data). "
                + (f"Known resources (server:uri): {listed}. " if listed else "")
                + (
                    "URI templates (fill each {placeholder} to make a uri, then read it): "
                    f"{templates}."
                    if templates
                    else ""
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "server": {"type": "string", "description": "The server's name."},
                        "uri": {"type": "string", "description": "The resource URI."},
                    },
                    "required": ["server", "uri"],
                },
            },
        }

    # -- completion ----------------------------------------------------------------------

    async def complete_prompt(
        self, prompt: str, name: str, value: str, context: dict[str, str]
    ) -> list[str]:
        """Values the prompt's server offers for argument `name` starting at `value`."""
        found = self.find_prompt(prompt)
        if isinstance(found, str):
            return []
        server, listed = found
        ref = types.PromptReference(name=listed.name)
        return await self._complete(server, ref, name, value, context)

    async def complete_ref(self, ref: str) -> list[str]:
        """`server:uri` completions for a URI that fills a resource template: the server's
        values for the template's first placeholder, the rest of the template kept."""
        server, _, uri = ref.partition(":")
        out: list[str] = []
        for owner, template in self.templates:
            head, brace, tail = template.uri_template.partition("{")
            name, _, rest = tail.partition("}")
            if owner != server or not brace or not uri.startswith(head) or "{" in rest:
                continue
            typed = uri[len(head) :]
            if rest and typed.endswith(rest):
                typed = typed[: -len(rest)]
            reference = types.ResourceTemplateReference(uri=template.uri_template)
            values = await self._complete(server, reference, name, typed, {})
            out += [f"{server}:{head}{value}{rest}" for value in values]
        return out

    async def _complete(
        self, server_name: str, ref: Any, name: str, value: str, context: dict[str, str]
    ) -> list[str]:
        server = self.registry.servers.get(server_name)
        if server is None:
            return []
        try:
            with anyio.fail_after(COMPLETE_TIMEOUT):
                return await server.complete(ref, name, value, context)
        except _LISTING_ERRORS:
            return []  # completion is a convenience: a slow or failing server offers none

    # -- prompts -------------------------------------------------------------------------

    def find_prompt(self, name: str) -> tuple[str, types.Prompt] | str:
        """The prompt named `name` or `server:name`, or a message saying what is wrong."""
        server, _, bare = name.rpartition(":")
        found = [(s, p) for s, p in self.prompts if p.name == bare and (not server or s == server)]
        if len(found) == 1:
            return found[0]
        if not found:
            close = ", ".join(p.name for _, p in self.prompts[:20]) or "none"
            return f"no prompt named '{name}' (prompts: {close})"
        servers = ", ".join(sorted(f"{s}:{bare}" for s, _ in found))  # not connect order
        return f"'{name}' is offered by several servers; use one of {servers}"

    async def get_prompt(
        self, server_name: str, name: str, arguments: dict[str, str]
    ) -> list[tuple[str, str]]:
        """The prompt's messages as (role, text); raises LookupError with the server's reason."""
        server = self.registry.servers[server_name]
        try:
            with anyio.fail_after(server.config.tool_timeout or 60):
                result = await server.get_prompt(name, arguments)
        except MCPError as exc:
            raise LookupError(f"prompt '{name}' failed: {exc}") from None
        except TimeoutError:
            raise LookupError(f"prompt '{name}' timed out") from None
        messages: list[tuple[str, str]] = []
        for message in result.messages:
            content = message.content
            if isinstance(content, types.TextContent):
                text = content.text
            elif isinstance(content, types.EmbeddedResource) and is_app_page(content.resource):
                text = block_text(content)[0]
            elif isinstance(content, types.EmbeddedResource) and isinstance(
                content.resource, types.TextResourceContents
            ):
                text = untrusted(
                    server_name, f"resource {content.resource.uri}:\n{content.resource.text}"
                )
            elif isinstance(content, types.EmbeddedResource) and isinstance(
                content.resource, types.BlobResourceContents
            ):
                blob = content.resource
                text = f"[resource {blob.uri} from '{server_name}': {_describe_blob(blob)}]"
            else:
                mime = getattr(content, "mime_type", None) or content.type
                text = f"[{content.type} ({mime}) from '{server_name}' not shown]"
            messages.append((message.role, text))
        return messages


def _describe_blob(blob: types.BlobResourceContents) -> str:
    """Binary contents are described, never dumped as base64 into the conversation."""
    return f"binary {blob.mime_type or 'data'}, about {len(blob.blob) * 3 // 4} bytes"


_LISTING_ERRORS = (MCPError, OSError, TimeoutError, ServerStopped, ToolServerError)


def _listing_error(exc: Exception) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {LIST_TIMEOUT:g} s (showing what it listed before)"
    return describe_exception(exc)
