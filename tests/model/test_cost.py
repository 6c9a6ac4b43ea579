"""What a run costs: the price table (defaults, config overrides) applied to the tokens the
scripted model reports, as `--output json` and the REPL's /usage show it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.config.settings import ModelPrice
from agent.model.model_types import Usage
from agent.model.prices import PriceTable
from tests.support.cli import run_cli
from tests.support.fake_llm import ScriptedLLM, Turn, text, tool_calls


def spent(prompt: int, completion: int, cached: int = 0) -> Turn:
    turn = text("done")
    turn.usage, turn.cached = (prompt, completion), cached
    return turn


def json_usage(tmp_path: Path, args: list[str], *script: Turn) -> dict[str, Any]:
    """`usage` from the JSON of a `-p` run (ARGS + `--output json`) against a model scripted so."""
    with ScriptedLLM(*script) as llm:
        proc = run_cli([*args, "--output", "json"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    usage: dict[str, Any] = json.loads(proc.stdout)["usage"]
    return usage


def test_json_output_shows_tokens_and_cost_per_turn_and_session(tmp_path: Path) -> None:
    first = tool_calls(("local__get_current_time", {}))
    first.usage, first.cached = (1000, 500), 400
    args = ["-p", "time?", "--model", "gpt-4o-2024-08-06"]
    usage = json_usage(tmp_path, args, first, spent(2000, 100, 2000))
    # gpt-4o: $2.50 in, $1.25 cached, $10 out per million tokens.
    dollars = (600 * 2.5 + 400 * 1.25 + 500 * 10 + 2000 * 1.25 + 100 * 10) / 1e6
    assert usage["prompt_tokens"] == 3000 and usage["completion_tokens"] == 600
    assert usage["cached_tokens"] == 2400
    assert usage["cost_usd"] == round(dollars, 6) == 0.0105
    assert usage["session"] == {k: v for k, v in usage.items() if k != "session"}


def test_a_model_without_a_price_costs_unknown_never_zero(tmp_path: Path) -> None:
    usage = json_usage(tmp_path, ["-p", "hi", "--model", "my-finetune"], spent(100, 10))
    assert usage["prompt_tokens"] == 100 and usage["cost_usd"] == "unknown"
    assert usage["session"]["cost_usd"] == "unknown"


def test_config_prices_add_a_model_and_override_a_default(tmp_path: Path) -> None:
    config = tmp_path / "settings.toml"
    config.write_text(
        '[llm.prices."my-finetune"]\ninput = 1.0\noutput = 2.0\n\n'
        '[llm.prices."gpt-4o-mini"]\ninput = 100\noutput = 100\n'
    )
    for model, expected in (("my-finetune", 0.0012), ("gpt-4o-mini", 0.11)):
        args = ["-p", "hi", "--model", model, "--config", str(config)]
        assert json_usage(tmp_path, args, spent(1000, 100))["cost_usd"] == expected, model


def test_slash_usage_shows_the_cost_of_the_last_turn_and_the_session(tmp_path: Path) -> None:
    with ScriptedLLM(spent(10_000, 1000), spent(20_000, 2000)) as llm:
        proc = run_cli(
            ["-i", "--model", "gpt-4.1"],
            tmp_path,
            base_url=llm.base_url,
            stdin="one\ntwo\n/usage\n",
        )
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.strip()}
    # gpt-4.1: $2 in, $8 out per million: turn two 0.056, both 0.084.
    assert rows["last"][-1] == "$0.0560" and rows["session"][-1] == "$0.0840"
    assert rows["session"][1:5] == ["30000", "0", "3000", "33000"]


def test_prices_match_dated_and_prefixed_names_and_only_those() -> None:
    table = PriceTable({"local-llama": ModelPrice(input=0, output=0)})
    assert table.find("gpt-4o-mini-2024-07-18") == table.prices["gpt-4o-mini"]
    assert table.find("openai/gpt-4o") == table.prices["gpt-4o"]
    assert table.find("gpt-4oo") is None and table.find("qwen2.5-coder") is None
    free = table.priced("local-llama", Usage(500, 50))
    assert free.cost_known and free.shown_cost() == "$0.0000"
    unreported = table.priced("gpt-4o", Usage(unreported=1))
    assert not unreported.cost_known and unreported.shown_cost() == "unknown"
    lower_bound = table.priced("gpt-4o", Usage(1000, 0)) + unreported
    assert lower_bound.shown_cost() == "$0.0025+"
