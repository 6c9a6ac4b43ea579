"""A usage error as one line that says what to type instead.

typer's own words for a mistyped flag or a stray word are a bare "No such option" or
"Got unexpected extra argument(s)"; people arrive with other agents' habits (Claude Code's
`--continue`, gemini-cli's `--yolo`, a request as a positional word), so each gets a
pointer to ours. Apart from agent/cli/main.py, which only maps exceptions to exit codes.
"""

from __future__ import annotations

import difflib
import shlex

CLOSE_FLAG = 0.75  # how alike a mistyped flag and a real one must be to suggest it
# Other agents' flags (Claude Code, gemini-cli, aider) and ours: said for a "No such option".
THEIR_FLAGS = {
    "--continue": "--resume (alone: this folder's latest session)",
    "--yolo": "--yes",
    "--dangerously-skip-permissions": "--yes",
    "--max-turns": "--max-steps",
    "--output-format": "--output",
    "--print": "-p/--prompt",
}
EXTRA_ARGS = "Got unexpected extra argument(s) ("  # typer's words for a positional left over


def usage_message(exc: BaseException, request_words: bool = False) -> str:
    """The message with the flag it is about ("Invalid value for '--max-steps': ...").

    An unknown flag gets only a suggestion that is really close (`--max-step`), not the
    parser's loose ones (`--bogus` -> `--verbose`), another agent's flag ours (THEIR_FLAGS),
    and otherwise a pointer to --help. Words left over where `run` takes none
    (`request_words`: `run_mcp.py "what time is it"`) are a request meant for -p."""
    name, near = getattr(exc, "option_name", None), getattr(exc, "possibilities", None)
    if type(exc).__name__ == "BadOptionUsage" and isinstance(name, str):
        return f"{name} needs a value (e.g. {name} TEXT); see --help"
    if isinstance(name, str) and name in THEIR_FLAGS:
        return f"No such option: {name} (here it is {THEIR_FLAGS[name]})"
    words = str(getattr(exc, "message", ""))
    if request_words and words.startswith(EXTRA_ARGS) and words.endswith(")"):
        request = words.removeprefix(EXTRA_ARGS)[:-1]
        return f"a request goes after -p: run_mcp.py -p {shlex.quote(request)}"
    if isinstance(name, str) and name.startswith("-"):
        close = [p for p in near or () if _similarity(name, p) >= CLOSE_FLAG]
        hint = f"did you mean {' or '.join(sorted(close))}?" if close else "see --help"
        return f"No such option: {name} ({hint})"
    format_message = getattr(exc, "format_message", None)
    return str(format_message()) if callable(format_message) else str(exc)


def _similarity(typed: str, flag: str) -> float:
    return difflib.SequenceMatcher(None, typed.lstrip("-"), flag.lstrip("-")).ratio()


def is_usage_error(exc: Exception) -> bool:
    """typer (without click) raises its own UsageError family for bad flags."""
    return type(exc).__name__ in {
        "UsageError",
        "NoSuchOption",
        "BadOptionUsage",
        "MissingParameter",
        "BadArgumentUsage",
    }
