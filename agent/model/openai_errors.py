"""The `openai` client's exceptions, mapped to a retry or an actionable `ModelError`.

One table of rules for every failure a Chat Completions endpoint can give: which are worth
a retry (429, 5xx, timeouts, dropped connections), which say the request did not fit the
context (with the numbers the server gave), which say the endpoint takes no `tools`, and
which name the setting the user must fix. `agent.model.llm` enters `ErrorMapper` around each
request; `openai` itself is imported only when an error is mapped.
"""

from __future__ import annotations

import email.utils
import re
import time
from typing import Any, Protocol

from agent.common.errors import ContextOverflowError, ModelError, ToolsUnsupportedError

MAX_RETRY_AFTER = 20.0
RETRYABLE_STATUS = frozenset({408, 429})  # and every 5xx
CONTEXT_OVERFLOW_HINTS = (
    "context_length_exceeded",
    "context length",
    "maximum context",
    "context window",
    "context size",  # llama.cpp: "request (5367 tokens) exceeds the available context size"
    "too many tokens",
    "prompt is too long",
)
CONTEXT_OVERFLOW_TYPES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
# The numbers an overflow message gives (llama.cpp, llama-cpp-python, OpenAI, vLLM wordings).
_WINDOW_PATTERNS = (
    r"context size \((\d+) tokens\)",
    r"maximum context length is (\d+)",
    r"context window of (\d+)",
    r"context length of (\d+)",
)
_REQUEST_PATTERNS = (
    r"(\d+) in the messages",  # OpenAI's count without the reply's reserve
    r"request \((\d+) tokens\)",
    r"requested (\d+) tokens",
    r"requested tokens \((\d+)\)",
    r"resulted in (\d+) tokens",
    r"(\d+) input tokens",
)
# The wordings of an endpoint that takes no `tools` for this model (Ollama, llama-server
# without --jinja, vLLM without --enable-auto-tool-choice, and generic ones).
NO_TOOLS_HINTS = (
    "does not support tools",
    "requires --jinja",
    "--enable-auto-tool-choice",
    "does not support function calling",
    "does not support tool",
    "tools are not supported",
    "tool use is not supported",
    "tool calling is not supported",
    "function calling is not supported",
)
# 5xx bodies that are about the request, not the server: sending it again cannot help.
VALIDATION_HINTS = ("validation error", "input should be", "field required", "invalid_request")


class Endpoint(Protocol):
    """What the messages name about the endpoint (an `OpenAIModel`)."""

    model: str
    base_url: str | None
    max_tokens: int | None
    connect_timeout: float
    request_timeout: float


