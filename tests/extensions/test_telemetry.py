"""OpenTelemetry traces, end to end: `python run_mcp.py` with the standard OTEL_* variables
exports to a real OTLP/HTTP receiver started here (the official opentelemetry-proto messages
decode what arrives); an MCP server sees the trace context of its call's span in `_meta`;
without OTEL_* nothing of opentelemetry is imported."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.asgi_thread import serve
from tests.support.cli import cli_env, mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import SUPPORT

TRACE_SERVER = f"{sys.executable} {SUPPORT / 'trace_server.py'}"


class Receiver:
    """OTLP/HTTP traces endpoint: every span received, by name, with its attributes."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.content_types: list[str] = []
        self._lock = threading.Lock()

    async def traces(self, request: Request) -> Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.body())
        with self._lock:
            self.content_types.append(request.headers.get("content-type", ""))
            for resource in message.resource_spans:
                service = _attributes(resource.resource.attributes).get("service.name")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        self.spans.append(_span(span, service))
        reply = ExportTraceServiceResponse().SerializeToString()
        return Response(reply, media_type="application/x-protobuf")

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"].startswith(prefix)]


def _attributes(items: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in items:
        value = item.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            found[item.key] = [getattr(v, v.WhichOneof("value")) for v in value.array_value.values]
        else:
            found[item.key] = getattr(value, kind)
    return found


def _span(span: Any, service: str | None) -> dict[str, Any]:
    return {
        "name": span.name,
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent": span.parent_span_id.hex(),
        "attributes": _attributes(span.attributes),
        "error": span.status.code == 2,
        "status": span.status.message,
        "events": [(e.name, _attributes(e.attributes)) for e in span.events],
        "service": service,
    }


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    found = Receiver()
    app = Starlette(routes=[Route("/v1/traces", found.traces, methods=["POST"])])
    with serve(app) as port:
        yield found, f"http://127.0.0.1:{port}"


def traced_run(
    tmp_path: Path, endpoint: str, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], ScriptedLLM]:
    script = [tool_calls(("trace__request_meta", {"note": "sk-e2e-secret"})), text("traced")]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            [
                "--server-command",
                TRACE_SERVER,
                "--server-name",
                "trace",
                "--yes",
                "-p",
                "go",
                *args,
            ],
            tmp_path,
            base_url=llm.base_url,
            extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, **(env or {})},
        )
        llm.assert_complete()
    return proc, llm


