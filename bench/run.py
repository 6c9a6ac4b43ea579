"""Benchmarks for run_mcp: `python bench/run.py [--smoke] [--json PATH]`.

Prints a table (measurement | ours | baseline | ratio/delta | target | pass/fail) and writes
the same numbers as JSON. Each baseline is measured in the same run, on the same machine, so
the ratios mean something even on a busy 2-core box. Exit 0 even when a target is missed
(benchmarks are not tests); exit 1 when a measurement crashed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # `python bench/run.py` puts bench/, not the repo, first
    sys.path.insert(0, str(REPO_ROOT))

from bench import (  # noqa: E402
    batch_bench,
    batch_cluster,
    compaction,
    flood,
    measures,
    sandbox_bench,
    scale,
    snapshots,
    tasks_bench,
    telemetry,
)
from bench.measures import Comparison, Row  # noqa: E402

DEFAULT_JSON = REPO_ROOT / "bench" / "results.json"
T = TypeVar("T")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="1 repetition, no warm-up (~1 min)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")
    return parser.parse_args(argv)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    digits = 0 if unit == "count" else 3 if unit == "s" else 2 if unit == "ms" else 1
    return f"{value:.{digits}f} {unit}"


def _cells(row: Row) -> list[str]:
    if row.compare == "at_most":
        value = "-" if row.baseline is None else f"{row.ours - row.baseline:+.3f} {row.unit}"
        target = "-" if row.target is None else f"<= {row.target:g} {row.unit}"
    elif row.compare == "ratio":
        value = "-" if row.value is None else f"{row.value:.2f}x"
        target = "-" if row.target is None else f"<= {row.target:g}x"
    else:
        value = "-" if row.value is None else f"{row.value:+.2f} {row.unit}"
        target = "-" if row.target is None else f"<= +{row.target:g} {row.unit}"
    verdict = {True: "pass", False: "FAIL", None: "info"}[row.passed]
    baseline = _fmt(row.baseline, row.unit)
    return [row.label, _fmt(row.ours, row.unit), baseline, value, target, verdict]


def _comparison_cells(c: Comparison) -> list[str]:
    """Our number always shows; ratio, target and verdict only when theirs exists."""
    ratio = "-" if c.ratio is None else f"{c.ratio:.2f}x"
    target = "-" if c.target is None else f"< {c.target:g}x"
    verdict = c.status if c.passed is None else f"{'pass' if c.passed else 'FAIL'}, {c.status}"
    return [c.label, _fmt(c.ours, c.unit), _fmt(c.theirs, c.unit), ratio, target, verdict]


def render_table(rows: list[Row], comparisons: list[Comparison], errors: dict[str, str]) -> str:
    header = ["measurement", "ours", "baseline", "ratio/delta", "target", "pass/fail"]
    body = [_cells(r) for r in rows] + [_comparison_cells(c) for c in comparisons]
    body += [[name, "-", "-", "-", "-", "CRASHED"] for name in errors]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(cells) for cells in body)])


def to_json(
    rows: list[Row], comparisons: list[Comparison], errors: dict[str, str], smoke: bool
) -> dict[str, Any]:
    return {
        "smoke": smoke,
        "python": platform.python_version(),
        "machine": {"cores": measures.os.cpu_count(), "platform": platform.platform()},
        "measurements": {
            r.key: {
                "label": r.label,
                "unit": r.unit,
                "ours": r.ours,
                "baseline": r.baseline,
                "compare": r.compare,
                "value": r.value,
                "target": r.target,
                "passed": r.passed,
                "detail": r.detail,
            }
            for r in rows
        },
        "comparisons": {
            c.key: {
                "label": c.label,
                "status": c.status,
                "unit": c.unit,
                "ours": c.ours,
                "theirs": c.theirs,
                "ratio": c.ratio,
                "target": c.target,
                "passed": c.passed,
                "detail": c.detail,
            }
            for c in comparisons
        },
        "errors": errors,
    }


def run_all(smoke: bool) -> tuple[list[Row], list[Comparison], dict[str, str]]:
    """Run every measurement; a crash is recorded by name and the others still run."""
    reps = 1 if smoke else 5
    rows: list[Row] = []
    errors: dict[str, str] = {}
    state: dict[str, float] = {"startup": float("nan"), "import_rss": float("nan")}

    def attempt(name: str, fn: Callable[[], list[T]]) -> list[T]:
        started = time.perf_counter()
        print(f"… {name}", file=sys.stderr, flush=True)
        found: list[T] = []
        try:
            found = fn()
        except Exception:
            errors[name] = traceback.format_exc(limit=8)
            print(errors[name], file=sys.stderr)
        print(f"  {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        return found

    def startup() -> list[Row]:
        found, state["startup"], state["import_rss"] = measures.startup(reps, warmup=not smoke)
        return found

    rows += attempt("startup", startup)
    rows += attempt("per_step", lambda: measures.per_step_inprocess(reps))
    rows += attempt("peak_rss", lambda: measures.peak_memory(state["import_rss"]))
    rows += attempt("concurrency", measures.concurrency)
    # --smoke only checks the bench still works: 2 servers show that as well as 8.
    rows += attempt("fanout", lambda: measures.fanout(2 if smoke else measures.FANOUT))
    rows += attempt("tool_search", lambda: scale.tool_search(1 if smoke else 3, smoke))
    rows += attempt("many_servers", lambda: scale.connect_many(4 if smoke else scale.MANY_SERVERS))
    rows += attempt("huge_server", lambda: scale.huge_server(smoke))
    rows += attempt("edges", lambda: scale.edges(reps, warmup=not smoke))
    if not smoke:  # a dozen CLI runs: full runs only (--smoke stays within its minute)
        rows += attempt("telemetry", lambda: telemetry.telemetry_overhead(3))
    rows += attempt("compaction", compaction.compaction_tokens)
    rows += attempt(
        "log_flood", lambda: flood.log_flood(1 if smoke else 3, 2000 if smoke else flood.MESSAGES)
    )
    rows += attempt("task_overhead", lambda: tasks_bench.task_overhead(smoke))
    rows += attempt("modern_connect", lambda: tasks_bench.modern_connect(1 if smoke else 3))
    rows += attempt("batch_parallel", lambda: batch_bench.batch_vs_sequential(smoke))
    rows += attempt("batch_cluster", lambda: batch_cluster.cluster_vs_local(smoke))
    rows += attempt("snapshots", lambda: snapshots.snapshot_cost(smoke))
    rows += attempt("sandbox", lambda: sandbox_bench.sandbox_cost(smoke))
    rows += attempt("sandbox_filter", lambda: sandbox_bench.filter_cost(smoke))
    comparisons: list[Comparison] = []
    try:
        comparisons.append(measures.fast_agent(state["startup"], 3, smoke))
    except Exception:
        status = traceback.format_exc(limit=3).strip().splitlines()[-1]
        comparisons.append(Comparison("fast_agent", "start-up vs fast-agent", f"error: {status}"))
    # fast-agent's own failures are caught inside and shown in the row; a crash here is ours.
    rounds_reps = min(reps, 3)  # each fast-agent run takes ~5 s
    comparisons += attempt(
        "rounds_fast_agent", lambda: measures.rounds_vs_fast_agent(rounds_reps, smoke)
    )
    return rows, comparisons, errors


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows, comparisons, errors = run_all(args.smoke)
    print(render_table(rows, comparisons, errors))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(to_json(rows, comparisons, errors, args.smoke), indent=2))
    print(f"results: {args.json}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
