"""Context-window accounting for the loop: how many tokens a request's messages may use.

The window and the reply's reserve come from the settings; what the server says when a
request did not fit corrects both for the rest of the session (its window, and how many
real tokens one of our estimated tokens is). The loop asks this object for a budget before
each request, for a smaller one after an overflow, whether it is time to compact, and for
the notices that say history was left out.
"""

from __future__ import annotations

from agent.common.errors import ContextOverflowError
from agent.common.memory import Fitted, Memory, estimate_tokens
from agent.loop.events import Notice


class ContextBudget:
    """The window of one conversation, and what was learnt about it."""

    def __init__(
        self,
        memory: Memory,
        *,
        context_window: int = 128_000,
        reserve_tokens: int = 4096,
        compact_at: float = 0.0,
    ) -> None:
        self.memory = memory
        self.context_window = context_window
        self.reserve_tokens = reserve_tokens
        self.compact_at = compact_at  # share of the window that triggers compaction (0: off)
        self.compaction_tried = False  # this run: compacting again would not help
        self._token_scale = 1.0  # real tokens per estimated token, learnt from overflow errors
        self._dropped_shown = 0  # messages left out of the last request we told about

    def new_run(self) -> None:
        self.compaction_tried = False

    def reserve(self) -> int:
        """The reply's reserve: at most a quarter of the window, so a small local context
        (2k-8k) with the default max_tokens still has room for the conversation."""
        return min(self.reserve_tokens, self.context_window // 4)

    def room(self) -> int:
        """Tokens (in our estimate's units) a request may use besides the reply: what a
        compacted history may fill."""
        return int((self.context_window - self.reserve()) / self._token_scale)

    def budget(self, tools_tokens: int) -> int:
        """Tokens (in our estimate's units) the messages may use; never negative."""
        return max(0, self.room() - tools_tokens)

    def compacted(self) -> None:
        """History was rewritten: a later trim is news again."""
        self._dropped_shown = 0

    def over_compaction_threshold(self, tools_tokens: int) -> bool:
        if not self.compact_at or self.compaction_tried:
            return False
        memory = self.memory
        size = estimate_tokens(memory.system_prompt) + tools_tokens
        size += sum(memory.cost(m) for m in memory.messages)
        return size * self._token_scale > self.compact_at * self.context_window

    def learn_overflow(self, exc: ContextOverflowError, sent: Fitted, tools_tokens: int) -> int:
        """Take the server's counts as the truth for every later request (a REPL keeps
        fitting), and return a budget below what was just sent, so the re-send is smaller."""
        sent_tokens = sum(self.memory.cost(m) for m in sent.messages)
        if exc.context_window:
            self.context_window = min(self.context_window, exc.context_window)
        if exc.request_tokens and sent_tokens + tools_tokens:
            scale = exc.request_tokens / (sent_tokens + tools_tokens)
            self._token_scale = max(self._token_scale, scale)
        if exc.context_window or exc.request_tokens:
            return sent_tokens - 1
        return sent_tokens // 2  # the server gave no numbers: halve

    def overflow_notice(self) -> Notice:
        return Notice(
            f"the request did not fit the model's context ({self.context_window} "
            "tokens); trimming older messages and sending it again",
            "warning",
        )

    def dropped_notice(self, fitted: Fitted, budget: int) -> Notice | None:
        """Say when history starts being left out of requests, and when more is."""
        shown, self._dropped_shown = self._dropped_shown, fitted.dropped
        if fitted.dropped <= shown:
            return None
        room = "no room" if budget == 0 else f"~{budget} tokens"
        return Notice(
            f"context window {self.context_window} tokens ({room} for the conversation after "
            f"the system prompt, tools and reply): left {fitted.dropped} older messages "
            f"(~{fitted.dropped_tokens} tokens) out of this request",
            "warning",
        )

    def no_room(self, tools_tokens: int) -> str:
        system = estimate_tokens(self.memory.system_prompt)
        return (
            f"the request does not fit the model's context ({self.context_window} tokens) even "
            f"with the older history left out (system prompt ~{system} tokens, tool list "
            f"~{tools_tokens}); start the server with a larger context, or offer fewer tools "
            "(include_tools / exclude_tools)"
        )