class Retryable(Exception):
    def __init__(self, reason: str, delay: float | None = None, *, connect: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay
        self.connect = connect  # no connection was made: bounded by the connect budget


class ErrorMapper:
    """Maps every openai exception to a retry or an actionable ModelError (one place).

    The classes, most specific first: timeouts and connection failures (retried), HTTP
    statuses, malformed responses, an error event inside a stream (the base `APIError`:
    llama-server sends `data: {"error": {"code": 500, ...}}` mid-reply), and any other
    client error. An HTTP status and a streamed error code are judged by one rule.
    """

    def __init__(self, model: Endpoint) -> None:
        self.model = model

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or not isinstance(exc, Exception) or isinstance(exc, ModelError):
            return False
        import openai

        if isinstance(exc, openai.APITimeoutError):
            if _caused_by(exc, "ConnectTimeout"):
                reason = f"could not connect within {self.model.connect_timeout:g} s"
                raise Retryable(reason, connect=True) from None
            raise Retryable(f"timed out after {self.model.request_timeout:g} s") from None
        if isinstance(exc, openai.APIConnectionError):
            connect = _caused_by(exc, "ConnectError")  # refused, DNS: nothing was sent
            raise Retryable(f"connection failed ({_root_cause(exc)})", connect=connect) from None
        if isinstance(exc, openai.APIStatusError):
            error = _error_body(exc.body)
            raise self._status_error(exc.status_code, error, exc, exc.response) from None
        if isinstance(exc, openai.APIResponseValidationError | ValueError):
            raise ModelError(
                f"the model endpoint returned malformed data ({_short(str(exc))}); "
                "is --base-url an OpenAI-compatible /v1 endpoint?"
            ) from None
        if isinstance(exc, openai.APIError):  # an error event inside the stream
            error = _error_body(exc.body)
            code = error.get("code")
            status = int(code) if isinstance(code, int | str) and str(code).isdigit() else 0
            raise self._status_error(status, error, exc, None, streamed=True) from None
        if isinstance(exc, openai.OpenAIError):
            raise ModelError(f"the model client failed: {_short(str(exc))}") from None
        return False

    def _status_error(
        self,
        status: int,
        error: dict[str, Any],
        exc: Any,
        response: Any,
        *,
        streamed: bool = False,
    ) -> Exception:
        """One rule for an HTTP status and for a streamed error event's code (0 if none)."""
        detail = _short(_error_message(error, exc))
        kinds = f"{error.get('type') or ''} {error.get('code') or ''}".lower()
        model = self.model
        where = f"HTTP {status}" if status else "error event in the stream"
        if streamed and status:
            where = f"error event {status} in the stream"
        if _is_overflow(status, kinds, detail):
            return ContextOverflowError(
                f"the request did not fit the model's context: {detail}",
                context_window=_overflow_number(error, "n_ctx", _WINDOW_PATTERNS, detail),
                request_tokens=_overflow_number(
                    error, "n_prompt_tokens", _REQUEST_PATTERNS, detail
                ),
            )
        if status not in (401, 403, 404, 429) and any(h in detail.lower() for h in NO_TOOLS_HINTS):
            return ToolsUnsupportedError(
                f"the model endpoint does not take tools ({where}): {detail}", status=status
            )
        if status in (401, 403):
            return ModelError(
                f"the model endpoint rejected the API key (HTTP {status}); set OPENAI_API_KEY "
                "or api_key in [llm] of config/config.toml"
            )
        if status == 404:
            return ModelError(
                f"model '{model.model}' or the endpoint was not found (HTTP 404) at "
                f"{model.base_url or 'the default OpenAI endpoint'}; check --model / "
                "OPENAI_MODEL and --base-url / OPENAI_BASE_URL (it usually ends in /v1)"
            )
        if status == 400 and "max_completion_tokens" in detail and model.max_tokens is not None:
            return UseCompletionTokens(detail)
        if status == 429 and "insufficient_quota" in detail:
            return ModelError(f"the model endpoint says the quota is used up (429): {detail}")
        invalid = any(h in f"{kinds} {detail}".lower() for h in VALIDATION_HINTS)
        if (status in RETRYABLE_STATUS or status >= 500 or not status) and not invalid:
            return Retryable(f"{where}: {detail}", _retry_after(response))
        if invalid and status >= 500:  # a server that reports a bad request as its own failure
            return ModelError(
                f"the model endpoint rejected the request as invalid ({where}, not retried): "
                f"{detail}"
            )
        return ModelError(
            f"the model endpoint rejected the request ({where}): {detail}", status=status or None
        )


class EmptyStream(Exception):
    """A 200 stream with no chunk at all: the endpoint cannot stream this request."""


class UseCompletionTokens(Exception):
    """The endpoint wants `max_completion_tokens` instead of `max_tokens` (OpenAI's reasoning
    models): the request is re-sent at once with the other name."""


def _error_body(body: Any) -> dict[str, Any]:
    """The error object of a response body: `{"error": {...}}`, `{...}` or a bare string."""
    inner = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(inner, dict):
        return inner
    return {"message": inner} if isinstance(inner, str) and inner else {}


def _is_overflow(status: int, kinds: str, detail: str) -> bool:
    """Context overflow, by the error's type or code first, then by its wording."""
    if status in (401, 403, 404, 429):
        return False
    if any(kind in CONTEXT_OVERFLOW_TYPES for kind in kinds.split()):
        return True
    return any(h in detail.lower() for h in CONTEXT_OVERFLOW_HINTS)


def _overflow_number(
    error: dict[str, Any], key: str, patterns: tuple[str, ...], detail: str
) -> int | None:
    """A token count the overflow error states: a field (llama.cpp), else the wording."""
    value = error.get(key)
    if isinstance(value, int) and value > 0:
        return value
    for pattern in patterns:
        if match := re.search(pattern, detail, re.IGNORECASE):
            return int(match.group(1))
    return None


def _error_message(error: dict[str, Any], exc: Any) -> str:
    parts = [str(error.get(k)) for k in ("message", "code") if error.get(k)]
    if parts:
        return " ".join(parts)
    return getattr(exc, "message", None) or str(exc)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _caused_by(exc: BaseException, name: str) -> bool:
    """Whether an exception of the class `name` is in exc's chain of causes (httpx2 types)."""
    cause: BaseException | None = exc
    while cause is not None:
        if type(cause).__name__ == name:
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc) or type(exc).__name__
    return _short(text, 120)


def _retry_after(response: Any) -> float | None:
    """Seconds the server asked us to wait (Retry-After or retry-after-ms), capped."""
    headers = getattr(response, "headers", None) or {}
    value: float | None = None
    if ms := headers.get("retry-after-ms"):
        try:
            value = float(ms) / 1000
        except ValueError:
            value = None
    if value is None and (raw := headers.get("retry-after")):
        try:
            value = float(raw)
        except ValueError:
            try:
                value = email.utils.parsedate_to_datetime(raw).timestamp() - time.time()
            except (TypeError, ValueError):
                value = None
    if value is None:
        return None
    return min(max(value, 0.0), MAX_RETRY_AFTER)
