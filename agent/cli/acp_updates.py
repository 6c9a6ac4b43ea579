"""One ACP turn's `session/update` notifications, from the one loop's events
(agent.loop.events), for agent.cli.acp_command.

The answer streams as `agent_message_chunk`s; each tool call is a `tool_call` (its title,
and its `kind` from the tool's MCP annotations) and then a `tool_call_update` with its
status and output. Every string sent is masked by the session's redactor first (the
answer's pieces as the text they make up, as stream-json's: agent.ui.stream_json). Each
call shown gets an ID of ours (`Cards`), never the model's or a transcript's: its place
among the session's calls, counted the same way live and replayed (session/load:
`history`), so a loaded session's cards keep the IDs they had live and no card takes
another's updates; a card still open when a turn is cancelled gets its final update
(`failed`: ACP has no cancelled status). A call's title is one clean line (an editor may
draw it in a terminal).

The model's plan (the agent's own update_plan) is ACP's `plan` update, the whole plan each
time it changes, each entry masked and one clean line; its calls get no card of their own
(as Claude Code's adapter shows its todo list), unless one fails: then the card says why.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from acp import (
    RequestError,
    image_block,
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    update_plan,
    update_tool_call,
)
from acp.helpers import update_agent_message_text, update_user_message
from acp.interfaces import Client
from acp.schema import (
    AgentPlanUpdate,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    StopReason,
    TextContentBlock,
    TextResourceContents,
    ToolCallStart,
    ToolKind,
)

from agent.common.images import MAX_IMAGE_BYTES, MAX_IMAGES_PER_RESULT, decoded_size, human_size
from agent.common.redact import Redactor
from agent.loop.events import (
    AssistantMessage,
    Event,
    ModelRetry,
    PlanStep,
    PlanUpdated,
    RunFinished,
    StepStarted,
    SubagentEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from agent.loop.plan import UPDATE_PLAN, called_plan
from agent.loop.react import Agent
from agent.tools.registry import ToolRegistry
from agent.tools.results import strip_marker
from agent.tools.toolspec import ToolSpec
from agent.ui.safe import clean
from agent.ui.stream_json import DeltaMasker

MAX_OUTPUT_CHARS = 64_000  # of a tool's output shown in the editor (the model sees it all)
MAX_TITLE_CHARS = 200  # of a call's title
CHILD_LINES = 20  # of a sub-agent's steps shown in its task call's card
STOP_REASONS: dict[str, StopReason] = {
    "answered": "end_turn",
    "max_steps": "max_turn_requests",
    "refused": "end_turn",  # every call was refused by the user, and the model answered
    "cancelled": "cancelled",
}
DELETING = ("delete", "remove", "unlink", "rm", "rmdir", "drop")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
INVALID_PARAMS = -32602
CANCELLED = "Cancelled: the turn was stopped before this call ended."


class Cards:
    """The call cards one session has shown the editor: their IDs, and those still open.

    A call's card is `call-N`, N its place among the calls of the session's history (the
    memory's assistant messages, one by one), counted the same way when a turn shows it
    and when session/load replays it: a call keeps its ID. What a session shows twice
    under one number (after a /clear or a compaction the history numbers again, and a
    loaded history may start later than the session did) gets a suffix (`call-3.1`), so
    no card takes another's updates; a card for a call of no history (a sub-agent's,
    asked) is `ask-N`."""

    def __init__(self) -> None:
        self.shown: set[str] = set()
        self.open: dict[str, None] = {}  # started, not finished: in the order shown
        self.spare = itertools.count(1)

    def claim(self, place: int | None) -> str:
        """A new card's ID: the call's place when it is known and not yet shown."""
        wanted = f"call-{place}" if place is not None else None
        card = wanted
        while card is None or card in self.shown:
            card = f"{wanted}.{next(self.spare)}" if wanted else f"ask-{next(self.spare)}"
        self.shown.add(card)
        return card

    def free(self, place: int) -> bool:
        return f"call-{place}" not in self.shown

    def take_open(self) -> list[str]:
        """The cards a turn left open (cancelled mid-call): now to be finished."""
        cards = list(self.open)
        self.open.clear()
        return cards


def places(messages: list[dict[str, Any]]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Each call of the history's assistant messages: its place (from 1), its message's
    index, and the call."""
    number = itertools.count(1)
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                yield next(number), index, call


