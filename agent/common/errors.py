"""One exception hierarchy. Every fatal error carries what the user must fix.

Tool failures never raise: they become observations for the model. Only errors that end
a run (or a start-up) derive from `AgentError`, and each maps to a documented exit code.
"""

from __future__ import annotations


class AgentError(Exception):
    """Root of every error the CLI reports as a one-line message."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(AgentError):
    """A bad flag, file or setting: the user must edit something before retrying."""

    exit_code = 2


class ModelError(AgentError):
    """The model endpoint failed in a way retries cannot fix.

    `status` is the HTTP status when the endpoint answered with one.
    """

    exit_code = 1

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ToolsUnsupportedError(ModelError):
    """The endpoint refused `tools` for this model (Ollama's "does not support tools",
    llama-server without --jinja, vLLM without auto tool choice): the loop goes on in text
    mode, with the tools described in the system prompt."""


class ToolServerError(AgentError):
    """A tool server could not be reached, listed or called.

    `step` names what failed (connect, list_tools, call_tool) so the message says where.
    """

    exit_code = 1

    def __init__(self, server: str, step: str, cause: str) -> None:
        super().__init__(f"server '{server}': {step} failed: {cause}")
        self.server = server
        self.step = step
        self.cause = cause


class LoginNeededError(ToolServerError):
    """A remote server needs a login this run may not ask for (it has no terminal)."""

    def __init__(self, server: str, cause: str) -> None:
        super().__init__(server, "login", cause)
        self.message = f"server '{server}' {cause}"
        self.args = (self.message,)


class ContextOverflowError(ModelError):
    """The request did not fit the model's context window; the loop trims and re-sends.

    `context_window` and `request_tokens` are the server's own counts when its message gives
    them (llama.cpp, llama-cpp-python and OpenAI do): the loop learns the real window from
    them and how far its own estimate was off.
    """

    def __init__(
        self, message: str, *, context_window: int | None = None, request_tokens: int | None = None
    ) -> None:
        super().__init__(message)
        self.context_window = context_window
        self.request_tokens = request_tokens
