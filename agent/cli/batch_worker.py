"""The worker side of `run_mcp.py batch --cluster` (the driver's is agent/cli/batch_cluster.py):
what a Dask worker process imports to run a batch's rows.

Each worker process holds one session per batch (`RowHost`, set up by the `SessionPlugin`
the driver registers and torn down when it unregisters it): its servers start once there
and its rows run as a local batch's do (`answer_row`), `parallel` at a time. The session
lives in an event loop of its own, in a thread: Dask runs tasks in threads and its own
loop must never wait on ours. A row's task (`run_row`) secedes from the worker's thread
pool (it waits on the model and tools, not the CPU), so the host's `parallel` bounds the
rows at once, not the worker's thread count.

The settings arrive without secrets (`WorkerPlan`): each secret's place holds a template
naming the variables that give it (`Bearer ${GITHUB_TOKEN}`), expanded here from the
worker's own environment; a variable missing there fails every row with one line naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from distributed import get_client, get_worker, secede
from distributed.diagnostics.plugin import WorkerPlugin
from distributed.worker import Worker

from agent.cli.batch_rows import Row, answer_row, drop_unused, failed_line
from agent.common.errors import AgentError
from agent.common.redact import Redactor
from agent.config.build import BUNDLED_MAIN, bundled_server
from agent.config.files import user_config_dir
from agent.config.sandbox import placeholders_of
from agent.config.sandbox import resolve as resolve_sandbox
from agent.config.servers import default_state_dir
from agent.config.settings import SandboxSettings, ServerConfig, Settings
from agent.session.startup import Session, open_script_session, prepare_session
from agent.ui.safe import SafeConsole

# A variable's name in a secret's template: `${NAME}`.
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# How many times a row may start (its worker died once: it runs once more elsewhere).
MAX_ATTEMPTS = 2
CLOSE_TIMEOUT = 30.0  # seconds for a worker's session to close its servers


@dataclass(frozen=True)
class Secret:
    """A secret's place in the settings' data, and the template that gives it."""

    path: tuple[str | int, ...]
    template: str  # the value with `${VAR}` where each variable's value was


@dataclass(frozen=True)
class WorkerPlan:
    """What the driver sends every worker: no secret in it (it travels in the task graph,
    through the scheduler, and stays there while the batch runs)."""

    batch: str  # the batch's own id: its plugin's name and its rows' attempt counts
    settings: dict[str, Any]  # the driver's settings as JSON, each secret's place empty
    secrets: tuple[Secret, ...]
    bundled: tuple[int, ...]  # the bundled server's index in settings["servers"], rebuilt here
    workspace: str | None  # --workspace: every row's folder on every worker
    trusted: bool  # --trust-workspace with --workspace: the folder's own files are read
    parallel: int

    @property
    def plugin(self) -> str:
        return plugin_name(self.batch)


def plugin_name(batch: str) -> str:
    return f"mcp-agent-batch-{batch}"


class MissingSecret(AgentError):
    """A variable a secret's template names is not set on this worker."""


def expand(template: str, environ: Mapping[str, str], where: str) -> str:
    """`template` with each `${VAR}` replaced by the worker's own value of VAR."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if not environ.get(name):
            raise MissingSecret(
                f"worker {where}: environment variable {name} is not set there (the cluster "
                f"sends no secrets: set {name} in each worker's environment)"
            )
        return environ[name]

    return VARIABLE.sub(value, template)


def worker_settings(
    plan: WorkerPlan, environ: Mapping[str, str], root: Path, where: str
) -> Settings:
    """The driver's settings as this worker runs them: its secrets from this worker's
    environment, its own state folder, `root` for the workspace, and the bundled server
    and the sandboxes resolved for this machine's paths."""
    data = copy.deepcopy(plan.settings)
    for secret in plan.secrets:
        _put(data, secret.path, expand(secret.template, environ, where))
    state_dir = default_state_dir(environ)
    servers = [
        bundled_server(root) if index in plan.bundled else ServerConfig.model_validate(server)
        for index, server in enumerate(data.pop("servers"))
    ]
    user = user_config_dir(environ)
    sandbox = SandboxSettings.model_validate(data["sandbox"])
    servers, problem = resolve_sandbox(
        servers,
        sandbox,
        root=root,
        environ=environ,
        hide=[str(state_dir), *([str(user)] if user else [])],
        bundled_main=str(BUNDLED_MAIN),
    )
    data |= {
        "state_dir": str(state_dir),
        "workspace": str(root),
        "workspace_trusted": plan.trusted,
        "untrusted_files": [],
        "config_files": [],
        "sandbox_problem": problem,
        "sandbox_placeholders": list(placeholders_of(servers)),
    }
    return Settings.model_validate({**data, "servers": servers})


def _put(data: Any, path: tuple[str | int, ...], value: str) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = value


