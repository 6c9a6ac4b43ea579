"""`run_mcp.py batch IN --out OUT --cluster tcp://HOST:PORT`: a batch's rows run by a Dask
cluster's workers (agent/cli/batch_worker.py), its OUT written here.

The driver (this process) packs the settings it resolved into a `WorkerPlan` without a
secret in it, registers it as a worker plugin (each worker opens one session for the
batch), submits each row as a task and writes each row's line to OUT as it comes back,
as a local batch does: the same lines, 0600 file, masking, `--resume`, `--max-errors`,
progress bar, Ctrl-C and exit codes. Rows go `--parallel` at a time to each worker, each
to the worker with the fewest running; a row whose worker dies runs once more on another.
Documented in docs/programs.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from agent.cli.batch_rows import (
    OutFile,
    Plan,
    Row,
    Tally,
    failed_line,
    finish,
    progress,
    read_rows,
    say_stopped,
)
from agent.cli.subcommands import run_session
from agent.common.errors import AgentError, ConfigError
from agent.common.redact import is_secret_name
from agent.config.build import BUNDLED_MAIN
from agent.config.settings import Settings, secret_values
from agent.ui.safe import SafeConsole

if TYPE_CHECKING:
    from distributed import Client, Future

    from agent.cli.batch_worker import Secret, WorkerPlan

CONNECT_TIMEOUT = 10.0  # seconds for the scheduler to answer, and for a first worker
NO_WORKERS_TIMEOUT = 60.0  # seconds with no worker at all before the running rows fail
SCHEMES = ("tcp://", "tls://")
SHORTEST_SECRET = 6  # a variable's value shorter than this is never taken for a secret's


def run_on_cluster(
    settings: Settings, plan: Plan, address: str, workspace: Path | None, trusted: bool
) -> int:
    """Check what can be checked before anything is sent, then run the batch."""
    if not address.startswith(SCHEMES) or not address.partition("://")[2]:
        raise ConfigError(f"--cluster {address}: give a Dask scheduler's address, tcp://HOST:PORT")
    try:
        from agent.cli.batch_worker import WorkerPlan
    except ImportError:
        raise ConfigError(
            "--cluster needs Dask's distributed: pip install 'mcp-agent-cli[cluster]'"
        ) from None
    worker_plan = WorkerPlan(
        batch=secrets.token_hex(8),
        parallel=plan.parallel,
        workspace=str(workspace) if workspace is not None else None,
        trusted=trusted and workspace is not None,
        **pack(settings, os.environ),
    )
    return run_session(settings, _cluster_batch, settings, plan, address, worker_plan)


def pack(settings: Settings, environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings as the workers get them: each secret's place empty and its template
    (`${VAR}` where a variable's value was) beside; a secret no variable gives is refused,
    since the task graph must not carry it."""
    from agent.cli.batch_worker import Secret

    data = settings.model_dump(mode="json")
    found: list[Secret] = []
    everything = [(k, v) for k, v in environ.items() if len(v) >= SHORTEST_SECRET]
    secret_named = [(k, v) for k, v in everything if is_secret_name(k) and k.isupper()]
    for path, value, must in _secret_places(data):
        template = _whole(value, environ) or _template(value, everything)
        if template == value and must:
            raise ConfigError(
                f"--cluster: {_where(data, path)} is not taken from an environment variable, "
                "and the task graph carries no secrets: write it as ${VAR} and set VAR on the "
                "workers"
            )
        if template != value:
            found.append(Secret(path, template))
    for path, value in _strings(data):  # a secret-named variable's value anywhere else
        if (
            not any(s.path == path for s in found)
            and (t := _template(value, secret_named)) != value
        ):
            found.append(Secret(path, t))
    for secret in found:
        _put(data, secret.path, "")
    _refuse_leftovers(data, settings, environ)
    bundled = tuple(i for i, s in enumerate(settings.servers) if str(BUNDLED_MAIN) in s.args)
    return {"settings": data, "secrets": tuple(found), "bundled": bundled}


def _secret_places(data: dict[str, Any]) -> Iterator[tuple[tuple[str | int, ...], str, bool]]:
    """Each place a secret may be (path, value, whether it must come from a variable):
    the API key, every header (as the redactor counts them), a server's key and OAuth
    client secret, and its env (a secret-named one must)."""
    if data["llm"].get("api_key"):
        yield ("llm", "api_key"), data["llm"]["api_key"], True
    for i, server in enumerate(data["servers"]):
        for name, value in server.get("headers", {}).items():
            yield ("servers", i, "headers", name), value, True
        if server.get("key"):
            yield ("servers", i, "key"), server["key"], True
        oauth = server.get("oauth")
        if isinstance(oauth, dict) and oauth.get("client_secret"):
            yield ("servers", i, "oauth", "client_secret"), oauth["client_secret"], True
        for name, value in server.get("env", {}).items():
            yield ("servers", i, "env", name), value, is_secret_name(name)


