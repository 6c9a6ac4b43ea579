"""The OpenTelemetry side of agent.extensions.telemetry: imported only when traces are asked for.

Uses the SDK and the OTLP/HTTP (protobuf) exporter through their public API; the exporter
reads `OTEL_EXPORTER_OTLP_*` (endpoint, headers, timeout) itself, and the resource
`OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` (service name `mcp-agent` by default).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from agent.common.errors import ConfigError
from agent.extensions.telemetry import FLUSH_SECONDS, MAX_CONTENT, SERVICE_NAME, Span, Telemetry

MAX_STATUS = 200  # a status description is a summary; the whole result is `content`

try:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ConfigError(
        f"OpenTelemetry is configured (OTEL_* or [telemetry]) but not installed ({exc.name}): "
        "pip install 'mcp-agent[telemetry]', or unset OTEL_EXPORTER_OTLP_ENDPOINT"
    ) from None

_PROPAGATOR = TraceContextTextMapPropagator()


class OtelSpan(Span):
    def __init__(self, tracer: Any, span: Any, redact: Callable[[str], str] | None) -> None:
        self._tracer, self._span, self._redact = tracer, span, redact

    def child(self, name: str, **attributes: Any) -> Span:
        parent = trace.set_span_in_context(self._span)
        span = self._tracer.start_span(name, context=parent, attributes=_attrs(attributes))
        return OtelSpan(self._tracer, span, self._redact)

    def set(self, **attributes: Any) -> None:
        self._span.set_attributes(_attrs(attributes))

    def content(self, key: str, value: Any) -> None:
        if (shown := self._shown(value, MAX_CONTENT)) is not None:
            self._span.set_attribute(key, shown)

    def fail(self, kind: str, detail: str = "") -> None:
        self._span.set_attribute("error.type", kind)
        said = self._shown(detail, MAX_STATUS) if detail else None
        self._span.set_status(trace.Status(trace.StatusCode.ERROR, said))

    def _shown(self, value: Any, limit: int) -> str | None:
        """Content as it may leave: None without the opt-in; else redacted, then cut (a
        cut made first could leave half a secret the redactor no longer recognises)."""
        if self._redact is None:
            return None
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        shown = self._redact(text)
        if len(shown) > limit:
            shown = shown[:limit] + f"[… {len(shown) - limit} more characters]"
        return shown

    def end(self) -> None:
        self._span.end()

    def trace_meta(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(self._span))
        return carrier


class OtelTelemetry(Telemetry):
    def __init__(
        self,
        environ: Mapping[str, str],
        redact: Callable[[str], str] | None,
        endpoint: str | None,
    ) -> None:
        attributes = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
        self._provider = TracerProvider(resource=Resource.create(attributes))
        url = f"{endpoint.rstrip('/')}/v1/traces" if endpoint else None
        self._provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
        self._tracer = self._provider.get_tracer("mcp-agent")
        self._redact = redact

    def run(self, request: str) -> Span:
        span = self._tracer.start_span(
            "invoke_agent",
            context=trace.set_span_in_context(trace.INVALID_SPAN),
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "mcp-agent"},
        )
        root = OtelSpan(self._tracer, span, self._redact)
        root.content("mcp_agent.request", request)
        return root

    def flush(self) -> None:
        """Send what is buffered (a single-shot process ends right after its answer)."""
        self._provider.force_flush(int(FLUSH_SECONDS * 1000))


def _attrs(attributes: dict[str, Any]) -> dict[str, Any]:
    """`gen_ai__request__model=` -> `gen_ai.request.model`; None values left out."""
    return {k.replace("__", "."): v for k, v in attributes.items() if v is not None}
