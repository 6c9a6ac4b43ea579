"""User hooks around the loop, in Claude Code's shape: a command gets the event as JSON on
stdin and answers with its exit code and output.

Exit 0: go on; stdout may be a JSON answer (`hookSpecificOutput.permissionDecision`
allow / deny / ask with `permissionDecisionReason`, `updatedInput`, `additionalContext`,
`decision: "block"` with `reason`, `systemMessage`), and for SessionStart and
UserPromptSubmit plain stdout is context for the model. Exit 2: block; stderr is the reason
the model (or, for a prompt, the user) is given. Any other exit, a timeout or a command that
cannot start: a warning to the user, and the run goes on. The hooks of one event run in
parallel; each is stopped (its whole process group) at its timeout.

Hooks from the user-level hooks.json see the user's environment, as Claude Code's hooks
do (a hook that reads its own variables keeps working); a project's hooks see a scrubbed
one (the one stdio servers get: no secret of the agent's). Both get
`MCP_AGENT_PROJECT_DIR` and `CLAUDE_PROJECT_DIR` (the workspace), and run in the workspace.
A tool's hooks match its public name, its own name, and Claude Code's
`mcp__server__tool`. The loop gets `HookOutcome`s and turns warnings into Notice events:
nothing here prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, Process

from agent.common import json_limits
from agent.config.server_env import server_env
from agent.extensions.hook_files import Hook, HookSet
from agent.tools.results import Observation, strip_marker

BLOCK_EXIT = 2
MAX_READ = 1_000_000  # bytes kept of a hook's stdout / stderr
MAX_CONTEXT = 10_000  # characters of one hook's context or reason given to the model
KILL_WAIT = 5.0  # seconds to reap a killed hook


@dataclass(frozen=True)
class HookOutcome:
    """What the hooks of one event decided, combined: a block wins over everything."""

    block: str | None = None  # exit 2, deny, decision "block": the reason
    ask: str | None = None  # PreToolUse "ask": the user must approve, whatever the settings
    arguments: dict[str, Any] | None = None  # PreToolUse updatedInput: the call's new input
    context: tuple[str, ...] = ()  # for the model
    warnings: tuple[str, ...] = ()  # for the user


NO_OUTCOME = HookOutcome()


@dataclass(frozen=True)
class ToolUse:
    """A call as its hooks see it: the public name, the server and its own tool name."""

    call_id: str
    name: str
    server: str
    tool: str
    arguments: dict[str, Any]


def with_context(request: str, context: tuple[str, ...]) -> str:
    """The user's request with what their UserPromptSubmit hooks added."""
    if not context:
        return request
    return request + "\n\n[context from the user's hooks]\n" + "\n".join(context)


@dataclass(frozen=True)
class _Ran:
    hook: Hook
    code: int | None  # None: it did not finish (timeout, could not start)
    stdout: str = ""
    stderr: str = ""
    problem: str = ""


