"""One ACP turn's `session/update` notifications, from the one loop's events
(agent.loop.events), for agent.cli.acp_command.

The answer streams as `agent_message_chunk`s; each tool call is a `tool_call` (its title,
and its `kind` from the tool's MCP annotations) and then a `tool_call_update` with its
status and output. Every string sent is masked by the session's redactor first (the
answer's pieces as the text they make up, as stream-json's: agent.ui.stream_json).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from acp import RequestError, start_tool_call, text_block, tool_content, update_tool_call
from acp.helpers import update_agent_message_text
from acp.interfaces import Client
from acp.schema import (
    EmbeddedResourceContentBlock,
    ResourceContentBlock,
    StopReason,
    TextContentBlock,
    TextResourceContents,
    ToolCallStart,
    ToolKind,
)

from agent.loop.events import (
    AssistantMessage,
    Event,
    ModelRetry,
    RunFinished,
    StepStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from agent.loop.react import Agent
from agent.tools.registry import ToolRegistry
from agent.tools.toolspec import ToolSpec
from agent.ui.stream_json import DeltaMasker

MAX_OUTPUT_CHARS = 64_000  # of a tool's output shown in the editor (the model sees it all)
STOP_REASONS: dict[str, StopReason] = {
    "answered": "end_turn",
    "max_steps": "max_turn_requests",
    "refused": "end_turn",  # every call was refused by the user, and the model answered
    "cancelled": "cancelled",
}
DELETING = ("delete", "remove", "unlink", "rm", "rmdir", "drop")


def title_and_kind(spec: ToolSpec | None, public: str) -> tuple[str, ToolKind]:
    """How the editor shows a call: the tool's title, and a kind from its annotations
    (read-only → read, destructive → delete or edit, open-world → fetch, else other)."""
    if spec is None:
        return public, "other"
    title = spec.title or public
    if spec.read_only:
        return title, "read"
    if spec.destructive:
        words = spec.name.lower().replace("-", "_").split("_")
        return title, "delete" if any(w in DELETING for w in words) else "edit"
    return title, "fetch" if spec.open_world else "other"


def prompt_text(blocks: list[Any]) -> str:
    """A prompt's content blocks as the turn's text: text as it is, an embedded text
    resource as its text under its URI, a resource link as its URI. Images, audio and
    binary resources are refused (initialize does not offer them)."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(
            block.resource, TextResourceContents
        ):
            parts.append(f"Resource {block.resource.uri}:\n{block.resource.text}")
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"Resource {block.uri} ({block.name})")
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise RequestError(
                -32602,
                f"prompt content of type {kind!r} is not supported: send text or text resources",
            )
    return "\n\n".join(parts)


class TurnUpdates:
    """Sends one turn's updates; returns its stop reason."""

    def __init__(
        self,
        client: Client,
        session_id: str,
        registry: ToolRegistry,
        asked: dict[tuple[str, str], list[tuple[str, bool]]],
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.registry = registry
        self.asked = asked  # calls already shown (pending) while their approval was asked
        self.ids: dict[str, str] = {}  # the loop's call id -> the id the editor knows
        self.streamed = False
        self.pieces = DeltaMasker(registry.redact)  # a secret cut across pieces is masked

    @staticmethod
    def key(name: str, arguments: dict[str, Any]) -> tuple[str, str]:
        """A call as both its approval request and its start event name it."""
        return name, json.dumps(arguments, sort_keys=True, default=str)

    @staticmethod
    def started(
        call_id: str, title: str, kind: ToolKind, arguments: Any, status: Any
    ) -> ToolCallStart:
        return start_tool_call(call_id, title, kind=kind, status=status, raw_input=arguments)

    async def send(self, update: Any) -> None:
        await self.client.session_update(session_id=self.session_id, update=update)

    async def run(self, agent: Agent, request: str) -> StopReason:
        stop: StopReason = "end_turn"
        async with contextlib.aclosing(agent.run(request)) as events:
            async for event in events:
                stop = await self.on(event) or stop
        return stop

    async def on(self, event: Event) -> StopReason | None:
        redact = self.registry.redact
        match event:
            case StepStarted():
                self.streamed = False
            case TextDelta(text=text) if text:
                self.streamed = True
                await self._chunk(self.pieces.add(text))
            case AssistantMessage(content=content):
                rest = self.pieces.flush()
                await self._chunk(rest if self.streamed else redact(content))
            case ModelRetry(discarded_text=True):
                self.pieces.reset()  # what was sent stays: ACP cannot take a chunk back
            case ToolCallStarted():
                await self._started(event)
            case ToolCallFinished():
                shown = redact(event.output)
                if len(shown) > MAX_OUTPUT_CHARS:
                    shown = shown[:MAX_OUTPUT_CHARS] + "\n… (cut here; the model saw it all)"
                await self.send(
                    update_tool_call(
                        self.ids.get(event.call_id, event.call_id),
                        status="failed" if event.is_error else "completed",
                        content=[tool_content(text_block(shown))],
                    )
                )
            case RunFinished(status="error", error=error):
                raise RequestError(-32603, redact(error or "the turn failed"))
            case RunFinished(status=status):
                return STOP_REASONS.get(status, "end_turn")
        return None

    async def _chunk(self, text: str) -> None:
        if text:
            await self.send(update_agent_message_text(text))

    async def _started(self, event: ToolCallStarted) -> None:
        """The call begins: the one already shown while asked runs (when allowed; a refused
        one goes straight to failed), or a new one is shown running."""
        shown = self.asked.get(self.key(event.name, event.arguments))
        if shown:
            self.ids[event.call_id], allowed = shown.pop(0)
            if allowed:
                await self.send(update_tool_call(self.ids[event.call_id], status="in_progress"))
            return
        self.ids[event.call_id] = event.call_id
        title, kind = title_and_kind(self.registry.tools.get(event.name), event.name)
        arguments = self.registry.redact.deep(event.arguments)
        await self.send(self.started(event.call_id, title, kind, arguments, "in_progress"))
