"""Who may run what: MCP annotations plus the user's choices.

Read-only tools run freely, and so do the tools the user's config trusts (`trust`) and
those `--allowed-tools` / `[agent] allowed_tools` name. Others need a yes from the human (a
callback injected by the front end), `--yes`, or an earlier "always" for that exact
(server, tool) pair, so one server can never inherit another server's approval. A tool
`--disallowed-tools` / `[agent] disallowed_tools` names never runs, whatever else says yes
(`--yes`, `trust`, a hook, an answer), and is not offered to the model: this policy is
asked by the gate (agent/loop/gate.py) for every call, whoever makes it, and by the tool
offer for what the model sees.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Awaitable, Callable, Iterable, Mapping
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


@dataclass(frozen=True)
class ToolRules:
    """`--allowed-tools` / `--disallowed-tools` patterns (globs: `*`, `?`, `[…]`).

    A pattern names a tool as the model sees it (`local__bash`), as its server and own
    name (`local__bash` for a tool whose public name was shortened or suffixed), or as
    Claude Code does (`mcp__local__bash`); a server's name alone as Claude Code writes it
    (`mcp__local`) means every tool of that server.
    """

    allowed: tuple[str, ...] = ()
    disallowed: tuple[str, ...] = ()

    @classmethod
    def of(cls, allowed: Iterable[str] = (), disallowed: Iterable[str] = ()) -> ToolRules:
        return cls(split_patterns(allowed), split_patterns(disallowed))

    def allows(self, spec: ToolSpec, public: str = "") -> bool:
        return _matches(self.allowed, spec, public)

    def disallows(self, spec: ToolSpec, public: str = "") -> bool:
        return _matches(self.disallowed, spec, public)

    def unmatched(
        self, tools: Mapping[str, ToolSpec], own: Iterable[str], down: set[str]
    ) -> list[str]:
        """What to say of each allowed pattern that matches none of `tools` (by public
        name) nor the agent's `own`: a typo, or another CLI's name for a tool, approves
        nothing, and the user would only find out when asked. A pattern naming a server
        that is `down` is left out: its failure was said already."""
        said = []
        for pattern in self.allowed:
            if pattern.removeprefix("mcp__").split("__")[0] in down:
                continue
            if any(_matches((pattern,), spec, public) for public, spec in tools.items()):
                continue
            if any(fnmatch.fnmatchcase(name, pattern) for name in own):
                continue
            close = difflib.get_close_matches(pattern, list(tools), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            said.append(f"--allowed-tools {pattern} matches no tool{hint}")
        return said


def split_patterns(values: Iterable[str]) -> tuple[str, ...]:
    """Patterns as Claude Code takes them: each value may hold several, split by commas
    or spaces (`--allowed-tools "mcp__db__query mcp__db__list_tables"`)."""
    return tuple(p for v in values for p in v.replace(",", " ").split() if p)


def _matches(patterns: tuple[str, ...], spec: ToolSpec, public: str) -> bool:
    if not patterns:
        return False
    names = (public, f"{spec.server}__{spec.name}", f"mcp__{spec.server}__{spec.name}")
    whole_server = f"mcp__{spec.server}"
    return any(
        pattern == whole_server or any(fnmatch.fnmatchcase(n, pattern) for n in names)
        for pattern in patterns
    )


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
    rules: ToolRules = ToolRules()  # --allowed-tools / --disallowed-tools

    def hidden(self, spec: ToolSpec, public: str = "") -> bool:
        """Whether the model must not even be offered `spec` (it is disallowed)."""
        return self.rules.disallows(spec, public)

    def needs_approval(self, spec: ToolSpec, public: str = "") -> bool:
        if spec.read_only or self.mode == "yes" or self.trusted(spec.server, spec.name):
            return False
        if self.rules.allows(spec, public):
            return False
        return (spec.server, spec.name) not in self.always

    async def check(self, request: ApprovalRequest, hook_asks: str | None = None) -> Verdict:
        """`hook_asks`: a PreToolUse hook wants the user asked (its reason), whatever the
        settings would allow; what the settings refuse stays refused."""
        if self.rules.disallows(request.spec, request.public_name):
            return Verdict(
                False,
                f"Not run: '{request.tool}' on server '{request.server}' is disallowed by the "
                "user's settings (--disallowed-tools / disallowed_tools). Do not retry it; "
                "continue without it or tell the user what you would have done.",
            )
        if hook_asks is not None and (request.spec.read_only or self.mode != "read-only"):
            if self.ask is None:
                return Verdict(
                    False,
                    f"Not run: a hook wants the user to approve '{request.tool}' on server "
                    f"'{request.server}' ({hook_asks}) and this run cannot ask.",
                )
            return self._answer(request, await self.ask(replace(request, reason=hook_asks)))
        if not self.needs_approval(request.spec, request.public_name):
            return Verdict(True)
        if self.mode == "read-only" or self.ask is None:
            how = (
                "the approval mode is read-only (the user can change it with /approve)"
                if self.mode == "read-only"
                else "this run has no approval for it (rerun with --yes to allow, or with "
                f"--allowed-tools {request.public_name} to allow this tool alone)"
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