@dataclass
class Hooks:
    """The session's hooks. `common` gives the fields every event carries (session id,
    transcript path, permission mode, model); it is read at each event, so a changed
    approval mode or model is what the hook sees."""

    hookset: HookSet
    environ: Mapping[str, str]
    workspace: Path
    common: Callable[[], dict[str, Any]] = field(default=dict)
    # Where the commands run: the workspace, or (an untrusted one) a folder of the user's,
    # so a hook's `npx tool` never runs the folder's own bin (agent/session/hooks.py).
    cwd: Path | None = None
    workspace_trusted: bool = True

    def has(self, event: str) -> bool:
        return self.hookset.has(event)

    async def session_start(self, source: str) -> HookOutcome:
        return await self.fire("SessionStart", {"source": source}, (source,))

    async def prompt(self, text: str) -> HookOutcome:
        return await self.fire("UserPromptSubmit", {"prompt": text})

    async def pre_tool(
        self, call_id: str, name: str, server: str, tool: str, arguments: dict[str, Any]
    ) -> HookOutcome:
        payload = _tool_payload(call_id, name, server, tool, arguments)
        return await self.fire("PreToolUse", payload, _tool_names(name, server, tool))

    async def post_tool(
        self,
        call_id: str,
        name: str,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        response: dict[str, Any],
    ) -> HookOutcome:
        payload = _tool_payload(call_id, name, server, tool, arguments)
        payload["tool_response"] = response
        return await self.fire("PostToolUse", payload, _tool_names(name, server, tool))

    async def before_calls(self, uses: list[ToolUse]) -> dict[str, HookOutcome]:
        """PreToolUse hooks of several calls, all at once, by call id."""
        outcomes: dict[str, HookOutcome] = {}

        async def check(use: ToolUse) -> None:
            outcomes[use.call_id] = await self.pre_tool(
                use.call_id, use.name, use.server, use.tool, use.arguments
            )

        async with anyio.create_task_group() as tg:
            for use in uses:
                tg.start_soon(check, use)
        return outcomes

    async def after_call(
        self, use: ToolUse, pre: HookOutcome, observation: Observation
    ) -> tuple[Observation, tuple[str, ...]]:
        """PostToolUse hooks of a call that ran. Their context and feedback (exit 2, decision
        block) and the PreToolUse context follow the result for the model, outside its
        untrusted envelope: they are the user's words, not the server's."""
        notes = list(pre.context)
        warnings: tuple[str, ...] = ()
        if self.has("PostToolUse"):
            response: dict[str, Any] = {
                "content": strip_marker(observation.text),
                "is_error": observation.is_error,
            }
            if observation.structured is not None:
                response["structured_content"] = observation.structured
            post = await self.post_tool(
                use.call_id, use.name, use.server, use.tool, use.arguments, response
            )
            notes += [*post.context, *([post.block] if post.block else [])]
            warnings = post.warnings
        if not notes:
            return observation, warnings
        said = "\n".join(notes)
        text = f"{observation.text}\n\n[from the user's hooks]\n{said}"
        return replace(observation, text=text), warnings

    async def stop(self, last_message: str, active: bool) -> HookOutcome:
        payload = {"stop_hook_active": active, "last_assistant_message": last_message}
        return await self.fire("Stop", payload)

    async def pre_compact(self, trigger: str, instructions: str = "") -> HookOutcome:
        payload = {"trigger": trigger, "custom_instructions": instructions}
        return await self.fire("PreCompact", payload, (trigger,))

    async def notification(self, message: str, kind: str) -> HookOutcome:
        payload = {"message": message, "notification_type": kind}
        return await self.fire("Notification", payload, (kind,))

    async def fire(
        self, event: str, fields: dict[str, Any], names: tuple[str, ...] = ()
    ) -> HookOutcome:
        """Run every hook of `event` that matches `names`, in parallel, and combine."""
        matching = self.hookset.matching(event, names)
        if not matching:
            return NO_OUTCOME
        payload = {
            **self.common(),
            "cwd": str(self.workspace),
            "workspace_trusted": self.workspace_trusted,
            "hook_event_name": event,
            **fields,
        }
        data = json.dumps(payload, ensure_ascii=False, default=str).encode()
        ran: list[_Ran | None] = [None] * len(matching)

        async def run(index: int, hook: Hook) -> None:
            ran[index] = await _run(hook, data, self._env(hook), self.cwd or self.workspace)

        async with anyio.create_task_group() as tg:
            for index, hook in enumerate(matching):
                tg.start_soon(run, index, hook)
        return combine(event, [r for r in ran if r is not None])

    def _env(self, hook: Hook) -> dict[str, str]:
        """The user's own hooks: the user's environment (Claude Code's rule); a project's:
        the scrubbed one, so a repository's hooks never read the agent's keys."""
        project = str(self.workspace)
        trusted = "1" if self.workspace_trusted else "0"
        own = {"MCP_AGENT_PROJECT_DIR": project, "CLAUDE_PROJECT_DIR": project}
        own["MCP_AGENT_WORKSPACE_TRUSTED"] = trusted
        if hook.user:
            return {**self.environ, **own}
        return server_env(own, self.environ)


def _tool_names(name: str, server: str, tool: str) -> tuple[str, ...]:
    """What a tool's matchers are matched against: our public name (`local__bash`), the
    server's own name (`bash`), and Claude Code's (`mcp__local__bash`), so a matcher copied
    from Claude Code's settings matches. The agent's own tools have no Claude Code name."""
    return (name, tool) if server == "agent" else (name, tool, f"mcp__{server}__{tool}")