def place_of(messages: list[dict[str, Any]], call_id: str) -> int | None:
    """The place of the newest call with the model's `call_id` (unique in its reply)."""
    found = None
    for place, _, call in places(messages):
        if call.get("id") == call_id:
            found = place
    return found


def asked_place(messages: list[dict[str, Any]], key: tuple[str, str], cards: Cards) -> int | None:
    """The place of the call being asked about (asked before it starts): the first of the
    newest reply's calls with its name and arguments and no card yet; None when none is
    (a sub-agent's call, or input a hook changed)."""
    calls = list(places(messages))
    last = calls[-1][1] if calls else -1
    for place, index, call in calls:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except (ValueError, RecursionError):
            continue
        name = str(function.get("name", ""))
        if index == last and TurnUpdates.key(name, arguments) == key and cards.free(place):
            return place
    return None


def title_and_kind(
    spec: ToolSpec | None, public: str, redact: Callable[[str], str]
) -> tuple[str, ToolKind]:
    """How the editor shows a call: the tool's title (a server's text, or a name a
    transcript gave: masked, escapes shown, one line), and a kind from its annotations
    (read-only → read, destructive → delete or edit, open-world → fetch, else other)."""
    title = " ".join(clean(redact((spec and spec.title) or public)).split())
    if len(title) > MAX_TITLE_CHARS:
        title = title[: MAX_TITLE_CHARS - 1] + "…"
    if spec is None:
        return title, "other"
    if spec.read_only:
        return title, "read"
    if spec.destructive:
        words = spec.name.lower().replace("-", "_").split("_")
        return title, "delete" if any(w in DELETING for w in words) else "edit"
    return title, "fetch" if spec.open_world else "other"


