"""The shape of a tool the agent itself offers (read_resource, load_skill, read_result,
find_tools), next to the servers' tools.

Below the loop, so the packages that build one (tools.catalog, extensions.skills) need not
import the loop that offers them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent.tools.results import Observation


@dataclass(frozen=True)
class AgentTool:
    """A tool the agent itself offers: its declaration for the model and how it runs."""

    schema: dict[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[Observation]]
