"""OpenTelemetry traces of a run, only when the user asks for them.

On when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the
exporter reads the other `OTEL_EXPORTER_OTLP_*` variables itself: headers, timeout;
`http/protobuf`), or `[telemetry] endpoint` in config.toml; off with `OTEL_SDK_DISABLED=true`
or `OTEL_TRACES_EXPORTER=none`. Off, nothing of opentelemetry is imported and every span is
`NO_SPAN`, whose methods do nothing: a run costs what it did before.

Spans (GenAI semantic conventions): `invoke_agent` per run, `step N` per step, `chat
{model}` per model request (`gen_ai.operation.name`, `gen_ai.request.model`,
`gen_ai.usage.input_tokens` / `output_tokens`, `gen_ai.response.finish_reasons`) and
`execute_tool {name}` per tool call (server, tool, duration, error, bytes). Parents are
passed explicitly, never through the current context: the loop is an async generator and
its calls run in tasks of their own. A tool call's span context goes to its MCP server in
`params._meta` as W3C `traceparent` / `tracestate` (SEP-414). Content (the request, tool
arguments and results) is recorded only with
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` or `[telemetry] capture_content =
true`, always through the redactor, cut to 4,096 characters. The same holds for an error's
words: a failed span always says what kind of error (`error.type`), and its status
description (a tool's output, an exception's message) is set only with that opt-in,
redacted. A span's names and attributes otherwise hold only our own words and numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
MAX_CONTENT = 4096
SERVICE_NAME = "mcp-agent"
FLUSH_SECONDS = 5.0


class Span:
    """A span that records nothing (telemetry off); the real one has the same methods."""

    def child(self, name: str, **attributes: Any) -> Span:
        return self

    def set(self, **attributes: Any) -> None:
        """Attributes by their dotted names, written with `__` for `.` (gen_ai__system)."""

    def content(self, key: str, value: Any) -> None:
        """Recorded only when the user opted in to content, redacted (JSON if not text)."""

    def fail(self, kind: str, detail: str = "") -> None:
        """The span ends in error (`error.type` = `kind`, a name of ours). `detail` is
        content (a tool's output, an exception's message): it becomes the status
        description only when the user opted in to content, redacted like `content`."""

    def end(self) -> None:
        pass

    def trace_meta(self) -> dict[str, str]:
        """`traceparent` / `tracestate` of this span, for an MCP request's `_meta`."""
        return {}

    def __enter__(self) -> Span:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: object, tb: object) -> None:
        """Ends the span; an exception leaving it marks it failed (its type's name)."""
        if kind is not None:
            self.fail(kind.__name__, str(exc))
        self.end()


NO_SPAN = Span()


class Telemetry:
    """Starts a run's root span; off: every span is NO_SPAN."""

    def run(self, request: str) -> Span:
        return NO_SPAN

    def flush(self) -> None:
        pass


OFF = Telemetry()


def wanted(environ: Mapping[str, str], endpoint: str | None) -> bool:
    """Whether traces are asked for (without importing anything)."""
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").lower() == "none":
        return False
    return bool(
        endpoint
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
