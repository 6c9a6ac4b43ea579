"""A 100-row `run_mcp.py batch --parallel 4` against 100 sequential `run_mcp.py -p` runs,
both against the scripted model and the bundled server, measured in the same run.

What a harness saves by driving one batch instead of a process per prompt: the batch
starts the agent and its servers once and runs 4 rows at a time; each `-p` run pays the
start-up (imports, the server's start, the connect) and the exit. Each row is one model
request answered at once, so the rows cost the agent's own work, not the model's.
"""

from __future__ import annotations

import json
import sys

from bench.measures import RUN_MCP, Row, run_cli, workdir
from bench.timing import TimedLLM, agent_env, run_timed
from tests.support.fake_llm import text

ROWS = 100
PARALLEL = 4
TARGET = 0.25  # the batch must take at most a quarter of the sequential runs' time


def batch_vs_sequential(smoke: bool) -> list[Row]:
    rows = 2 if smoke else ROWS
    with workdir("batch") as tmp:
        prompts = tmp / "in.jsonl"
        prompts.write_text("".join(json.dumps({"id": i, "prompt": f"q{i}"}) + "\n"
                                   for i in range(rows)))  # fmt: skip
        with TimedLLM(*[text("ok")] * rows) as llm:
            argv = [sys.executable, RUN_MCP, "batch", str(prompts), "--out", str(tmp / "out.jsonl"),
                    "--parallel", str(PARALLEL)]  # fmt: skip
            batch = run_timed(argv, cwd=tmp, env=agent_env(llm.base_url, tmp / "state"))
            if batch.returncode != 0:
                raise RuntimeError(f"batch exited {batch.returncode}:\n{batch.stderr}")
            lines = (tmp / "out.jsonl").read_text().splitlines()
            answered = [json.loads(line)["status"] for line in lines]
            if answered != ["answered"] * rows:
                raise RuntimeError(f"batch rows: {answered}")
        with TimedLLM(*[text("ok")] * rows) as llm:
            singles = [run_cli(["-p", f"q{i}"], llm, tmp).seconds for i in range(rows)]
    sequential = sum(singles)
    label = f"{rows}-row batch --parallel {PARALLEL} vs {rows} sequential -p runs (scripted model)"
    detail = {"rows": rows, "parallel": PARALLEL, "per_p_run_s": sequential / rows}
    return [Row("batch_parallel", label, "s", batch.seconds, sequential, "ratio", TARGET, detail)]
