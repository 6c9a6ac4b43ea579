"""The model endpoint of the real-model benchmark, in the two shapes local servers come in.

In front of llama-cpp-python's server, this renders the model's own chat template (the one
in its GGUF, with Jinja, as `llama-server --jinja` does: tools in the system prompt, earlier
calls with their arguments as objects, results as `<tool_response>`), sends the prompt to
the plain completions endpoint, and does with the reply what one of two kinds of server does:

- `parsed`: what `llama-server --jinja` does. Earlier calls' arguments go to the template as
  objects, and the reply's `<tool_call>{...}</tool_call>` (and the other wrappers llama.cpp's
  Hermes parser accepts: `<tools>`, `<tool>`, `<function_call>`, `<response>`, `<json>`,
  `<xml>`, a bare `{"name": ...}` reply) come back as structured `tool_calls`.
- `raw`: what llama-server without `--jinja` (or an Ollama template without tools) does: a
  request with `tools` is refused with the server's own words, and text comes back as text.

Every request's token counts are appended to a JSON-lines log, so the benchmark counts what
the server processed, whatever the client reports. Streaming is answered as one chunk with
the whole reply (the upstream request is not streamed): no agent's result depends on chunking.

Run (with a Python that has jinja2, e.g. llama-cpp-python's):
`python bench/realmodel/endpoint.py --upstream URL --template FILE --port N --log FILE`; the
benchmark sets the mode and names each run with `POST /run {"tag", "mode"}`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import secrets
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TAGS = ("tool_call", "tools", "tool", "function_call", "response", "json", "xml")
_TAGGED = re.compile(r"<(" + "|".join(_TAGS) + r")>\s*(.*?)\s*(?:</\1>|\Z)", re.DOTALL)
REFUSAL = "tools param requires --jinja flag"
_lock = threading.Lock()


def _call_objects(value: Any) -> list[dict[str, Any]]:
    """The calls in one parsed JSON value: an object with a name, or a list of them."""
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return []
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return []
        calls.append({"name": item["name"], "arguments": arguments})
    return calls


def parse_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """(the text outside calls, the calls), as a Hermes-style tool-call parser reads a reply."""
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    last = 0
    for match in _TAGGED.finditer(text):
        try:
            found = _call_objects(json.loads(match.group(2)))
        except ValueError:
            found = []
        if found:
            kept.append(text[last : match.start()])
            last = match.end()
            calls.extend(found)
    kept.append(text[last:])
    prose = "".join(kept).strip()
    if not calls and prose.startswith("{"):
        try:
            calls = _call_objects(json.loads(prose))
        except ValueError:
            calls = []
        if calls:
            prose = ""
    return prose, calls


def _environment() -> Any:
    """Jinja as chat templates are run (Transformers, llama-server): `tojson` leaves
    non-ASCII and markup characters as they are."""
    import jinja2.sandbox  # type: ignore[import-not-found, unused-ignore]  # llama-cpp-python's venv has it; distributed brings it to ours

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def tojson(value: Any, indent: int | None = None) -> str:
        return json.dumps(value, ensure_ascii=False, indent=indent)

    env.filters["tojson"] = tojson
    return env


def _template_ready(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as llama-server hands them to a template: text content as one string,
    earlier calls' arguments as objects."""
    ready = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        message = {**message, "content": content or ""}
        calls = message.get("tool_calls")
        if calls:
            fixed = []
            for call in calls:
                function = dict(call.get("function") or {})
                if isinstance(function.get("arguments"), str):
                    with contextlib.suppress(ValueError):
                        function["arguments"] = json.loads(function["arguments"] or "{}")
                fixed.append({**call, "function": function})
            message["tool_calls"] = fixed
        ready.append(message)
    return ready


def render(template: str, messages: list[dict[str, Any]], tools: list[Any] | None) -> str:
    """The prompt, as the model's own chat template makes it."""
    return (
        _environment()
        .from_string(template)
        .render(messages=_template_ready(messages), tools=tools or None, add_generation_prompt=True)
    )


