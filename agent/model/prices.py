"""What a session costs: a price per model, applied to the tokens each request used.

Defaults cover common hosted models (US dollars per million tokens, list prices when this
was written); `[llm.prices."model"]` in config.toml adds or overrides one. A model found in
neither costs "unknown", never 0: a local server's model is free only when you say so
(`input = 0, output = 0`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from agent.config.settings import ModelPrice
from agent.model.model_types import Usage


def _p(input: float, output: float, cached: float | None = None) -> ModelPrice:
    return ModelPrice(input=input, output=output, cached=cached)


DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-5": _p(1.25, 10.0, 0.125),
    "gpt-5-mini": _p(0.25, 2.0, 0.025),
    "gpt-5-nano": _p(0.05, 0.40, 0.005),
    "gpt-4.1": _p(2.0, 8.0, 0.50),
    "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "gpt-4o": _p(2.50, 10.0, 1.25),
    "gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "o3": _p(2.0, 8.0, 0.50),
    "o3-mini": _p(1.10, 4.40, 0.55),
    "o4-mini": _p(1.10, 4.40, 0.275),
    "deepseek-chat": _p(0.27, 1.10, 0.07),
    "deepseek-reasoner": _p(0.55, 2.19, 0.14),
    "claude-opus-4": _p(15.0, 75.0, 1.50),
    "claude-sonnet-4": _p(3.0, 15.0, 0.30),
    "claude-3-5-haiku": _p(0.80, 4.0, 0.08),
}
_SEPARATORS = ("-", ":", "@", ".")  # what may follow a known name in a dated or tagged one


class PriceTable:
    """Prices by model name: exact, else the longest known name the model's name extends
    (`gpt-4o-2024-08-06` is `gpt-4o`, `gpt-4o-mini-…` is `gpt-4o-mini`), after any
    provider prefix (`openai/gpt-4o`)."""

    def __init__(self, overrides: Mapping[str, ModelPrice] | None = None) -> None:
        self.prices = {**DEFAULT_PRICES, **(overrides or {})}

    def find(self, model: str) -> ModelPrice | None:
        for name in (model, model.rsplit("/", 1)[-1]):
            if name in self.prices:
                return self.prices[name]
            known = [k for k in self.prices if name.startswith(k) and name[len(k)] in _SEPARATORS]
            if known:
                return self.prices[max(known, key=len)]
        return None

    def priced(self, model: str, usage: Usage) -> Usage:
        """`usage` (one request's) with its cost, or counted as unpriced. A request the
        server reported no tokens for costs nothing here, so a sum with it is a lower bound
        (`Usage.shown_cost` marks it "+", or says "unknown" when nothing was reported)."""
        price = self.find(model)
        if price is None:
            return replace(usage, cost_usd=0.0, unpriced=1)
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_price = price.input if price.cached is None else price.cached
        dollars = (
            (usage.prompt_tokens - cached) * price.input
            + cached * cached_price
            + usage.completion_tokens * price.output
        ) / 1_000_000
        return replace(usage, cost_usd=dollars, unpriced=0)