def _tool_payload(
    call_id: str, name: str, server: str, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    return {
        "tool_name": name,
        "tool_input": arguments,
        "tool_use_id": call_id,
        "mcp_server": server,
        "mcp_tool": tool,
    }


# --------------------------------------------------------------------------- running


def _shell() -> list[str]:
    bash = shutil.which("bash")
    return [bash, "-c"] if bash else ["/bin/sh", "-c"]


async def _run(hook: Hook, data: bytes, env: dict[str, str], cwd: Path) -> _Ran:
    """One hook: its own process group, the event on stdin, killed at its timeout."""
    try:
        process = await anyio.open_process(
            [*_shell(), hook.command],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return _Ran(hook, None, problem=f"could not start ({exc.strerror or exc})")
    out, err = bytearray(), bytearray()
    try:
        with anyio.move_on_after(hook.timeout) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_feed, process, data)
                assert process.stdout is not None and process.stderr is not None
                tg.start_soon(_drain, process.stdout, out)
                tg.start_soon(_drain, process.stderr, err)
                await process.wait()
    finally:
        if process.returncode is None:  # timed out, or the run was cancelled
            _kill_group(process)
            with anyio.CancelScope(shield=True), anyio.move_on_after(KILL_WAIT):
                await process.wait()
        with anyio.CancelScope(shield=True):
            await process.aclose()
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    if scope.cancelled_caught:
        return _Ran(hook, None, stdout, stderr, f"timed out after {hook.timeout:g} s (stopped)")
    return _Ran(hook, process.returncode, stdout, stderr)


async def _feed(process: Process, data: bytes) -> None:
    """The event on stdin; a hook that never reads it (or exits first) is fine."""
    assert process.stdin is not None
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await process.stdin.send(data)
    with contextlib.suppress(OSError, anyio.BrokenResourceError):
        await process.stdin.aclose()


async def _drain(stream: ByteReceiveStream, into: bytearray) -> None:
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
        while True:
            chunk = await stream.receive(65536)
            if len(into) < MAX_READ:
                into += chunk[: MAX_READ - len(into)]


def _kill_group(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


# --------------------------------------------------------------------------- answers


def combine(event: str, results: list[_Ran]) -> HookOutcome:
    """The hooks' answers as one outcome: any block wins, then ask; the first hook (in
    config order) that changes the input decides it; every context and warning is kept."""
    blocks: list[str] = []
    asks: list[str] = []
    arguments: dict[str, Any] | None = None
    context: list[str] = []
    warnings: list[str] = []
    for result in results:
        answer = _answer(event, result)
        blocks += answer.block or []
        asks += answer.ask or []
        if answer.arguments is not None:
            if arguments is not None and answer.arguments != arguments:
                warnings.append(
                    f"{_who(result.hook)}: its updatedInput was not used (an earlier "
                    "hook changed the input)"
                )
            else:
                arguments = answer.arguments
        context += answer.context
        warnings += answer.warnings
    return HookOutcome(
        block="\n".join(blocks) if blocks else None,
        ask="\n".join(asks) if asks else None,
        arguments=arguments,
        context=tuple(context),
        warnings=tuple(warnings),
    )


@dataclass
class _Answer:
    block: list[str] | None = None
    ask: list[str] | None = None
    arguments: dict[str, Any] | None = None
    context: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _who(hook: Hook) -> str:
    command = hook.command if len(hook.command) <= 60 else hook.command[:57] + "…"
    return f"{hook.event} hook `{command}`"


def _cut(text: str) -> str:
    text = text.strip()
    if len(text) <= MAX_CONTEXT:
        return text
    return f"{text[:MAX_CONTEXT]}\n[… {len(text) - MAX_CONTEXT} more characters cut]"


def _answer(event: str, result: _Ran) -> _Answer:
    """One hook's exit code and output, read by Claude Code's rules."""
    who = _who(result.hook)
    if result.code is None:
        return _Answer(warnings=[f"{who} {result.problem}; the run goes on"])
    if result.code == BLOCK_EXIT:
        reason = _cut(result.stderr) or f"blocked by {who} (exit 2, no reason given)"
        return _Answer(block=[reason])
    if result.code != 0:
        detail = _first_line(result.stderr) or _first_line(result.stdout)
        said = f": {detail}" if detail else ""
        return _Answer(warnings=[f"{who} exited {result.code}{said}; the run goes on"])
    return _read_stdout(event, result.stdout, who)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:199] + "…"


def _read_stdout(event: str, stdout: str, who: str) -> _Answer:
    text = stdout.strip()
    reply: Any = None
    if text.startswith("{"):
        try:
            reply = json_limits.loads(text)
        except json.JSONDecodeError:
            reply = None
    if not isinstance(reply, dict):
        plain_is_context = event in ("SessionStart", "UserPromptSubmit")
        return _Answer(context=[_cut(text)] if text and plain_is_context else [])
    answer = _Answer()
    if isinstance(reply.get("systemMessage"), str) and reply["systemMessage"].strip():
        answer.warnings.append(f"{who}: {_first_line(reply['systemMessage'])}")
    specific = reply.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    if isinstance(extra := specific.get("additionalContext"), str) and extra.strip():
        answer.context.append(_cut(extra))
    reason = str(reply.get("reason") or "").strip()
    if reply.get("decision") == "block":
        answer.block = [_cut(reason) or f"blocked by {who}"]
    if event == "PreToolUse":
        _read_decision(specific, reply, answer, who)
    return answer


def _read_decision(
    specific: dict[str, Any], reply: dict[str, Any], answer: _Answer, who: str
) -> None:
    """PreToolUse: permissionDecision (or the older decision approve / block) and
    updatedInput."""
    decision = specific.get("permissionDecision")
    reason = str(specific.get("permissionDecisionReason") or reply.get("reason") or "").strip()
    if decision == "deny":
        answer.block = [*(answer.block or []), _cut(reason) or f"denied by {who}"]
    elif decision == "ask":
        answer.ask = [_cut(reason) or f"{who} asks for your approval"]
    elif decision not in (None, "allow", "defer"):
        answer.warnings.append(f"{who}: unknown permissionDecision {decision!r} (ignored)")
    updated = specific.get("updatedInput")
    if updated is not None:
        if isinstance(updated, dict):
            answer.arguments = updated
        else:
            answer.warnings.append(f"{who}: updatedInput must be an object (ignored)")
