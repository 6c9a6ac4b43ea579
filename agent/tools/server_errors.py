"""How a tool server's failures are told: at connect, and when it stops mid-call.

Apart from the `ToolServer` contract (agent/tools/base.py) because the transports, the
server card lookup and the task follower raise these without needing a server, and the
catalog and skills read them without needing the connection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A line where a program says what went wrong: Go's and Rust's `Error: ...`, argparse's
# `prog: error: ...`, `fatal: ...`; a usage text after it is the program's, not the cause.
_ERROR_LINE = re.compile(r"(?:^|[\s:])(?:error|fatal)(?:\[[^\]]*\])?:\s", re.IGNORECASE)
# What the resolver says when a host name does not resolve (glibc, macOS, Windows, musl).
_DNS_WORDS = (
    "Name or service not known",
    "nodename nor servname",
    "getaddrinfo failed",
    "Temporary failure in name resolution",
    "No address associated with hostname",
    "Name does not resolve",
)


class ConnectProblem(Exception):
    """A connect failure whose message is already phrased for the user."""

    def __init__(self, message: str, *, login_needed: bool = False, says_all: bool = False) -> None:
        super().__init__(message)
        self.login_needed = login_needed  # only a person can fix it: no log tail, own error
        self.says_all = says_all or login_needed  # the message is the whole story: no log tail


class ServerStopped(Exception):
    """The connection died while a request was in flight; the next call reconnects."""

    def __init__(self, server: str, reason: str, *, down: bool) -> None:
        super().__init__(reason)
        self.server = server
        self.reason = reason
        self.down = down


def describe_exception(exc: BaseException) -> str:
    """One line for the deepest meaningful cause, unwrapping ExceptionGroups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, ConnectProblem):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"command not found: {exc.filename}"
    if name == "MCPError" and "Connection closed" in text:
        return "the server closed the connection (it exited or crashed at start; see its log)"
    if name == "ConnectError" and any(word in text for word in _DNS_WORDS):
        return f"the host name does not resolve ({text}): check the URL's host"
    if name == "ConnectError":
        return f"connection refused ({text})" if text else "connection refused"
    return f"{name}: {text}" if text else name


def connect_problem(exc: BaseException | None) -> ConnectProblem | None:
    """The ConnectProblem behind a failed connect (inside any ExceptionGroup), if any."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc if isinstance(exc, ConnectProblem) else None


def login_needed(exc: BaseException | None) -> bool:
    """Only a person can fix this connect failure (a login): it gets its own error."""
    problem = connect_problem(exc)
    return problem is not None and problem.login_needed


def says_all(exc: BaseException | None) -> bool:
    """The failure's message is the whole story: no server log tail is added."""
    problem = connect_problem(exc)
    return problem is not None and problem.says_all


def first_error_line(lines: Sequence[str]) -> str | None:
    """The first line in which a server says `Error: ...` (or `error:`, `fatal:`), if any;
    for uv (`uvx ...`), its resolver's reason."""
    found = uv_reason(lines)
    return found or next((line.strip() for line in lines if _ERROR_LINE.search(line)), None)


_UV_NO_SOLUTION = "No solution found when resolving"
UV_REASON_CHARS = 500


def uv_reason(lines: Sequence[str]) -> str | None:
    """uv's `× No solution found when resolving tool dependencies:` says only that it
    failed; why (`╰─▶ Because X was not found in the package registry ...`) is the
    paragraph after it, wrapped over lines that a tail of the last few cuts off. As one
    line; one already joined is returned as it is."""
    for index, line in enumerate(lines):
        if _UV_NO_SOLUTION not in line:
            continue
        said = [line.strip().lstrip("×x ").strip()]
        if "Because" not in said[0]:
            for more in lines[index + 1 :]:
                text = more.strip().lstrip("╰─▶`-> ").strip()
                if not text or text.startswith("hint:") or _UV_NO_SOLUTION in text:
                    break
                said.append(text)
        joined = " ".join(said)
        return joined if len(joined) <= UV_REASON_CHARS else joined[:UV_REASON_CHARS] + " [...]"
    return None


def stderr_headline(lines: Sequence[str]) -> str:
    """What a failed start quotes of the server's stderr: its first error line when it
    wrote one (a usage text printed after it says nothing of the cause), else its last
    lines joined."""
    return first_error_line(lines) or " | ".join(lines)
