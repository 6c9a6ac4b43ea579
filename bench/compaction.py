"""Tokens sent over a 20-turn scripted session, with compaction (the default, at 80% of the
window) vs without (`compact_at = 0`: older messages are only trimmed).

In process: the real loop and memory, the scripted model of the tests (tests/support/fake_model.py)
answering each turn after one tool call with a long result, in an 8,000-token window. The
count is our estimate of every request's prompt (summarising requests included), the
number a local model spends its prompt processing on.
"""

from __future__ import annotations

from typing import Any

import anyio

from agent.common.memory import Memory, estimate_tokens
from agent.loop.compaction import SUMMARY_SYSTEM
from agent.loop.react import Agent
from agent.model.model_types import Reply, Usage
from bench.measures import Row
from tests.support.fake_model import FakeModel, FakeTools, calls

TURNS = 20
WINDOW = 8000
RESULT = "row " * 600  # ~600 tokens of tool output per turn


async def _lookup(args: dict[str, Any]) -> str:
    return RESULT


def _reply(messages: list[dict[str, Any]]) -> Reply:
    """A summary for a summarising request; else a call on a turn's first step, an answer
    after its result."""
    if messages[0]["content"] == SUMMARY_SYSTEM:
        return Reply("Summary: the user asked about rows; each lookup returned rows.", (), Usage())
    if messages[-1]["role"] == "user":
        return calls(("lookup", {"q": len(messages)}))
    return Reply("The rows say: " + "fine " * 100, (), Usage(), "stop")


async def _session(compact_at: float) -> tuple[int, int, int]:
    """(prompt tokens sent, requests, largest request) over TURNS turns."""
    model = FakeModel([_reply] * (TURNS * 4))
    tools = FakeTools({"lookup": _lookup}, read_only=frozenset({"lookup"}))
    agent = Agent(model, tools, Memory(), context_window=WINDOW, compact_at=compact_at)
    for turn in range(TURNS):
        async for _ in agent.run(f"question {turn}: what do the rows say?"):
            pass
    sizes = [sum(estimate_tokens(m) for m in request) for request in model.requests]
    return sum(sizes), len(sizes), max(sizes)


def compaction_tokens() -> list[Row]:
    with_tokens, with_requests, with_largest = anyio.run(_session, 0.8)
    without_tokens, without_requests, without_largest = anyio.run(_session, 0.0)
    detail = {
        "turns": TURNS,
        "window": WINDOW,
        "with": {"requests": with_requests, "largest": with_largest},
        "without": {"requests": without_requests, "largest": without_largest},
    }
    return [
        Row(
            "compaction_tokens",
            f"{TURNS}-turn session, {WINDOW}-token window: prompt tokens, compaction vs trim",
            "count",
            with_tokens,
            without_tokens,
            "ratio",
            1.0,
            detail,
        )
    ]


if __name__ == "__main__":
    for row in compaction_tokens():
        print(row.label, row.ours, row.baseline, f"{row.value:.2f}x", row.detail)