def _whole(value: str, environ: Mapping[str, str]) -> str | None:
    """`${NAME}` for a variable whose value is all of `value`, however short (a local
    server's `OPENAI_API_KEY=x`); a secret-named one first."""
    names = sorted(k for k, v in environ.items() if v == value)
    named = [k for k in names if is_secret_name(k)] + names
    return "${" + named[0] + "}" if named else None


def _template(value: str, variables: Iterable[tuple[str, str]]) -> str:
    """`value` with each variable's value (longest first) replaced by `${NAME}`."""
    for name, secret in sorted(variables, key=lambda item: (-len(item[1]), item[0])):
        if secret in value:
            value = value.replace(secret, "${" + name + "}")
    return value


def _strings(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[Any, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))


def _put(data: Any, path: tuple[str | int, ...], value: str) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = value


def _refuse_leftovers(data: dict[str, Any], settings: Settings, environ: Mapping[str, str]) -> None:
    """The last check: no value the redactor would mask is left in what is sent (an
    `${input:...}` answer, a token in a server's arguments written in a file...)."""
    masked = [v for v in secret_values(settings, environ) if len(v) >= SHORTEST_SECRET]
    for path, value in _strings(data):
        if any(secret in value for secret in masked):
            raise ConfigError(
                f"--cluster: {_where(data, path)} holds a secret that no environment variable "
                "gives, and the task graph carries no secrets: write it as ${VAR} and set VAR "
                "on the workers"
            )


def _where(data: dict[str, Any], path: tuple[str | int, ...]) -> str:
    """A setting's place for a person: `[llm] api_key`, `server 'gh' headers.Authorization`."""
    if path[0] == "servers" and len(path) > 2:
        name = data["servers"][path[1]]["name"]
        return f"server {name!r} " + ".".join(str(p) for p in path[2:])
    return f"[{path[0]}] " + ".".join(str(p) for p in path[1:])


@dataclass
class Running:
    """The rows submitted and not yet written: their futures, and where each was sent."""

    rows: dict[Future, tuple[Row, str]] = field(default_factory=dict)
    workers: list[str] = field(default_factory=list)
    seen_workers: float = field(default_factory=time.monotonic)

    def on(self, worker: str) -> int:
        return sum(1 for _, sent in self.rows.values() if sent == worker)

    def least_busy(self, parallel: int) -> str | None:
        """The worker with the fewest rows running, if one has fewer than `parallel`."""
        free = [w for w in self.workers if self.on(w) < parallel]
        return min(free, key=self.on) if free else None


async def _cluster_batch(settings: Settings, plan: Plan, address: str, wplan: WorkerPlan) -> int:
    redact = settings.redactor(os.environ)
    stderr = SafeConsole(stderr=True, redact=redact)
    out: OutFile | None = None
    tally = Tally()
    cut_short = True  # until the rows ran: Ctrl-C, a signal
    try:
        async with _connected(address) as client:
            out = OutFile(plan.out, redact, plan.resume)
            with progress(stderr, settings, plan.input) as advance:
                await _run_rows(client, wplan, plan, out, tally, advance)
        cut_short = False
    finally:
        if out is not None:
            out.close()
            if cut_short:
                say_stopped(stderr, plan, tally)
    return finish(stderr, settings, plan, tally)


@contextlib.asynccontextmanager
async def _connected(address: str) -> AsyncIterator[Client]:
    """A client of the scheduler at `address` with at least one worker; Dask's own log
    lines stay out of the batch's stderr (its errors reach the rows that had them)."""
    from distributed import Client

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    try:
        client = await Client(
            address, asynchronous=True, timeout=CONNECT_TIMEOUT, set_as_default=False
        )
    except (OSError, TimeoutError) as exc:
        raise AgentError(
            f"--cluster {address}: no Dask scheduler answered ({exc}); start one "
            "(dask scheduler --host 127.0.0.1) or check the address"
        ) from None
    try:
        if not await _a_worker(client, CONNECT_TIMEOUT):
            raise AgentError(
                f"--cluster {address}: the scheduler has no workers; start some "
                f"(dask worker {address})"
            )
        yield client
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CONNECT_TIMEOUT):
            await client.close()


