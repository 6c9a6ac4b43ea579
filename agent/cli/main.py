"""Command line: flags -> Settings -> single-shot run or REPL, and exit codes.

`main(argv) -> int` is the one boundary where exceptions become one-line messages and the
documented exit codes. Set MCP_AGENT_DEBUG=1 to re-raise instead (for tests and bug hunts).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from agent.cli.trust_command import trust_app
from agent.cli.usage_errors import is_usage_error, usage_message
from agent.common.errors import AgentError, ConfigError
from agent.common.malloc import return_big_buffers
from agent.common.private import make_non_dumpable
from agent.common.redact import PATTERNS_ONLY
from agent.common.signals import SignalEnded, ending_signals_raise
from agent.session.run_settings import CLI_SERVER_NAME, resolve_settings, settle
from agent.tools.prestart import Prestarts, prestart

# The other codes (1 runtime error, 3 max_steps) come from a run's status: output.EXIT_CODES.
EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130
USAGE = (
    "run_mcp.py: no terminal and no request: pass one with -p TEXT (or pipe it in), or run "
    "it at a terminal for the REPL; run_mcp.py --help lists the options"
)

app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,  # help text is shown literally: '[llm]' is a section, not markup
    no_args_is_help=False,
    help="A ReAct agent in your terminal: an OpenAI-compatible model that acts through MCP "
    "tool servers (stdio, SSE, streamable HTTP) and OpenAPI tool servers.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            _say(f"run_mcp.py {version('mcp-agent-cli')}", err=False)
        except PackageNotFoundError:  # run from a checkout that was never installed
            _say("run_mcp.py (not installed: version unknown)", err=False)
        raise typer.Exit(0)


# Its options that shape a session are also agent/session/run_settings.py's SESSION_OPTIONS
# (the Python API's keywords): a new one goes there too (tests/api/test_api.py checks).
@app.command()
def run(
    connection: Annotated[
        str | None,
        typer.Option(
            "--connection",
            "-c",
            help="Transport of the server named on the command line: stdio, sse, http or "
            "openapi (default: stdio; with --server-url, sse for .../sse, else http).",
        ),
    ] = None,
    server_url: Annotated[
        str | None,
        typer.Option(
            "--server-url",
            help="Endpoint for sse / http / openapi (…/sse, …/mcp, or the OpenAPI base URL).",
        ),
    ] = None,
    server_command: Annotated[
        str | None,
        typer.Option(
            "--server-command",
            help='stdio server command line, e.g. "uvx mcp-server-time". '
            "Default: the bundled server.",
        ),
    ] = None,
    header: Annotated[
        list[str],
        typer.Option(
            "--header",
            "-H",
            help="'Name: value' sent to sse / http / openapi servers (repeatable).",
        ),
    ] = [],  # noqa: B006
    server_name: Annotated[
        str,
        typer.Option(
            "--server-name", help="Name (tool prefix) of the server given on the command line."
        ),
    ] = CLI_SERVER_NAME,
    mcp_config: Annotated[
        str | None,  # not a Path: `./claude` (a file) must stay apart from `claude` (a name)
        typer.Option(
            "--mcp-config",
            help="The servers file, replacing the default ones: a path (any client's format), "
            "or another client's user-level file by name: claude, claude-code, cursor, "
            "vscode, windsurf, cline, zed, codex, gemini, goose, opencode (a file of such a "
            "name: ./claude) (default: ~/.config/mcp-agent/mcp.json and config/mcp.json, "
            "those that exist). --server-url / --server-command add a server to these.",
        ),
    ] = None,
    servers: Annotated[
        str | None,
        typer.Option(
            "--servers",
            help="Only these configured servers, by name, comma-separated (e.g. db,github); "
            "a switched-off one named here runs too.",
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="TOML settings (default config/config.toml, "
            "else ~/.config/mcp-agent/config.toml).",
        ),
    ] = None,
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt",
            "-p",
            help="Single-shot: run one request, print the answer, exit. '-' reads stdin.",
        ),
    ] = None,
    interactive: Annotated[
        bool,
        typer.Option(
            "--interactive",
            "-i",
            help="Open the REPL (default when stdin is a terminal and there is no --prompt).",
        ),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Model name (overrides OPENAI_MODEL and [llm] model)."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="OpenAI-compatible endpoint (overrides OPENAI_BASE_URL and [llm] base_url).",
        ),
    ] = None,
    max_steps: Annotated[
        int | None,
        typer.Option("--max-steps", min=1, help="Most think/act steps per request (default 20)."),
    ] = None,
    output: Annotated[
        str,
        typer.Option(
            "--output",
            help="Single-shot output: text, json, or stream-json (a JSON line per event; "
            "see docs/programs.md).",
        ),
    ] = "text",
    input_format: Annotated[
        str,
        typer.Option(
            "--input-format",
            help="text, or stream-json: stdin is JSON lines, a turn each, in one session "
            "(needs --output stream-json).",
        ),
    ] = "text",
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve every tool call without asking.")
    ] = False,
    allowed_tools: Annotated[
        list[str],
        typer.Option(
            "--allowed-tools",
            "--allowedTools",
            metavar="PATTERNS",
            help="Tools that run without asking, also in -p (repeatable; patterns such as "
            "local__bash, 'db__*' or Claude Code's mcp__db__query, comma- or space-separated).",
        ),
    ] = [],  # noqa: B006
    disallowed_tools: Annotated[
        list[str],
        typer.Option(
            "--disallowed-tools",
            "--disallowedTools",
            metavar="PATTERNS",
            help="Tools that never run and are not offered to the model (patterns as for "
            "--allowed-tools; wins over it, --yes and trust).",
        ),
    ] = [],  # noqa: B006
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            help="Continue a saved session: ID, or nothing for this folder's latest (at a "
            "terminal: pick from this folder's sessions).",
        ),
    ] = None,
    all_folders: Annotated[
        bool,
        typer.Option(
            "--all", help="With --resume and no ID: every folder's sessions, not only this one's."
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Show only answers and errors.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show full tool output and server logs.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_show_version, help="Print the version, exit."
        ),
    ] = False,
    no_browser: Annotated[
        bool,
        typer.Option("--no-browser", help="Print MCP Apps' page URLs instead of opening them."),
    ] = False,
    login: Annotated[
        str | None,
        typer.Option(
            "--login",
            help="Log in to the configured server NAME (OAuth, in the browser), store its "
            "tokens, exit.",
            metavar="NAME",
        ),
    ] = None,
    trust_workspace: Annotated[
        bool,
        typer.Option(
            "--trust-workspace",
            help="Use this folder's own config/ files for this run (see 'run_mcp.py trust').",
        ),
    ] = False,
) -> None:
    """Run the agent: a REPL, or one request with --prompt."""
    if output not in ("text", "json", "stream-json"):
        raise ConfigError(f"--output {output!r}: use text, json or stream-json")
    streamed_input = _input_format(input_format, output, prompt)
    opts = dict(locals())
    settings = resolve_settings(opts, dict(os.environ))
    # Before any server starts: the REPL asks about a folder with its own files.
    settings = settle(
        settings,
        os.environ,
        ask=login is None and prompt is None and sys.stdin.isatty(),
        trusted=lambda: resolve_settings({**opts, "trust_workspace": True}, dict(os.environ)),
    )
    if login is not None:
        from agent.cli.login_command import run_login

        raise typer.Exit(run_login(settings, login))
    request = None if streamed_input else _single_shot_request(prompt, interactive)
    if output == "stream-json" and request is None and not streamed_input:
        raise ConfigError("--output stream-json needs --prompt, or --input-format stream-json")
    if resume is not None:  # which session: this folder's, picked at a terminal
        from agent.ui.sessions import choose_session

        asking = request is None and not streamed_input and sys.stdin.isatty()
        resume = choose_session(settings, resume, all_folders, ask=asking)
    prestarts = Prestarts()  # none yet: Ctrl-C while they start is handled below too
    report = output == "json" and request is not None  # until the run reports for itself
    try:
        # The stdio servers start now, while the heavy imports below load.
        prestarts = prestart(settings.servers, os.environ)
        from agent.cli.front_ends import run_repl, run_single  # heavy: once settings are valid

        if output == "stream-json":  # agent/cli/stream_front.py: JSON lines for programs
            from agent.cli.stream_front import run_stream

            report = False
            code = run_stream(settings, request, resume=resume, prestarts=prestarts)
        elif request is None:
            code = run_repl(settings, resume=resume, prestarts=prestarts)
        else:
            report = False
            code = run_single(
                settings, request, output=_output(output), resume=resume, prestarts=prestarts
            )
    except KeyboardInterrupt:  # typer would turn it into a silent exit 130
        code = _ended("interrupted", EXIT_INTERRUPTED, report)
    except SignalEnded as exc:  # SIGTERM / SIGHUP while starting (agent/common/signals.py)
        code = _ended(exc.word, exc.exit_code, report)
    except AgentError as exc:  # its message reaches the terminal: mask these settings' secrets
        exc.message = settings.redactor(os.environ)(exc.message)
        raise
    finally:
        prestarts.close()  # any the run did not get to (it failed before connecting)
    raise typer.Exit(code)


def _ended(word: str, code: int, report: bool) -> int:
    """A run cut short before it began: the one stderr line, and for --output json the
    object a cancelled run prints (the run prints its own once it has begun)."""
    _say(word)
    if report:
        _say(_unbegun_run("cancelled", word), err=False)
    return code


def _unbegun_run(status: str, error: str) -> str:
    """The `--output json` object of a run that never began: nothing run, nothing used."""
    usage = {"prompt_tokens": None, "completion_tokens": None}
    run: dict[str, Any] = {"answer": None, "status": status, "steps": 0, "tool_calls": []}
    return json.dumps({**run, "usage": usage, "error": error, "servers": [], "plan": None})


def _input_format(value: str, output: str, prompt: str | None) -> bool:
    """Whether the turns come from stdin as JSON lines (`--input-format stream-json`)."""
    if value not in ("text", "stream-json"):
        raise ConfigError(f"--input-format {value!r}: use text or stream-json")
    if value == "stream-json" and output != "stream-json":
        raise ConfigError("--input-format stream-json needs --output stream-json")
    if value == "stream-json" and prompt is not None:
        raise ConfigError("--input-format stream-json reads the turns from stdin: drop --prompt")
    return value == "stream-json"


def _output(value: str) -> Literal["text", "json"]:
    return "json" if value == "json" else "text"


def _single_shot_request(prompt: str | None, interactive: bool) -> str | None:
    """The one request of a single-shot run, or None for the REPL."""
    if prompt == "-" or (prompt is None and not interactive and not sys.stdin.isatty()):
        text = sys.stdin.read()
        if not text.strip():
            raise ConfigError("no request on stdin: pass --prompt TEXT, or pipe a request in")
        return text.strip("\n")
    if prompt is not None:
        if not prompt.strip():
            raise ConfigError("--prompt is empty")
        return prompt
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point: map every outcome to an exit code and one line on stderr."""
    make_non_dumpable()  # before any server starts: none may read our environment
    return_big_buffers()  # a 20 MB image freed is memory given back (agent.common.malloc)
    debug = os.environ.get("MCP_AGENT_DEBUG") == "1"
    args = _resume_default(list(argv if argv is not None else sys.argv[1:]))
    if not args and _nothing_on_stdin():  # the README's install line, run from a script
        _say(USAGE, err=False)
        return EXIT_OK
    try:
        # standalone_mode=False: click returns the code of a raised Exit instead of exiting.
        if args[:1] == ["trust"]:  # `run_mcp.py trust [PATH]`: agent/cli/trust_command.py
            code = trust_app(args=args[1:], prog_name="run_mcp.py trust", standalone_mode=False)
        elif args[:1] == ["batch"]:  # `run_mcp.py batch INPUT.jsonl`: agent/cli/batch_command.py
            from agent.cli.batch_command import batch_app

            with ending_signals_raise():
                code = batch_app(run, resolve_settings)(
                    args=args[1:] or ["--help"], prog_name="run_mcp.py batch", standalone_mode=False
                )
        elif args[:1] == ["serve"]:  # `run_mcp.py serve`: agent/cli/serve_command.py
            from agent.cli.serve_command import serve_app

            with ending_signals_raise():
                code = serve_app(run, resolve_settings)(
                    args=args[1:], prog_name="run_mcp.py serve", standalone_mode=False
                )
        elif args[:1] == ["acp"]:  # `run_mcp.py acp`, for editors: agent/cli/acp_command.py
            from agent.cli.acp_command import acp_app

            with ending_signals_raise():
                code = acp_app(run, resolve_settings)(
                    args=args[1:], prog_name="run_mcp.py acp", standalone_mode=False
                )
        elif args[:1] == ["mcp"]:  # `run_mcp.py mcp add|list|get|remove`: agent/cli/mcp_command.py
            from agent.cli.mcp_command import mcp_app

            rest = args[1:] or ["--help"]
            code = mcp_app(args=rest, prog_name="run_mcp.py mcp", standalone_mode=False)
        else:
            with ending_signals_raise():  # before any server starts
                code = app(args=args, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except AgentError as exc:
        if debug:
            raise
        _say(f"error: {exc.message}")  # it may quote a server or the model: cleaned
        _json_error(args, PATTERNS_ONLY(exc.message))
        return exc.exit_code
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except SignalEnded as exc:  # servers started early were stopped on the way out
        _say(exc.word)
        _json_error(args, exc.word, status="cancelled")
        return exc.exit_code
    except (typer.BadParameter, typer.Abort) as exc:
        _say(f"error: {usage_message(exc)}")
        _json_error(args, usage_message(exc))
        return EXIT_USAGE
    except Exception as exc:
        if is_usage_error(exc):
            said = usage_message(exc, request_words=args[:1] not in SUBCOMMANDS)
            _say(f"error: {said}")
            _json_error(args, said)
            return EXIT_USAGE
        raise
    return code if isinstance(code, int) else EXIT_OK


def _json_error(args: list[str], message: str, status: str = "error") -> None:
    """`--output json` promises one object on stdout, also for a failure before the run
    (a config or usage error: status `error`; a signal: `cancelled`), nothing run."""
    formats = {
        args[i + 1] if a == "--output" and i + 1 < len(args) else a.partition("=")[2]
        for i, a in enumerate(args[: args.index("--") if "--" in args else len(args)])
        if a == "--output" or a.startswith("--output=")
    }
    if args[:1] in SUBCOMMANDS:
        return
    if "json" in formats:
        _say(_unbegun_run(status, message), err=False)  # JSON: ASCII, escaped already
    elif "stream-json" in formats:  # the one line of a stream that never began
        line = {"type": "result", "session_id": None, **json.loads(_unbegun_run(status, message))}
        _say(json.dumps(line), err=False)


SUBCOMMANDS = (["mcp"], ["trust"], ["batch"], ["serve"], ["acp"])


def _nothing_on_stdin() -> bool:
    """No terminal and nothing to read (stdin closed, /dev/null, an empty pipe): a bare
    `run_mcp.py` then has nothing to do. Peeked, not read: a request piped in stays."""
    if sys.stdin is None:
        return True
    peek = getattr(sys.stdin.buffer, "peek", None)  # a BufferedReader's: not a reader's
    try:
        return not sys.stdin.isatty() and callable(peek) and not peek(1)
    except (OSError, ValueError):  # closed
        return False


def _say(text: str, *, err: bool = True, end: str = "\n") -> None:
    """A line of ours through the one terminal writer (agent.ui.safe.terminal: cleaned,
    masked by the patterns); imported here, late, so a run loads rich only when it needs it."""
    from agent.ui.safe import terminal

    terminal(text, err=err, end=end)


def entry() -> None:
    """The process entry (run_mcp.py, the `run-mcp` script): `main`, then an immediate end.

    Finalizing an interpreter that loaded mcp, openai and pydantic takes 0.2 s on an idle
    machine and seconds on a busy one, all of it after the answer. By the time `main`
    returns the servers are stopped and every file we write is closed, so after flushing
    stdout and stderr the process ends at once.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing can reach it
            stream.flush()
    os._exit(code)


def _resume_default(args: list[str]) -> list[str]:
    """`--resume` without an ID means the latest session (typer options need a value);
    `batch --resume` is a switch of its own."""
    if args[:1] == ["batch"]:
        return args
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--resume" and (i + 1 == len(args) or args[i + 1].startswith("-")):
            return [*args[: i + 1], "latest", *args[i + 1 :]]
    return args