def masked_input(arguments: Any, redact: Redactor) -> Any:
    """A call's arguments as the editor is shown them: each value masked, and then their
    JSON text, so a key is masked too; what cannot be read back (too deeply nested, not
    JSON, or cut by a mask) is shown as the masked text."""
    try:
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        text = json.dumps(redact.deep(arguments), ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        return redact(arguments) if isinstance(arguments, str) else "(arguments not shown)"
    masked = redact(text)
    try:
        return json.loads(masked)
    except (ValueError, RecursionError):
        return masked


def _cut(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    return text[:MAX_OUTPUT_CHARS] + "\n… (cut here; the model saw it all)"


@dataclass
class PromptParts:
    """A prompt's content blocks as the turn takes them: its text, and its images as
    image parts for the model (agent.loop.vision's shape)."""

    text: str
    images: list[dict[str, Any]] = field(default_factory=list)

    def image_message(self) -> dict[str, Any] | None:
        """The user message that carries the images, after the request's text."""
        if not self.images:
            return None
        intro = {"type": "text", "text": f"The user attached {len(self.images)} image(s):"}
        return {"role": "user", "content": [intro, *self.images]}


def prompt_parts(blocks: list[Any], sees_images: bool) -> PromptParts:
    """A prompt's content blocks: text as it is, an embedded text resource as its text
    under its URI, a resource link as its URI (the model reads it with its tools), an
    image (or an embedded image resource) as an image part when the model sees images.
    Audio, and images the model cannot see, are refused (initialize does not offer them);
    an embedded binary resource is named, not sent."""
    parts = PromptParts("")
    texts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            texts.append(block.text)
        elif isinstance(block, ImageContentBlock):
            parts.images.append(_image_part(block.mime_type, block.data, sees_images))
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                texts.append(f"Resource {resource.uri}:\n{resource.text}")
            elif (resource.mime_type or "").startswith("image/") and sees_images:
                parts.images.append(_image_part(resource.mime_type or "", resource.blob, True))
            else:
                size = human_size(decoded_size(resource.blob))
                texts.append(
                    f"Resource {resource.uri} ({resource.mime_type or 'binary'}, {size}: not shown)"
                )
        elif isinstance(block, ResourceContentBlock):
            texts.append(f"Resource {block.uri} ({block.name}): read it with your tools if needed")
        else:
            kind = getattr(block, "type", type(block).__name__)
            raise RequestError(
                INVALID_PARAMS,
                f"prompt content of type {kind!r} is not supported: send text, resources"
                + (" or images" if sees_images else ""),
            )
    if len(parts.images) > MAX_IMAGES_PER_RESULT:
        raise RequestError(INVALID_PARAMS, f"at most {MAX_IMAGES_PER_RESULT} images in one prompt")
    parts.text = "\n\n".join(texts)
    return parts


def _image_part(mime_type: str, data: str, sees_images: bool) -> dict[str, Any]:
    """One image for the model, bounded as a tool's images are (agent.common.images)."""
    if not sees_images:
        raise RequestError(INVALID_PARAMS, "the model does not see images ([llm] vision = false)")
    if mime_type not in IMAGE_TYPES:
        raise RequestError(
            INVALID_PARAMS, f"image type {mime_type!r}: send {', '.join(IMAGE_TYPES)}"
        )
    if decoded_size(data) > MAX_IMAGE_BYTES:
        raise RequestError(
            INVALID_PARAMS,
            f"an image is larger than {human_size(MAX_IMAGE_BYTES)}: send a smaller one",
        )
    return {"type": "image_url", "image_url": {"url": f"data:{mime_type};base64,{data}"}}


class TurnUpdates:
    """Sends one turn's updates; returns its stop reason."""

    def __init__(
        self,
        client: Client,
        session_id: str,
        registry: ToolRegistry,
        asked: dict[tuple[str, str], list[tuple[str, bool]]],
        cards: Cards,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.registry = registry
        self.asked = asked  # calls already shown (pending) while their approval was asked
        self.cards = cards
        self.messages: list[dict[str, Any]] = []  # the memory's: where a call's place is
        self.ids: dict[str, str] = {}  # the loop's call id -> the id the editor knows
        self.plan_calls: dict[str, ToolCallStarted] = {}  # shown as the plan, not as cards
        self.streamed = False
        self.pieces = DeltaMasker(registry.redact)  # a secret cut across pieces is masked
        self.children: dict[str, list[str]] = {}  # a task call's id -> its sub-agent's lines

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

    async def run(
        self, agent: Agent, request: str, attached: dict[str, Any] | None = None
    ) -> StopReason:
        """One turn; `attached`: the prompt's images, as one user message after the
        request (PromptParts.image_message)."""
        stop: StopReason = "end_turn"
        self.messages = agent.memory.messages  # the one list, changed in place
        async with contextlib.aclosing(agent.run(request)) as events:
            async for event in events:
                if attached is not None and isinstance(event, StepStarted):
                    # The request is in memory (its hooks passed) and nothing is sent yet.
                    agent.memory.add_images(attached)
                    attached = None
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
            case ToolCallStarted(server="agent", tool=tool) if tool == UPDATE_PLAN:
                self.plan_calls[event.call_id] = event
            case PlanUpdated():
                await self.send(plan_update(event.plan, redact))
            case ToolCallStarted():
                await self._started(event)
            case ToolCallFinished() if event.call_id in self.plan_calls:
                started = self.plan_calls.pop(event.call_id)
                if event.is_error:  # the model is told to fix it; the editor sees why
                    await self._started(started)
                    await self._finished(event)
            case ToolCallFinished():
                await self._finished(event)
            case SubagentEvent():
                await self._child(event)
            case RunFinished(status="error", error=error):
                raise RequestError(-32603, redact(error or "the turn failed"))
            case RunFinished(status=status):
                return STOP_REASONS.get(status, "end_turn")
        return None

    async def _finished(self, event: ToolCallFinished) -> None:
        shown = _cut(self.registry.redact(strip_marker(event.output)))  # the envelope is ours
        card = self.ids.get(event.call_id, event.call_id)
        self.cards.open.pop(card, None)
        await self.send(
            update_tool_call(
                card,
                status="failed" if event.is_error else "completed",
                content=[tool_content(text_block(shown))],
            )
        )

    async def _child(self, event: SubagentEvent) -> None:
        """A sub-agent's step, as the progress of its `task` call's card: one line a call it
        made and how it ended (the card's content, the whole list each time). A call of it
        that was shown while its approval was asked keeps that card, finished here."""
        inner, redact = event.event, self.registry.redact
        own = f"{event.parent_call_id}\0{getattr(inner, 'call_id', '')}"  # ids are the model's
        match inner:
            case ToolCallStarted():
                if shown := self.asked.get(self.key(inner.name, inner.arguments)):
                    self.ids[own], allowed = shown.pop(0)
                    if allowed:
                        await self.send(update_tool_call(self.ids[own], status="in_progress"))
                said = f"▸ {inner.name} {clean(redact(json.dumps(inner.arguments, default=str)))}"
            case ToolCallFinished():
                if (card := self.ids.pop(own, None)) is not None:
                    self.cards.open.pop(card, None)
                    await self.send(
                        update_tool_call(card, status="failed" if inner.is_error else "completed")
                    )
                said = f"{'✗' if inner.is_error else '✓'} {inner.name}"
            case _:
                return
        lines = self.children.setdefault(event.parent_call_id, [])
        lines.append(_cut(said[:MAX_TITLE_CHARS]))
        text = "\n".join(lines[-CHILD_LINES:])
        await self.send(
            update_tool_call(
                self.ids.get(event.parent_call_id, event.parent_call_id),
                status="in_progress",
                content=[tool_content(text_block(text))],
            )
        )

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
        call_id = self.cards.claim(place_of(self.messages, event.call_id))
        self.ids[event.call_id] = call_id
        self.cards.open[call_id] = None
        redact = self.registry.redact
        title, kind = title_and_kind(self.registry.tools.get(event.name), event.name, redact)
        arguments = masked_input(event.arguments, redact)
        await self.send(self.started(call_id, title, kind, arguments, "in_progress"))


FAILED_PREFIXES = ("Error:", "The tool reported an error", "Not run:", "The user declined")


def plan_update(plan: tuple[PlanStep, ...], redact: Callable[[str], str]) -> AgentPlanUpdate:
    """ACP's `plan` update: every step an entry (the model sets no priority: medium), its
    text masked and one clean line (an editor may draw it in a terminal)."""
    entries = [
        plan_entry(" ".join(clean(redact(s.step)).split()), priority="medium", status=s.status)
        for s in plan
    ]
    return update_plan(entries)


def history(messages: list[dict[str, Any]], registry: ToolRegistry, cards: Cards) -> list[Any]:
    """A loaded session's messages as the updates that show it again (session/load): the
    user's requests as user_message_chunk, answers as agent_message_chunk, each call as a
    tool_call with its status and output, under the ID it had live (its place among the
    history's calls, `Cards`). Shown only: nothing is run
    or approved. Masked and cut as a live turn's are (its text too: a transcript line may
    be huge); the images that went with tool results are not shown again."""
    redact = registry.redact
    results = _results(messages)
    updates: list[Any] = []
    previous = ""
    number = itertools.count(1)  # each call's place, as `places` counts them
    for index, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role == "user" and not (previous == "tool" and isinstance(content, list)):
            # (a list after tool results is their images; a request after an interrupted
            # call's result is the user's, and shown)
            updates += [update_user_message(block) for block in _blocks(content, redact)]
        elif role == "assistant":
            if isinstance(content, str) and content:
                updates.append(update_agent_message_text(_cut(redact(content))))
            for call in message.get("tool_calls") or []:
                result, place = results.get((index, call.get("id"))), next(number)
                # the plan an update_plan call set is shown again as the live one was
                if (plan := called_plan(call, result)) is not None:
                    updates.append(plan_update(plan[0], redact))
                else:
                    updates.append(_replayed_call(cards.claim(place), call, result, registry))
        previous = str(role)
    return updates


def _results(messages: list[dict[str, Any]]) -> dict[tuple[int, Any], str]:
    """Each tool result under its call's reply (that assistant message's index) and the
    call's ID: the model's IDs repeat from one reply to the next (`call_1` every turn)."""
    results: dict[tuple[int, Any], str] = {}
    reply = -1
    for index, message in enumerate(messages):
        if message.get("role") == "assistant":
            reply = index
        elif message.get("role") == "tool":
            results[(reply, message.get("tool_call_id"))] = str(message.get("content") or "")
    return results


def _blocks(content: Any, redact: Any) -> list[Any]:
    if isinstance(content, str):
        return [text_block(_cut(redact(content)))] if content else []
    blocks: list[Any] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            blocks.append(text_block(_cut(redact(str(part.get("text", ""))))))
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            head, _, data = url.partition(";base64,")
            if head.startswith("data:") and data:
                blocks.append(image_block(data, head.removeprefix("data:")))
    return blocks


def _replayed_call(
    call_id: str, call: dict[str, Any], result: str | None, registry: ToolRegistry
) -> Any:
    function = call.get("function") or {}
    name = str(function.get("name", ""))
    title, kind = title_and_kind(registry.tools.get(name), name, registry.redact)
    shown = _cut(registry.redact(strip_marker(result))) if result is not None else "(no result)"
    failed = result is None or result.startswith(FAILED_PREFIXES)
    return start_tool_call(
        call_id,
        title,
        kind=kind,
        status="failed" if failed else "completed",
        raw_input=masked_input(str(function.get("arguments") or "{}"), registry.redact),
        content=[tool_content(text_block(shown))],
    )