async def _run_rows(
    client: Client,
    wplan: WorkerPlan,
    plan: Plan,
    out: OutFile,
    tally: Tally,
    advance: Callable[[], None],
) -> None:
    """Submit rows while a worker has a free slot; write each line as it comes back (once
    per row); stop submitting at `max_errors`. The workers' sessions close at the end,
    and the rows still running are cancelled however it ends."""
    from distributed import as_completed

    from agent.cli.batch_worker import SessionPlugin, run_row

    running = Running()
    written: set[str] = set()
    rows = read_rows(plan.input)
    left = True  # rows not yet read from INPUT
    finished = as_completed([], loop=client.loop, with_results=False)

    def record(line: dict[str, Any], row: Row) -> None:
        if row.key in written:  # a row never appears twice in OUT
            return
        written.add(row.key)
        out.write(line)
        tally.count(line["status"])
        advance()

    def over() -> bool:
        return plan.max_errors is not None and tally.failed >= plan.max_errors

    async def fill() -> None:
        nonlocal left
        running.workers = await _workers(client)
        while left and not over() and (worker := running.least_busy(plan.parallel)):
            row = next(rows, None)
            if row is None:
                left = False
            elif row.key in plan.done:
                tally.skipped += 1
                advance()
            elif row.error is not None:
                record(failed_line(row, row.error), row)
            else:
                future = client.submit(
                    run_row,
                    row,
                    wplan.batch,
                    key=f"mcp-agent-row-{wplan.batch}-{row.line}",
                    workers=[worker],
                    allow_other_workers=True,  # a row whose worker died runs elsewhere
                    retries=1,
                    pure=False,
                )
                running.rows[future] = (row, worker)
                finished.add(future)

    await client.register_plugin(SessionPlugin(wplan))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_workers, client, running)
            await fill()
            while running.rows or (left and not over()):
                if not running.rows:  # no worker to send the next row to
                    await _wait_for_a_worker(client)
                async for future in finished:
                    row, _ = running.rows.pop(future)
                    record(await _line(future, row), row)
                    await fill()
                await fill()
            tg.cancel_scope.cancel()
        if over():
            tally.stopped = True
            tally.not_run = sum(1 for row in rows if row.key not in plan.done)
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CONNECT_TIMEOUT):
            if running.rows:
                await client.cancel(list(running.rows), reason="the batch was stopped")
            await client.unregister_worker_plugin(wplan.plugin)
            await client.set_metadata([wplan.plugin], None)  # the rows' attempt counts


async def _wait_for_a_worker(client: Client) -> None:
    if not await _a_worker(client, NO_WORKERS_TIMEOUT):
        raise AgentError(
            f"the cluster has had no workers for {NO_WORKERS_TIMEOUT:.0f} s; start some and "
            "rerun with --resume for the rest"
        )


async def _a_worker(client: Client, timeout: float) -> bool:
    """Whether the scheduler has a worker within `timeout` seconds."""
    with anyio.move_on_after(timeout):
        while True:
            if await _workers(client):
                return True
            await anyio.sleep(0.2)  # the scheduler tells no one when a worker joins
    return False


async def _workers(client: Client) -> list[str]:
    """The scheduler's workers now (a dead one is gone, a new one is there)."""
    assert client.scheduler is not None  # connected
    identity = await client.scheduler.identity(n_workers=-1)
    return sorted(identity.get("workers", {}))


async def _watch_workers(client: Client, running: Running) -> None:
    """A cluster left with no worker: the rows waiting for one fail after a minute
    instead of holding the batch forever."""
    while True:
        await anyio.sleep(1)
        running.workers = await _workers(client)
        if running.workers or not running.rows:
            running.seen_workers = time.monotonic()
        elif time.monotonic() - running.seen_workers > NO_WORKERS_TIMEOUT:
            await client.cancel(list(running.rows), reason="the cluster has no workers left")


async def _line(future: Future, row: Row) -> dict[str, Any]:
    """A finished row's line: the worker's, or the row's error when it never got one."""
    from distributed.scheduler import KilledWorker

    if future.status == "cancelled":
        return failed_line(row, f"not run: the cluster has no workers left ({row.key})")
    if future.status == "error":
        exc = await future.exception()
        if isinstance(exc, KilledWorker):  # the scheduler's own limit came first
            return failed_line(row, "its worker died while running it, on every worker tried")
        return failed_line(row, f"{type(exc).__name__}: {exc}")
    line = await future.result()
    return line if isinstance(line, dict) else failed_line(row, "the worker sent no line")
