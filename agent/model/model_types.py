"""The model seam's types: the protocol the loop calls and the values it gets back.

`ChatModel.stream` yields text fragments as they arrive, a `RetryNotice` whenever a request
is retried, and one `Reply` last. The loop, compaction, text calls and sampling know only
these; `agent.model.llm` implements the protocol over HTTP and tests script it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolCall:
    """One function call as the model wrote it; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Usage:
    """Tokens the server reported; `unreported` counts the requests it gave no usage for
    (many local servers send none when streaming), so a front end says "unknown", not 0."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    unreported: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    # What the requests cost (agent.model.prices); `unpriced` counts those with no known price.
    cost_usd: float = 0.0
    unpriced: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.unreported + other.unreported,
            self.cached_tokens + other.cached_tokens,
            self.cost_usd + other.cost_usd,
            self.unpriced + other.unpriced,
        )

    @property
    def cost_known(self) -> bool:
        """A price for every request and tokens reported for some: never a made-up 0."""
        return self.unpriced == 0 and self.known

    def shown_cost(self) -> str:
        """The cost as a person reads it: "unknown", or dollars ("+": a lower bound)."""
        if not self.cost_known:
            return "unknown"
        return f"${self.cost_usd:.4f}" + ("+" if self.unreported else "")

    @property
    def known(self) -> bool:
        """Whether any count was reported (a run of unreported requests knows nothing)."""
        return self.unreported == 0 or bool(self.prompt_tokens or self.completion_tokens)

    def shown(self, tokens: int) -> str:
        """One count as a person reads it: "unknown", or a lower bound marked with "+"."""
        if not self.known:
            return "unknown"
        return f"{tokens}+" if self.unreported else str(tokens)


UNREPORTED = Usage(unreported=1)


@dataclass(frozen=True)
class Reply:
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None


@dataclass(frozen=True)
class RetryNotice:
    """A request failed in a retryable way and is about to be sent again.

    `discarded_text` says text of the failed attempt was already streamed and is now void.
    """

    attempt: int
    delay: float
    reason: str
    discarded_text: bool = False


class ChatModel(Protocol):
    model: str

    def stream(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AsyncIterator[str | RetryNotice | Reply]: ...
