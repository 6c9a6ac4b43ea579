"""The session's sub-agents (agent/loop/subagents.py), as start-up builds them: the
definitions found (agent/extensions/agent_files.py: the user's, a trusted project's), and
what a child is built with that only the settings know (its system prompt's other parts,
its model's prices, its tool search, its step budget).

`task` is offered only where it costs a small model nothing (issue 42 #5): a definition
exists, the context window is large, or `[agent] subagents = true`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from rich.console import Console

from agent.common.memory import Memory
from agent.config.settings import Settings
from agent.extensions.agent_files import find_definitions
from agent.loop.events import Usage
from agent.loop.subagents import ChildSetup, Subagents, offers_task
from agent.model.llm import DEFAULT_MAX_TOKENS
from agent.model.prices import PriceTable
from agent.tools.registry import ToolRegistry
from agent.tools.search import ToolSearch


def open_subagents(
    settings: Settings,
    registry: ToolRegistry,
    environment: str,
    tool_search: Callable[[], ToolSearch | None],
    environ: Mapping[str, str] = os.environ,
) -> Subagents | None:
    """The session's `task` tool and its agents; None when it is not offered."""
    definitions, _ = find_definitions(settings, environ)  # said once: warn_definitions
    if not offers_task(settings.agent.subagents, settings.llm.context_window, definitions):
        return None
    table = PriceTable(settings.llm.prices)

    def system_prompt(body: str) -> str:
        """A definition's body, then what every prompt of ours says (tool results are data),
        where it runs and the servers' instructions: not the parent's prompt nor AGENTS.md."""
        return Memory.with_instructions(body, registry.instructions(), environment).system_prompt

    def price_for(model: str) -> Callable[[Usage], Usage]:
        return lambda usage: table.priced(model, usage)

    setup = ChildSetup(
        system_prompt,
        price_for,
        tool_search,
        max_steps=settings.agent.max_steps,
        reserve_tokens=settings.llm.max_tokens or DEFAULT_MAX_TOKENS,
        compact_at=settings.agent.compact_at,
    )
    return Subagents(definitions, setup)


def warn_definitions(settings: Settings, registry: ToolRegistry, stderr: Console) -> None:
    """A warning line for each agent file that is not a definition (once a session)."""
    _, warnings = find_definitions(settings, os.environ)
    for warning in warnings:
        stderr.print(
            f"warning: {registry.redact(warning)}", markup=False, highlight=False, style="yellow"
        )