def one_line(exc: BaseException) -> str:
    """What went wrong, as a row's error: an error group's first error, an AgentError's
    message, else the exception's type and text."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, AgentError):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class RowHost:
    """One batch's session in this worker process, in a thread of its own; opened once,
    before the first row needs it, and closed when the batch ends (or the worker does)."""

    def __init__(self, plan: WorkerPlan, scratch_parent: str, where: str) -> None:
        self.plan = plan
        self.where = where
        self.scratch_parent = scratch_parent
        self.scratch: str | None = None
        self.failure: str | None = None  # why this worker cannot run rows: each row says it
        self.session: Session | None = None
        self.redact = Redactor.of(())
        self.stderr = SafeConsole(stderr=True, redact=self.redact)
        self.stack = contextlib.ExitStack()
        self.portal: BlockingPortal | None = None
        self.serving: Future[None] | None = None

    def start(self) -> None:
        self.portal = self.stack.enter_context(start_blocking_portal())
        self.ready = self._in_loop(anyio.Event)
        self.stop = self._in_loop(anyio.Event)
        self.slots = self._in_loop(anyio.Semaphore, self.plan.parallel)
        self.serving = self.portal.start_task_soon(self._serve)

    def run(self, row: Row) -> dict[str, Any]:
        """One row's line, masked with this worker's secrets (it travels back through the
        scheduler)."""
        line: dict[str, Any] = self._in_loop(self._row, row)
        return line

    def _in_loop(self, func: Callable[..., Any], *args: Any) -> Any:
        """`func(*args)` run in the session's loop (awaited when it is a coroutine
        function), from a task's thread; its result."""
        assert self.portal is not None
        return self.portal.start_task_soon(func, *args).result()

    async def _row(self, row: Row) -> dict[str, Any]:
        await self.ready.wait()
        if self.session is None:
            return failed_line(row, self.failure or "the worker's session is closed")
        async with self.slots:
            try:
                line = await answer_row(self.session, row, self.stderr)
            except Exception as exc:  # a row that raised is recorded; the others go on
                line = failed_line(row, one_line(exc))
        return self.redact.deep(line)

    def _root(self) -> Path:
        """Every row's folder here: --workspace (shared by the workers), else a scratch
        folder of this worker's own for the batch, removed when it ends."""
        if self.plan.workspace is not None:
            root = Path(self.plan.workspace)
            if not root.is_dir():
                raise AgentError(f"worker {self.where}: --workspace {root} is not a folder there")
            return root.resolve()
        self.scratch = tempfile.mkdtemp(prefix="mcp-agent-batch-", dir=self.scratch_parent)
        return Path(self.scratch).resolve()

    async def _serve(self) -> None:
        """Open the session, hold it until the batch ends, close it in this same task."""
        transcript: Path | None = None
        try:
            settings = worker_settings(self.plan, os.environ, self._root(), self.where)
            self.redact = settings.redactor(os.environ)
            self.stderr = SafeConsole(stderr=True, redact=self.redact)
            prepared = prepare_session(settings, self.stderr, None, self.stderr)
            transcript = prepared.saved.transcript.path
            async with open_script_session(prepared, self.stderr) as session:
                self.session = session
                self.ready.set()
                await self.stop.wait()
                self.session = None
                session.registry.hasten_shutdown()
        except Exception as exc:  # every row says it, one line each
            self.failure = self.redact(one_line(exc))
        finally:
            self.session = None
            self.ready.set()
            if transcript is not None:
                drop_unused(transcript)

    def close(self) -> None:
        """Close the session (its servers stopped), then the loop's thread and the scratch
        folder; bounded, and quiet: the worker is going on, or going away."""
        if self.portal is not None and self.serving is not None:
            with contextlib.suppress(Exception):
                self._in_loop(self.stop.set)
                self.serving.result(timeout=CLOSE_TIMEOUT)
            with contextlib.suppress(Exception):
                self._in_loop(self.portal.stop, True)  # rows still running are cancelled
        with contextlib.suppress(Exception):
            self.stack.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


class SessionPlugin(WorkerPlugin):
    """Sets up a batch's RowHost in each worker (those that join later too) and tears it
    down when the driver unregisters the plugin or the worker closes."""

    def __init__(self, plan: WorkerPlan) -> None:
        self.plan = plan
        self.name = plan.plugin
        self.host: RowHost | None = None

    def setup(self, worker: Worker) -> None:
        self.host = RowHost(self.plan, worker.local_directory, worker.address)
        self.host.start()  # the servers start now, before the first row arrives

    async def teardown(self, worker: Worker) -> None:
        if self.host is not None:
            await asyncio.to_thread(self.host.close)


def run_row(row: Row, batch: str) -> dict[str, Any]:
    """A row's task: its line from this worker's session. A row whose worker died while
    running it starts once more elsewhere; a third start writes it as an error."""
    worker = get_worker()
    secede()
    if _attempt(batch, row) >= MAX_ATTEMPTS:
        reason = f"its worker died while running it, {MAX_ATTEMPTS} times (each on its own worker)"
        return failed_line(row, reason)
    plugin = worker.plugins.get(plugin_name(batch))
    if not isinstance(plugin, SessionPlugin) or plugin.host is None:
        return failed_line(row, f"worker {worker.address}: the batch's session is not set up there")
    return plugin.host.run(row)


def _attempt(batch: str, row: Row) -> int:
    """How many times this row started before (kept by the scheduler, beside the batch)."""
    client = get_client()
    key = [plugin_name(batch), row.key]
    started = int(client.get_metadata(key, 0))
    client.set_metadata(key, started + 1)
    return started
