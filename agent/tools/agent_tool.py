"""The shape of a tool the agent itself offers (read_resource, load_skill, read_result,
find_tools, update_plan), next to the servers' tools.

Below the loop, so the packages that build one (tools.catalog, extensions.skills) need not
import the loop that offers them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent.tools.results import Observation

Report = Callable[[Any], Awaitable[None]]


@dataclass(frozen=True)
class CallContext:
    """What one call of the agent's own tool has besides its arguments: the call's ID (a
    sub-agent's events name the call that started it) and `report`, which puts an event of
    agent.loop.events on the step's stream as the call runs (a plan shown as it changes)."""

    call_id: str
    report: Report


async def _nowhere(event: Any) -> None:
    """Where a call run outside a step reports: nobody is watching."""


@dataclass(frozen=True)
class AgentTool:
    """A tool the agent itself offers: its declaration for the model and how it runs.

    `run_in` is for a tool that reports while it runs: the loop calls it, with the call's
    context, instead of `run` (which then runs it with nobody watching)."""

    schema: dict[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[Observation]]
    run_in: Callable[[dict[str, Any], CallContext], Awaitable[Observation]] | None = None

    @classmethod
    def reporting(
        cls,
        schema: dict[str, Any],
        run_in: Callable[[dict[str, Any], CallContext], Awaitable[Observation]],
    ) -> AgentTool:
        """A tool whose calls report events (agent.loop.events) on the step's stream."""

        async def unwatched(arguments: dict[str, Any]) -> Observation:
            return await run_in(arguments, CallContext("", _nowhere))

        return cls(schema, unwatched, run_in)