class Handler(BaseHTTPRequestHandler):
    server_version = "bench-endpoint"
    mode = "parsed"
    upstream = ""
    log_path = ""
    tag = ""
    template = ""

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        with urllib.request.urlopen(self.upstream + self.path, timeout=60) as response:
            self._send(response.status, response.read())

    def do_POST(self) -> None:
        if self.path.rstrip("/").endswith("/run"):  # the benchmark names the next run, its mode
            run = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            Handler.tag, Handler.mode = run["tag"], run["mode"]
            self._send(200, b"{}")
            return
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        tools = request.get("tools")
        if tools and self.mode == "raw":
            error = {"error": {"code": 400, "message": REFUSAL, "type": "invalid_request_error"}}
            self._send(400, json.dumps(error).encode())
            return
        stream = bool(request.get("stream"))
        upstream = {
            "prompt": render(self.template, request.get("messages", []), tools),
            "max_tokens": request.get("max_tokens") or request.get("max_completion_tokens") or 1024,
            "temperature": request.get("temperature", 0),
            "stop": ["<|im_end|>", "<|endoftext|>"],
        }
        started = time.monotonic()
        try:
            with _lock:  # one request at a time, as the server does
                reply = self._upstream(upstream)
        except urllib.error.HTTPError as exc:
            self._send(exc.code, exc.read())
            return
        choice = reply["choices"][0]
        text = choice.get("text") or ""
        calls: list[dict[str, Any]] = []
        if tools and self.mode == "parsed":
            offered = {t["function"]["name"] for t in tools}
            prose, found = parse_calls(text)
            if found and all(c["name"] in offered for c in found):
                text, calls = prose, found
        usage = reply.get("usage") or {}
        self._log(request, text, calls, usage, time.monotonic() - started)
        tool_calls = [
            {
                "id": "call_" + secrets.token_hex(6),
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
            }
            for c in calls
        ]
        finish = "tool_calls" if calls else choice.get("finish_reason") or "stop"
        if not stream:
            out = {"role": "assistant", "content": text or None}
            if tool_calls:
                out["tool_calls"] = tool_calls
            body = {**reply, "choices": [{"index": 0, "message": out, "finish_reason": finish}]}
            self._send(200, json.dumps(body).encode())
            return
        self._stream(reply, text, tool_calls, finish, usage)

    def _upstream(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.upstream + "/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=3600) as response:
            return json.loads(response.read())

    def _stream(
        self,
        reply: dict[str, Any],
        text: str,
        tool_calls: list[dict[str, Any]],
        finish: str,
        usage: dict[str, Any],
    ) -> None:
        base = {
            "id": reply.get("id", "x"),
            "object": "chat.completion.chunk",
            "created": reply.get("created", 0),
            "model": reply.get("model", ""),
        }
        delta: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_calls:
            delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(tool_calls)]
        chunks = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**base, "choices": [], "usage": usage},
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")

    def _log(
        self, request: dict[str, Any], text: str, calls: list[Any], usage: dict[str, Any], s: float
    ) -> None:
        record = {
            "tag": Handler.tag,
            "prompt_tokens": usage.get("prompt_tokens", 0),
            "completion_tokens": usage.get("completion_tokens", 0),
            "seconds": round(s, 1),
            "messages": request.get("messages"),
            "tools": [t["function"]["name"] for t in request.get("tools") or ()],
            "reply": text,
            "calls": calls,
        }
        with open(self.log_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("parsed", "raw"), default="parsed")
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--template", required=True, help="a file with the model's chat template")
    args = parser.parse_args()
    Handler.mode, Handler.upstream, Handler.log_path = args.mode, args.upstream, args.log
    with open(args.template, encoding="utf-8") as fh:
        Handler.template = fh.read()
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
