"""Who may run what: MCP annotations plus the user's choices.

Read-only tools run freely, and so do the tools the user's config trusts (`trust`). Others
need a yes from the human (a callback injected by the front end), `--yes`, or an earlier
"always" for that exact (server, tool) pair, so one server can never inherit another
server's approval.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from agent.tools.toolspec import ToolSpec

Decision = Literal["yes", "no", "always"]
Mode = Literal["ask", "yes", "read-only"]


@dataclass(frozen=True)
class ApprovalRequest:
    server: str
    tool: str
    public_name: str
    arguments: dict[str, Any]
    spec: ToolSpec
    reason: str = ""  # why the user is asked, when a hook (not the settings) asks


AskFn = Callable[[ApprovalRequest], Awaitable[Decision]]


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""


@dataclass
class ApprovalPolicy:
    """`mode`: ask (the callback decides), yes (approve all), read-only (refuse the rest).

    Without a callback, `ask` behaves like read-only: a script cannot answer a prompt.
    """

    mode: Mode = "ask"
    ask: AskFn | None = None
    always: set[tuple[str, str]] = field(default_factory=set)  # said "always" this session
    # The config's `trust`: (server, tool) -> approved without asking, in every mode.
    trusted: Callable[[str, str], bool] = field(default=lambda server, tool: False)

    def needs_approval(self, spec: ToolSpec) -> bool:
        if spec.read_only or self.mode == "yes" or self.trusted(spec.server, spec.name):
            return False
        return (spec.server, spec.name) not in self.always

    async def check(self, request: ApprovalRequest, hook_asks: str | None = None) -> Verdict:
        """`hook_asks`: a PreToolUse hook wants the user asked (its reason), whatever the
        settings would allow; what the settings refuse stays refused."""
        if hook_asks is not None and (request.spec.read_only or self.mode != "read-only"):
            if self.ask is None:
                return Verdict(
                    False,
                    f"Not run: a hook wants the user to approve '{request.tool}' on server "
                    f"'{request.server}' ({hook_asks}) and this run cannot ask.",
                )
            return self._answer(request, await self.ask(replace(request, reason=hook_asks)))
        if not self.needs_approval(request.spec):
            return Verdict(True)
        if self.mode == "read-only" or self.ask is None:
            how = (
                "the approval mode is read-only (the user can change it with /approve)"
                if self.mode == "read-only"
                else "this run has no approval for it (rerun with --yes to allow)"
            )
            return Verdict(
                False,
                f"Not run: '{request.tool}' on server '{request.server}' may change things and "
                f"{how}. Tell the user what you would have done instead.",
            )
        return self._answer(request, await self.ask(request))

    def _answer(self, request: ApprovalRequest, decision: Decision) -> Verdict:
        if decision == "always":
            self.always.add((request.server, request.tool))
        if decision in ("yes", "always"):
            return Verdict(True)
        return Verdict(
            False,
            f"The user declined to run '{request.tool}' on server '{request.server}'. "
            "Do not retry it; ask the user or continue without it.",
        )
