"""A reply's tool calls, made ready to run: parsed, resolved, and grouped into batches.

Everything a call needs before approval is decided here, once: its arguments as a JSON
object (or the problem to tell the model), the tool it names, an id no other call of the
reply has, and whether it may run at all (a reply cut by the output limit, a call after
`terminate`, a name nobody offers). What runs together is decided here too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.loop.tool_offer import TERMINATE, ToolOffer
from agent.model.model_types import ToolCall
from agent.tools.toolspec import ToolSpec

MAX_ARGUMENT_DEPTH = 64  # nesting of a tool call's arguments; no real schema comes close
CUT_CALL = (
    'not run: your reply hit the output token limit (finish_reason "length") while you '
    "were writing tool calls, so this call may be incomplete. Send it again, with shorter "
    "arguments or fewer calls per reply."
)


@dataclass(frozen=True)
class Call:
    """One tool call of a reply, parsed and resolved (or with the reason it cannot run)."""

    id: str
    name: str
    arguments: dict[str, Any]
    spec: ToolSpec | None
    problem: str | None = None
    done: str | None = None  # answered without running: a repeat of a call that succeeded


def parse_calls(tool_calls: tuple[ToolCall, ...], offer: ToolOffer, *, cut: bool) -> list[Call]:
    """Resolve each call. Ids are made unique: approvals and results are keyed by them,
    and a model that repeats an id must not get one call's verdict applied to another.
    No call of a reply `cut` by the output limit runs: its arguments may be a prefix
    that happens to parse (or empty, cut right after the name)."""
    calls: list[Call] = []
    seen: set[str] = set()
    finished = False  # a terminate call ends the turn: what follows it does not run
    for number, tc in enumerate(tool_calls, 1):
        call_id, suffix = tc.id, number
        while not call_id or call_id in seen:  # a made-up id must be new too
            call_id, suffix = f"{tc.id or 'call'}_{suffix}", suffix + len(tool_calls)
        seen.add(call_id)
        name, spec, unknown = resolve(tc.name, offer)
        arguments, problem = parse_arguments(tc.arguments)
        problem = unknown or problem
        if finished:
            problem = f"not run: '{TERMINATE}' came before it in the same reply"
        if cut:
            problem = CUT_CALL
        calls.append(Call(call_id, name, arguments, spec, problem))
        finished = finished or (tc.name == TERMINATE and problem is None)
    return calls


def resolve(name: str, offer: ToolOffer) -> tuple[str, ToolSpec | None, str | None]:
    """(the name the call runs as, its tool, the problem when it cannot run).

    Small models often write a tool's own name (`get_current_time`) or Claude Code's
    (`mcp__local__get_current_time`) where `local__get_current_time` is offered. Such a
    name runs the one offered tool it can mean; when several servers have a tool of that
    name, none runs (that collision is what the namespacing exists to prevent) and the
    model is told the full names to choose from.
    """
    spec = offer.tools.tools.get(name)
    if spec is not None or offer.knows(name):
        return name, spec, None
    candidates = sorted(
        public
        for public, tool in offer.tools.tools.items()
        if name in (tool.name, public.partition("__")[2], f"mcp__{tool.server}__{tool.name}")
        and offer.offers(public)
    )
    if len(candidates) == 1:
        return candidates[0], offer.tools.tools[candidates[0]], None
    if candidates:
        return (
            name,
            None,
            (
                f"unknown tool '{name}': {len(candidates)} servers have a tool of that name "
                f"({', '.join(candidates)}); call the one you mean by its full name"
            ),
        )
    return name, None, offer.unknown(name)


def batches(calls: list[Call], verdicts: Mapping[str, str | None]) -> list[list[Call]]:
    """Calls in groups that may run at once: read-only calls together, and each call that
    may change state alone, in the order the model wrote them (`create_directory` then
    `move_file` into it must not race). A refused call runs nothing; the agent's own tools
    only read."""
    groups: list[list[Call]] = []
    previous_reads = False
    for call in calls:
        reads = verdicts[call.id] is not None or call.spec is None or call.spec.read_only
        if reads and previous_reads:
            groups[-1].append(call)
        else:
            groups.append([call])
        previous_reads = reads
    return groups


def wire(call: Call) -> dict[str, Any]:
    """The call as memory keeps it: arguments re-serialised, so strict endpoints accept it."""
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """The model's arguments as a JSON object, or the problem to tell it.

    Everything downstream (servers, redaction, transcripts, JSON output) walks the value, so
    what no schema needs is refused here: NaN/Infinity and absurd nesting.
    """
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        return {}, (
            f"the arguments are not valid JSON ({exc.msg} at position {exc.pos}); "
            "send a JSON object that matches the tool's schema"
        )
    except (ValueError, RecursionError) as exc:
        return {}, f"the arguments are not usable JSON ({exc}); send a plain JSON object"
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, got {type(value).__name__}"
    if _depth(value) > MAX_ARGUMENT_DEPTH:
        return {}, f"the arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    return value, None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _depth(value: Any) -> int:
    """Nesting depth, counted without recursion (the value may be thousands deep)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_ARGUMENT_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest
