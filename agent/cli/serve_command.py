"""`run_mcp.py serve`: the agent as an MCP server, for other agents and programs to call.

One tool, `ask {prompt, session_id?}`: the agent runs the prompt with the user's configured
servers and model and returns its answer, with `structuredContent` {answer, status,
session_id, tool_calls, usage} (`--output json`'s fields, masked by the session's
redactor). The 2026-07-28 protocol has no sessions of its own, so a conversation is named
by `session_id`: a call that passes one continues it; conversations live in memory for the
server's life, at most MAX_CONVERSATIONS (the least recently used one is closed; the
bookkeeping is agent.cli.serve_conversations). A `session_id` is its transcript's ID
(what `--resume` takes) and a secret of 192 random bits, and a conversation belongs to the
caller that started it where the transport tells callers apart (an HTTP session): another
caller presenting it is told it is unknown.

One session is opened as for every front end (agent.session.startup); each conversation
is a `Session.conversation` run by the one loop. A call that needs approval is asked of
the calling client by elicitation, through the approval policy's own callback (the gate
decides); a client that declines, cancels or cannot be asked gets the call refused, never
run. Progress goes to the caller when its request carried a progress token; a caller
that declared the tasks extension gets `ask` as a task (agent.cli.serve_tasks) whose
status message is that progress and whose input requests are those questions. stdio by
default; `--http PORT` serves streamable HTTP on 127.0.0.1 unless `--host` says otherwise.
Documented in docs/programs.md.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlparse

import anyio
import typer
from mcp.server.context import ServerRequestContext
from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    CallToolResult,
    ClientCapabilities,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, Field, ValidationError

from agent import __version__
from agent.cli.serve_conversations import Conversations, Done, Question, Turn
from agent.cli.serve_http import Listener, is_loopback, listen, serve_http
from agent.cli.serve_tasks import ServeTasks, Task, caller_of
from agent.cli.subcommands import run_session, session_command_app
from agent.cli.trust_command import settle
from agent.common.errors import AgentError, ConfigError
from agent.common.redact import Redactor
from agent.config.settings import Settings
from agent.loop.approval import ApprovalRequest, Decision
from agent.loop.events import Event, StepStarted, ToolCallFinished, ToolCallStarted
from agent.session.startup import (
    LOCAL_HOSTS,
    Unavailable,
    open_script_session,
    prepare_session,
    with_local_server,
)
from agent.ui.safe import SafeConsole

MAX_SHOWN_ARGUMENTS = 2000  # characters of a call's arguments an approval question shows
# Why a tool server's own form (elicitation) is declined under serve.
SERVE_CANNOT_ANSWER = "serve does not pass a tool server's forms on to its caller"


def _serve_options(
    http: Annotated[
        int | None,
        typer.Option(
            "--http",
            metavar="PORT",
            min=0,
            max=65535,
            help="Serve streamable HTTP on PORT (at /mcp) instead of stdio.",
        ),
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="HOST",
            help="The address --http listens on; anything but loopback lets other machines in.",
        ),
    ] = "127.0.0.1",
) -> None:
    """The serve command's own options (their signature is merged with `run`'s)."""


def serve_app(run: Callable[..., None], resolve: Callable[..., Settings]) -> typer.Typer:
    """The `serve` command: its own options, then `run`'s shared ones (agent.cli.subcommands)."""
    return session_command_app(
        run,
        _serve_options,
        lambda opts, http, host: run_serve(opts, resolve, http=http, host=host),
        "Serve the agent as an MCP server (stdio, or --http PORT): its tool `ask` runs a "
        "prompt and returns the answer; a session_id continues a conversation.",
    )


def run_serve(
    opts: dict[str, Any], resolve: Callable[..., Settings], *, http: int | None, host: str
) -> int:
    if http is None and host != "127.0.0.1":
        raise ConfigError("--host is the address of --http: pass --http PORT too")
    environ = dict(os.environ)
    settings = resolve(opts, environ)
    settings = settle(
        settings,
        environ,
        ask=False,
        trusted=lambda: resolve({**opts, "trust_workspace": True}, environ),
    )
    return run_session(settings, _serve, settings, http, host)


class Approval(BaseModel):
    """The approval question's form: accept runs the call; decline or cancel refuses it."""

    always: bool = Field(
        default=False,
        description="Also allow this tool, on this server, for the rest of the conversation",
    )


def approval_question(request: ApprovalRequest, redact: Redactor) -> str:
    arguments = json.dumps(request.arguments, ensure_ascii=False)
    if len(arguments) > MAX_SHOWN_ARGUMENTS:
        arguments = arguments[:MAX_SHOWN_ARGUMENTS] + f"… ({len(arguments):,} characters)"
    why = f"\nWhy you are asked: {request.reason}" if request.reason else ""
    return redact(
        f"The agent wants to run '{request.tool}' on server '{request.server}' with "
        f"{arguments}. Allow it?{why}"
    )


def decision(answer: ElicitResult | None) -> Decision:
    """Only an accepted form, filled in as asked, approves (as `ctx.elicit` holds an older
    protocol's answer to): decline, cancel, an accept without the form or with another
    shape of it, or anything else is a no. A program that says "accept" to whatever it is
    asked must at least have read the question's form."""
    if answer is None or answer.action != "accept" or answer.content is None:
        return "no"
    try:
        form = Approval.model_validate(answer.content)
    except ValidationError:
        return "no"
    return "always" if form.always else "yes"


def can_elicit(caps: ClientCapabilities | None) -> bool:
    """Whether the caller declared form elicitation (a bare `elicitation: {}` counts)."""
    found = caps.elicitation if caps is not None else None
    return found is not None and (found.form is not None or found.url is None)


def input_required(ctx: Context) -> bool:
    """2026-07-28 and later: a question rides an InputRequiredResult and the caller retries
    with its answer; older protocols send `elicitation/create` in the middle of the call."""
    version = ctx.protocol_version
    return version is not None and version >= "2026-07-28"


def _progress_message(event: Event) -> str | None:
    match event:
        case StepStarted():
            return f"step {event.step} of at most {event.max_steps}"
        case ToolCallStarted():
            return f"calling {event.name}"
        case ToolCallFinished():
            return f"{event.name} {'failed' if event.is_error else 'done'}"
    return None


async def follow(
    conversations: Conversations, turn: Turn, ctx: Context
) -> CallToolResult | InputRequiredResult:
    """This request's part of a turn: progress as it runs, then its result, or (2026-07-28)
    the next approval question for the caller to answer and retry with."""
    redact = conversations.session.registry.redact
    sent = 0
    try:
        async for item in turn.out:
            match item:
                case Done():
                    return item.result
                case Question() if input_required(ctx):
                    turn.asking = item
                    conversations.waiting[turn.token] = turn
                    schema = render_elicitation_schema(Approval)
                    message = approval_question(item.request, redact)
                    params = ElicitRequestFormParams(message=message, requested_schema=schema)
                    return InputRequiredResult(
                        input_requests={item.key: ElicitRequest(params=params)},
                        request_state=turn.token,
                    )
                case Question():
                    item.answer(await _elicit(ctx, item, redact))
                case _:
                    if (said := _progress_message(item)) is not None:
                        sent += 1
                        await ctx.report_progress(sent, None, redact(said))
    except anyio.get_cancelled_exc_class():
        if conversations.waiting.get(turn.token) is not turn:
            turn.scope.cancel()  # the caller cancelled: the turn ends with it
        raise
    return CallToolResult(content=[TextContent(text="the turn ended without a result")])


async def _elicit(ctx: Context, question: Question, redact: Redactor) -> Decision:
    """Before 2026-07-28: `elicitation/create` to the caller, mid-call; a failure is a no."""
    try:
        answer = await ctx.elicit(approval_question(question.request, redact), Approval)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception:
        return "no"
    if answer.action != "accept":
        return "no"
    return "always" if answer.data.always else "yes"


async def ask_agent(
    conversations: Conversations, ctx: Context, prompt: str, session_id: str | None
) -> CallToolResult | InputRequiredResult:
    """A new turn, or (a retry carrying request_state) the caller's answer to its question."""
    caller = caller_of(ctx.request_context)
    if (state := ctx.request_state) is not None:
        turn = conversations.waiting.get(state)
        if turn is None or turn.asking is None or turn.conversation.caller != caller:
            raise ConfigError("that approval was answered already or expired: call ask again")
        del conversations.waiting[state]
        answer = (ctx.input_responses or {}).get(turn.asking.key)
        turn.asking.answer(decision(answer if isinstance(answer, ElicitResult) else None))
        turn.asking = None
        return await follow(conversations, turn, ctx)
    conversation = await conversations.get(session_id, caller)
    turn = Turn(conversation, can_elicit(ctx.client_capabilities))
    conversations.start(turn, prompt)
    return await follow(conversations, turn, ctx)


async def start_task(
    conversations: Conversations,
    ctx: ServerRequestContext[Any, Any],
    arguments: dict[str, Any],
    task: Task,
) -> CallToolResult | None:
    """`ask` as a task (agent.cli.serve_tasks): the turn starts and reports to `task`; an
    unknown session_id is the plain call's error result, and nothing starts."""
    try:
        conversation = await conversations.get(arguments["session_id"], caller_of(ctx))
    except AgentError as exc:
        return refusal(conversations, exc)
    turn = Turn(conversation, can_elicit(ctx.session.client_capabilities))
    conversations.start(turn, arguments["prompt"])
    task.stop = turn.stop
    conversations.tg.start_soon(drive_task, conversations.session.registry.redact, turn, task)
    return None


async def drive_task(redact: Redactor, turn: Turn, task: Task) -> None:
    """The turn's events as the task's state: the step and the tool running as its status
    message, each approval question as an input request, and the plain call's result."""
    step = "starting"
    async for item in turn.out:
        match item:
            case Done():
                task.complete(item.result.model_dump(by_alias=True, mode="json", exclude_none=True))
                return
            case Question():
                message = approval_question(item.request, redact)
                params = ElicitRequestFormParams(
                    message=message, requested_schema=render_elicitation_schema(Approval)
                )
                request = ElicitRequest(params=params)
                task.ask(
                    item.key,
                    request.model_dump(by_alias=True, mode="json", exclude_none=True),
                    functools.partial(_answer_question, item),
                    redact(f"{step}: waiting for approval of {item.request.tool}"),
                )
            case StepStarted():
                step = redact(_progress_message(item) or "")
                task.working(step)
            case _:
                if (said := _progress_message(item)) is not None:
                    task.working(f"{step}: {redact(said)}")
    task.fail("the turn ended without a result")


def _answer_question(question: Question, raw: Any) -> None:
    """The caller's response to an approval question; anything but an accepted form is no."""
    try:
        answer: ElicitResult | None = ElicitResult.model_validate(raw, by_name=False)
    except ValidationError:
        answer = None
    question.answer(decision(answer))


def refusal(conversations: Conversations, exc: AgentError) -> CallToolResult:
    text = conversations.session.registry.redact(exc.message)
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


