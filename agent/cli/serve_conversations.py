"""`serve`'s conversation bookkeeping: the conversations callers started, and the turn
running on each.

A conversation is kept by session ID with its owner and a lock (its turns run one at a
time), at most MAX_CONVERSATIONS (the least recently used idle one is closed); a turn
holds its events, the approval it waits on and how it is stopped. agent/cli/serve_command.py
builds the server and its `ask` tool on these and follows a turn's events to the caller
(progress, approval questions, the result).

Imports the session (agent.session.startup), the loop's approval and events, agent.ui's
run record and console, and the MCP SDK's result types; never agent.cli.serve_command
(which imports it).
"""

from __future__ import annotations

import contextlib
import math
import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp.types import CallToolResult, TextContent

from agent.common.errors import ConfigError
from agent.loop.approval import ApprovalRequest, Decision
from agent.loop.events import Event
from agent.loop.react import Agent
from agent.session.startup import Session, expand_refs
from agent.ui.output import RunRecord, server_states
from agent.ui.safe import SafeConsole

MAX_CONVERSATIONS = 32  # kept in memory; the least recently used one is closed beyond
ANSWER_WAIT = 600.0  # seconds a caller has to answer an approval before it is a no
STOP_WAIT = 10.0  # seconds tasks/cancel waits for the turn (and its tool calls) to end
SERVE_KEYS = ("answer", "status", "session_id", "tool_calls", "usage")


@dataclass
class Conversation:
    """One conversation: its agent, and a lock so its turns run one at a time."""

    agent: Agent
    session_id: str
    close: contextlib.AsyncExitStack
    caller: str | None  # who started it (serve_tasks.caller_of); only they continue it
    lock: anyio.Lock = field(default_factory=anyio.Lock)


@dataclass
class Question:
    """A call waiting for the caller's approval."""

    request: ApprovalRequest
    key: str
    answered: anyio.Event = field(default_factory=anyio.Event)
    decision: Decision = "no"

    def answer(self, decision: Decision) -> None:
        self.decision = decision
        self.answered.set()


@dataclass
class Done:
    result: CallToolResult


Out = Event | Question | Done


class Turn:
    """One `ask` running in the server's task group, so that on 2026-07-28 it outlives the
    request that started it while the caller answers an approval and retries."""

    def __init__(self, conversation: Conversation, elicits: bool) -> None:
        self.conversation = conversation
        self.elicits = elicits
        self.token = secrets.token_urlsafe(24)  # request_state: unguessable, never parsed
        self.out_send, self.out = anyio.create_memory_object_stream[Out](math.inf)
        self.scope = anyio.CancelScope()
        self.asking: Question | None = None
        self.asked = 0
        self.ended = anyio.Event()

    async def stop(self) -> None:
        """End the turn (its tool calls with it) and wait, boundedly, until it has."""
        self.scope.cancel()
        with anyio.move_on_after(STOP_WAIT):
            await self.ended.wait()

    async def ask(self, request: ApprovalRequest) -> Decision:
        """The approval policy's question: to the caller, who may not leave it unanswered
        for ever (after ANSWER_WAIT it is a no, and the turn is ended)."""
        if not self.elicits:
            return "no"
        self.asked += 1
        question = Question(request, f"approve-{self.asked}")
        await self.out_send.send(question)
        with anyio.move_on_after(ANSWER_WAIT) as waited:
            await question.answered.wait()
        if waited.cancelled_caught:
            self.scope.cancel()
            return "no"
        return question.decision


class Conversations:
    """The conversations callers started, by session ID, least recently used first, and
    the turns waiting for a caller's answer, by their request_state."""

    def __init__(self, session: Session, stderr: SafeConsole, tg: TaskGroup) -> None:
        self.session = session
        self.stderr = stderr
        self.tg = tg
        self.open: OrderedDict[str, Conversation] = OrderedDict()
        self.waiting: dict[str, Turn] = {}

    async def get(self, session_id: str | None, caller: str | None) -> Conversation:
        """The conversation `session_id` names, or a new one for `caller`. An ID that is
        not one of this caller's is an error, worded as for an ID that never was, so that
        another caller learns nothing of it."""
        if session_id is not None:
            found = self.open.get(session_id)
            if found is None or found.caller != caller:
                raise ConfigError(
                    "unknown session_id: no conversation of yours by that ID on this server "
                    f"(it ended, or was closed as one of more than {MAX_CONVERSATIONS}): "
                    "call ask without session_id to start one"
                )
            self.open.move_to_end(session_id)
            return found
        stack = contextlib.AsyncExitStack()
        agent, saved_id = await stack.enter_async_context(self.session.conversation(self.stderr))
        new_id = f"{saved_id}.{secrets.token_urlsafe(24)}"  # never guessed, even in minutes
        self.open[new_id] = Conversation(agent, new_id, stack, caller)
        await self._bound()
        return self.open[new_id]

    async def _bound(self) -> None:
        """Close the least recently used idle conversations beyond MAX_CONVERSATIONS."""
        for session_id in list(self.open):
            if len(self.open) <= MAX_CONVERSATIONS:
                return
            if not self.open[session_id].lock.locked():
                await self.open.pop(session_id).close.aclose()

    async def aclose(self) -> None:
        while self.open:
            _, conversation = self.open.popitem(last=False)
            await conversation.close.aclose()

    def start(self, turn: Turn, prompt: str) -> None:
        """Run the turn in the background (its events go to `turn.out`: to the request that
        follows it, or to a task serve_command drives from them)."""
        self.tg.start_soon(self._run, turn, prompt)

    async def _run(self, turn: Turn, prompt: str) -> None:
        """The turn, run by the one loop on its conversation's agent (one turn at a time)."""
        try:
            await self._run_locked(turn, prompt)
        finally:
            turn.ended.set()

    async def _run_locked(self, turn: Turn, prompt: str) -> None:
        session, conversation = self.session, turn.conversation
        redact = session.registry.redact
        async with turn.out_send, conversation.lock:
            agent = conversation.agent
            # A caller that cannot be asked: the policy's own "no approval for it" (how the
            # person who started serve allows it), not "the user declined" (nobody was asked).
            agent.approval.ask = turn.ask if turn.elicits else None
            record = RunRecord(servers=server_states(session.registry))
            with turn.scope:
                request = await expand_refs(session.catalog, prompt, self.stderr)
                async with contextlib.aclosing(agent.run(request)) as events:
                    async for event in events:
                        record.add(event)
                        await turn.out_send.send(event)
            self.waiting.pop(turn.token, None)
            record.servers = server_states(session.registry)
            result = record.to_json(agent.run_usage, agent.session_usage)
            data = redact.deep({"session_id": conversation.session_id, **result})
            await turn.out_send.send(Done(tool_result(data)))


def tool_result(data: dict[str, Any]) -> CallToolResult:
    """`ask`'s result: the answer as text, the record's fields as structuredContent."""
    text = data["answer"] if data["status"] == "answered" else None
    text = text or f"status {data['status']}: {data.get('error') or 'no answer'}"
    return CallToolResult(
        content=[TextContent(text=text)],
        structured_content={key: data[key] for key in SERVE_KEYS},
        is_error=data["status"] == "error",
    )
