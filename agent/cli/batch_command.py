"""`run_mcp.py batch INPUT.jsonl --out OUT.jsonl`: many prompts, each its own conversation,
over one set of connected servers.

One session is opened as for every front end (agent.session.startup); each row is a
`Session.conversation` (its own agent, memory and transcript on the shared servers, skills
and catalog) run by the one loop, `--parallel N` at a time. Each row's line is `--output
json`'s object plus `id`, its `session_id` and the input's other fields, written (masked by
the redactor) to OUT as it finishes. A row that fails is written with its error and the
rest go on. The options are `run`'s own (read from its signature, handed over by
agent.cli.main), less those about one run's input and output. The rows, their lines and
OUT are agent/cli/batch_rows.py's; with `--cluster` the rows run on a Dask cluster's
workers instead (agent/cli/batch_cluster.py). Documented in docs/programs.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
import typer

from agent.cli.batch_rows import (
    OutFile,
    Plan,
    Row,
    Tally,
    answer_row,
    check_out,
    drop_unused,
    failed_line,
    finish,
    finished_keys,
    progress,
    read_rows,
    say_stopped,
)
from agent.cli.subcommands import run_session, session_command_app
from agent.cli.trust_command import settle
from agent.common.errors import ConfigError
from agent.config.settings import Settings
from agent.session.startup import Session, Unavailable, open_script_session, prepare_session
from agent.ui.safe import SafeConsole


def _batch_options(
    input: Annotated[
        Path,
        typer.Argument(
            metavar="INPUT.jsonl",
            help='The prompts: one JSON object a line, {"id": ..., "prompt": ...}; other '
            "fields are echoed into the results.",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="OUT.jsonl", help="Where the results go, a JSON line per row."
        ),
    ],
    parallel: Annotated[
        int,
        typer.Option("--parallel", min=1, help="Rows run at once, over one set of servers."),
    ] = 1,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Append to OUT, skipping the ids already in it."),
    ] = False,
    max_errors: Annotated[
        int | None,
        typer.Option("--max-errors", min=1, help="Stop starting rows after N failed ones."),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            metavar="tcp://HOST:PORT",
            help="Run the rows on this Dask scheduler's workers (the cluster extra).",
        ),
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace",
            metavar="DIR",
            help="With --cluster: the folder the rows run in on every worker (a shared "
            "one); else each worker's own scratch folder.",
        ),
    ] = None,
) -> None:
    """The batch's own options (their signature is merged with `run`'s)."""


def batch_app(run: Callable[..., None], resolve: Callable[..., Settings]) -> typer.Typer:
    """The `batch` command: its own options, then `run`'s shared ones (agent.cli.subcommands)."""
    return session_command_app(
        run,
        _batch_options,
        lambda opts, **own: run_batch(opts, resolve, **own),
        "Run each prompt of INPUT.jsonl as its own conversation; results to OUT.",
    )


def run_batch(
    opts: dict[str, Any],
    resolve: Callable[..., Settings],
    *,
    input: Path,
    out: Path,
    parallel: int,
    resume: bool,
    max_errors: int | None,
    cluster: str | None = None,
    workspace: Path | None = None,
) -> int:
    if workspace is not None and cluster is None:
        raise ConfigError("--workspace is for --cluster: a local batch runs in this folder")
    if not input.is_file():
        raise ConfigError(f"{input}: no such file (INPUT.jsonl: the prompts, a JSON line each)")
    check_out(out, resume)
    environ = dict(os.environ)
    settings = resolve(opts, environ)
    settings = settle(
        settings,
        environ,
        ask=False,
        trusted=lambda: resolve({**opts, "trust_workspace": True}, environ),
    )
    done = finished_keys(out) if resume else set()
    plan = Plan(input, out, parallel, max_errors, done, resume)
    if cluster is not None:  # the same rows and OUT, run by a Dask cluster's workers
        from agent.cli.batch_cluster import run_on_cluster

        return run_on_cluster(settings, plan, cluster, workspace, opts["trust_workspace"])
    return run_session(settings, _batch, settings, plan)


async def _batch(settings: Settings, plan: Plan) -> int:
    redact = settings.redactor(os.environ)
    stderr = SafeConsole(stderr=True, redact=redact)
    prepared = prepare_session(settings, stderr, None, stderr)
    out: OutFile | None = None
    tally = Tally()
    unavailable: str | None = None
    cut_short = True  # until the rows ran: Ctrl-C, a signal
    try:
        out = OutFile(plan.out, redact, plan.resume)
        async with open_script_session(prepared, stderr) as session:
            with progress(stderr, settings, plan.input) as advance:
                await _run_rows(session, plan, out, tally, stderr, advance)
            session.registry.hasten_shutdown()
        cut_short = False
    except* Unavailable as refused:
        unavailable, cut_short = str(refused.exceptions[0]), False
    finally:
        if out is not None:
            out.close()
            if cut_short:
                say_stopped(stderr, plan, tally)
        drop_unused(prepared.saved.transcript.path)
    if unavailable is not None:
        stderr.print(f"error: {unavailable}", markup=False, highlight=False)
        return 1
    return finish(stderr, settings, plan, tally)


async def _run_rows(
    session: Session,
    plan: Plan,
    out: OutFile,
    tally: Tally,
    stderr: SafeConsole,
    advance: Callable[[], None],
) -> None:
    """Start rows while fewer than `parallel` run; stop starting at `max_errors`."""
    slots = anyio.Semaphore(plan.parallel)

    def record(line: dict[str, Any]) -> None:
        out.write(line)
        tally.count(line["status"])
        advance()

    async def one(row: Row) -> None:
        try:
            record(await answer_row(session, row, stderr))
        except Exception as exc:  # a row that raised is recorded; the others go on
            record(failed_line(row, f"{type(exc).__name__}: {exc}"))
        finally:
            slots.release()

    def over() -> bool:
        return plan.max_errors is not None and tally.failed >= plan.max_errors

    async with anyio.create_task_group() as tg:
        for row in read_rows(plan.input):
            if row.key in plan.done:
                tally.skipped += 1
                advance()
                continue
            if not over():
                await slots.acquire()
                if over():  # a row failed while this one waited for a slot
                    slots.release()
            if over():
                tally.stopped = True
                tally.not_run += 1
                continue
            if row.error is not None:
                slots.release()
                record(failed_line(row, row.error))
                continue
            tg.start_soon(one, row)
