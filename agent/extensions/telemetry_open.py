"""Opening the session's telemetry: the one place that decides whether opentelemetry is
imported at all (agent.extensions.telemetry has the interface and the off state;
agent.extensions.telemetry_otel the SDK side, imported from here only when traces are asked for)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agent.extensions.telemetry import CONTENT_ENV, OFF, Telemetry, wanted


def open_telemetry(
    environ: Mapping[str, str],
    redact: Callable[[str], str],
    *,
    endpoint: str | None = None,
    capture_content: bool = False,
) -> Telemetry:
    """The session's telemetry: OFF unless asked for; then the OTLP/HTTP exporter (the
    `telemetry` extra; a clear error when it is not installed)."""
    if not wanted(environ, endpoint):
        return OFF
    from agent.extensions.telemetry_otel import OtelTelemetry  # imports opentelemetry: only now

    content = capture_content or environ.get(CONTENT_ENV, "").lower() == "true"
    return OtelTelemetry(environ, redact if content else None, endpoint)