def test_a_run_exports_its_span_tree_and_the_server_sees_its_call_s_traceparent(
    tmp_path: Path, receiver: tuple[Receiver, str]
) -> None:
    found, endpoint = receiver
    proc, llm = traced_run(tmp_path, endpoint, "--model", "gpt-4o-mini")
    assert proc.returncode == 0, proc.stderr
    assert found.content_types and all("protobuf" in c for c in found.content_types)
    [run] = found.named("invoke_agent")
    assert run["parent"] == "" and run["service"] == "mcp-agent"
    assert run["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert run["attributes"]["mcp_agent.status"] == "answered"
    assert run["attributes"]["gen_ai.usage.input_tokens"] == 24
    steps = sorted(found.named("step "), key=lambda s: s["name"])
    assert [s["name"] for s in steps] == ["step 1", "step 2"]
    assert {s["parent"] for s in steps} == {run["span_id"]}
    chats = found.named("chat gpt-4o-mini")
    assert sorted(c["parent"] for c in chats) == sorted(s["span_id"] for s in steps)
    chat = chats[0]["attributes"]
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat["gen_ai.usage.input_tokens"] == 12 and chat["gen_ai.usage.output_tokens"] == 7
    assert {tuple(c["attributes"]["gen_ai.response.finish_reasons"]) for c in chats} == {
        ("tool_calls",),
        ("stop",),
    }
    [tool] = found.named("execute_tool trace__request_meta")
    assert tool["parent"] == steps[0]["span_id"] and not tool["error"], json.dumps(
        tool["attributes"]
    )
    attributes = tool["attributes"]
    assert (
        attributes["mcp_agent.server"] == "trace" and attributes["mcp_agent.tool"] == "request_meta"
    )
    assert attributes["mcp_agent.duration_ms"] > 0 and attributes["mcp_agent.output_bytes"] > 0
    assert {s["trace_id"] for s in found.spans} == {run["trace_id"]}
    # The server got the W3C trace context of exactly that call's span.
    told = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"][0]
    meta = json.loads(told[told.index("{") : told.rindex("}") + 1])
    version, trace_id, parent_id, flags = meta["traceparent"].split("-")
    assert (version, trace_id, parent_id) == ("00", run["trace_id"], tool["span_id"])
    assert int(flags, 16) & 1  # sampled
    # No content without the opt-in.
    content = {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "mcp_agent.request"}
    assert not content & {k for s in found.spans for k in s["attributes"]}


def test_content_is_recorded_only_when_opted_in_and_redacted(
    tmp_path: Path, receiver: tuple[Receiver, str]
) -> None:
    found, endpoint = receiver
    optin = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    proc, _ = traced_run(tmp_path, endpoint, env=optin)
    assert proc.returncode == 0, proc.stderr
    [tool] = found.named("execute_tool")
    arguments = tool["attributes"]["gen_ai.tool.call.arguments"]
    assert "note" in arguments and "sk-e2e-secret" not in arguments
    assert "traceparent" in tool["attributes"]["gen_ai.tool.call.result"]
    assert all("sk-e2e-secret" not in json.dumps(s) for s in found.spans)


def test_without_otel_variables_neither_the_sdk_nor_an_exporter_is_imported(
    tmp_path: Path,
) -> None:
    """The run path, in one process: after a whole run, sys.modules holds no OpenTelemetry
    SDK, exporter or protobuf message, nor our module that uses them. (The API package,
    `opentelemetry` itself, is imported by the mcp SDK, which depends on it: a no-op without
    a provider.)"""
    probe = (
        "import sys\nfrom agent.cli.main import main\ncode = main(sys.argv[1:])\n"
        "heavy = ('opentelemetry.sdk', 'opentelemetry.exporter', 'opentelemetry.proto', "
        "'agent.extensions.telemetry_otel', 'google.protobuf')\n"
        "loaded = sorted(m for m in sys.modules if m.startswith(heavy))\n"
        "print('LOADED', loaded, code, file=sys.stderr)\n"
    )
    with ScriptedLLM(tool_calls(("local__get_current_time", {})), text("ok")) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-e2e-secret")
        env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
        proc = subprocess.run(
            [sys.executable, "-c", probe, "-p", "time?"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert "LOADED [] 0" in proc.stderr, proc.stderr


# A database tool that fails with the connection string it used, password and all, and the
# text it was asked to run: the failing output a span's status once carried to the collector.
FAILING_DB_SERVER = """
import os
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("db", log_level="WARNING")


@server.tool()
def query(sql: str) -> str:
    \"\"\"Run one SQL statement.\"\"\"
    dsn = "postgres://app:" + os.environ["DB_PASSWORD"] + "@db.internal/prod"
    raise ToolError("connect failed: " + dsn + " while running " + sql)


server.run("stdio")
"""
DB_PASSWORD = "pw-db-9c41e7a2"
USER_KEY = "key-user-3b8e51d0"


def failing_tool_run(
    tmp_path: Path, endpoint: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A CLI run whose one tool call fails with both secrets in its output: the server's
    password (a secret-named `env` value in mcp.json) and the user's key (the model put it
    in the call's arguments)."""
    server = tmp_path / "db_server.py"
    server.write_text(FAILING_DB_SERVER)
    entry = {"command": sys.executable, "args": [str(server)], "env": {"DB_PASSWORD": DB_PASSWORD}}
    config = mcp_json(tmp_path, {"db": entry})
    call = tool_calls(("db__query", {"sql": f"select '{USER_KEY}'"}))
    with ScriptedLLM(call, text("the query failed")) as llm:
        proc = run_cli(
            ["--mcp-config", str(config), "--yes", "-p", "count the users"],
            tmp_path,
            base_url=llm.base_url,
            api_key=USER_KEY,
            extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, **(env or {})},
        )
        llm.assert_complete()
    assert proc.returncode == 0, proc.stderr
    told = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert DB_PASSWORD in told  # the model saw the failure as the server wrote it
    return proc


def test_a_failing_tool_s_span_holds_no_output_without_content_capture(
    tmp_path: Path, receiver: tuple[Receiver, str]
) -> None:
    found, endpoint = receiver
    failing_tool_run(tmp_path, endpoint)
    [tool] = found.named("execute_tool db__query")
    assert tool["error"] and tool["attributes"]["error.type"] == "tool_error"
    assert tool["status"] == "", tool["status"]  # no content: not even the first words
    everything = json.dumps(found.spans)
    for content in (DB_PASSWORD, USER_KEY, "connect failed", "postgres://", "select"):
        assert content not in everything, content


def test_a_failing_tool_s_span_status_is_redacted_with_content_capture(
    tmp_path: Path, receiver: tuple[Receiver, str]
) -> None:
    found, endpoint = receiver
    optin = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    failing_tool_run(tmp_path, endpoint, optin)
    [tool] = found.named("execute_tool db__query")
    assert tool["error"] and "connect failed" in tool["status"], tool["status"]
    assert "[REDACTED]" in tool["attributes"]["gen_ai.tool.call.result"]
    everything = json.dumps(found.spans)
    assert DB_PASSWORD not in everything and USER_KEY not in everything