def build_serve_server(conversations: Conversations) -> MCPServer:
    server = MCPServer(
        "mcp-agent",
        title="MCP agent",
        version=__version__,
        log_level="WARNING",  # stderr is the user's: no line per model request
        instructions=(
            "ask runs an agent with its own tools on a prompt and returns its answer. Pass "
            "the session_id of an earlier answer to continue that conversation."
        ),
        extensions=[ServeTasks("ask", functools.partial(start_task, conversations))],
    )

    @server.tool(
        title="Ask the agent",
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False
        ),
    )
    async def ask(
        prompt: Annotated[str, Field(description="What to ask or have done", min_length=1)],
        ctx: Context,
        session_id: Annotated[
            str | None,
            Field(description="Continue this conversation (a session_id an answer gave)"),
        ] = None,
    ) -> CallToolResult | InputRequiredResult:
        """Run the agent on a prompt, with its configured tools, and return its answer
        (structuredContent: answer, status, session_id, tool_calls, usage)."""
        try:
            return await ask_agent(conversations, ctx, prompt, session_id)
        except AgentError as exc:
            return refusal(conversations, exc)

    return server


async def _serve(settings: Settings, http: int | None, host: str) -> int:
    redact = settings.redactor(os.environ)
    stderr = SafeConsole(stderr=True, redact=redact)
    if http is not None and not is_loopback(host):
        stderr.print(
            f"warning: serving on {host}:{http}: other machines can reach it and run the "
            "agent with your tools and key; bind 127.0.0.1 unless you mean that",
            markup=False,
            highlight=False,
            style="yellow",
        )
    # The port first: a busy one ends serve before any server starts or the model is sought.
    listener = listen(host, http) if http is not None else None
    try:
        return await _serve_on(settings, stderr, host, listener)
    finally:
        if listener is not None:
            listener.close()


async def _serve_on(
    settings: Settings, stderr: SafeConsole, host: str, listener: Listener | None
) -> int:
    """serve's session, on stdio or (with `listener`) over streamable HTTP."""
    settings = with_local_server(settings, stderr)
    if (missing := missing_model(settings)) is not None:
        raise ConfigError(missing)
    prepared = prepare_session(settings, stderr, None, stderr)
    unavailable: str | None = None
    try:
        async with open_script_session(
            prepared, stderr, cannot_answer=SERVE_CANNOT_ANSWER
        ) as session:
            async with anyio.create_task_group() as tg:
                conversations = Conversations(session, stderr, tg)
                try:
                    server = build_serve_server(conversations)
                    if listener is None:
                        await server.run_stdio_async()
                    else:
                        await serve_http(server, host, listener, stderr)
                finally:
                    tg.cancel_scope.cancel()  # turns still running end with the server
                    with anyio.CancelScope(shield=True):
                        await conversations.aclose()
            session.registry.hasten_shutdown()
    except* Unavailable as refused:
        unavailable = str(refused.exceptions[0])
    finally:
        _drop_unused(prepared.saved.transcript.path)
    if unavailable is not None:
        stderr.print(f"error: {unavailable}", markup=False, highlight=False)
        return 1
    return 0


def _drop_unused(path: Path) -> None:
    """The server's own session ran nothing (each conversation has its own): its transcript,
    holding only its opening record, is removed so `--resume` never offers it."""
    with contextlib.suppress(OSError):
        if len(path.read_bytes().splitlines()) <= 1:
            path.unlink()


def missing_model(settings: Settings) -> str | None:
    """Why serve has no model (the start-up's own test: agent.session.startup.make_model),
    said as what a client's entry must pass: a client that starts serve as a stdio server
    gives it only the variables the entry's `env` names (`run_mcp.py` does), and shows
    this line as the server's last words."""
    llm = settings.llm
    if llm.api_key or urlparse(llm.base_url or "").hostname in LOCAL_HOSTS:
        return None
    return (
        "serve has no model: OPENAI_API_KEY is not set for it"
        + ("" if llm.base_url else " (nor OPENAI_BASE_URL, nor a local model server found)")
        + '; started by a client, it gets only what its entry passes: add "env": '
        '{"OPENAI_API_KEY": "${OPENAI_API_KEY:-}", "OPENAI_BASE_URL": "${OPENAI_BASE_URL:-}"} '
        "to the entry and set them where the client runs, or api_key in [llm] of config.toml"
    )
