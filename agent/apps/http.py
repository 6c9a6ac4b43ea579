"""A tiny HTTP/1.1 server for the app host, on 127.0.0.1 only.

Why not a framework: the host serves a handful of routes to one browser on this machine;
what matters is what it refuses. It binds the loopback address only (never 0.0.0.0), each
connection carries one request (`Connection: close`), heads and bodies have hard limits,
and a request whose `Host` is not this loopback address (DNS rebinding) is refused before
any route sees it. Routes are one async function the host provides.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
from anyio.abc import Listener, SocketStream, TaskGroup

LOOPBACK = "127.0.0.1"
MAX_HEAD = 16_384
MAX_BODY = 8 * 1024 * 1024  # an app's tools/call arguments or ui/message
READ_TIMEOUT = 10.0
_REASONS = {200: "OK", 303: "See Other", 400: "Bad Request", 403: "Forbidden", 404: "Not Found"}
_REASONS |= {405: "Method Not Allowed", 410: "Gone", 413: "Payload Too Large", 500: "Error"}


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, value: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(value).encode(), "application/json")

    @classmethod
    def text(cls, status: int, message: str) -> Response:
        return cls(status, (message + "\n").encode())


Handler = Callable[[Request, int], Awaitable[Response]]  # (request, the port it came to)


class LoopbackServer:
    """Listeners on 127.0.0.1 with OS-chosen ports; `ports` once `start` returned, and one
    more for each `listen` (an origin of its own: the browser tells origins by port)."""

    def __init__(self, handler: Handler, count: int = 1) -> None:
        self.handler = handler
        self.count = count
        self.ports: list[int] = []
        self._scopes: list[anyio.CancelScope] = []
        self._tg: TaskGroup | None = None

    async def start(self, tg: TaskGroup) -> None:
        """Bind now (the ports are known on return); serve in `tg` until `aclose`."""
        self._tg = tg
        for _ in range(self.count):
            await self.listen()

    async def listen(self) -> int:
        """Bind one more port (served like the others until `aclose`); its number."""
        assert self._tg is not None, "start the server first"
        listener = await anyio.create_tcp_listener(local_host=LOOPBACK, local_port=0)
        port = int(listener.extra(anyio.abc.SocketAttribute.local_port))
        self.ports.append(port)
        self._tg.start_soon(self._serve, listener, port)
        return port

    async def _serve(self, listener: Listener[SocketStream], port: int) -> None:
        with anyio.CancelScope() as scope:  # cancelled by aclose
            self._scopes.append(scope)
            async with listener:
                await listener.serve(self._serve_one(port))

    async def aclose(self) -> None:
        for scope in self._scopes:
            scope.cancel()

    def _serve_one(self, port: int) -> Callable[[SocketStream], Awaitable[None]]:
        async def serve(stream: SocketStream) -> None:
            async with stream:
                try:
                    with anyio.fail_after(READ_TIMEOUT):
                        request = await _read_request(stream)
                except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                    return
                if isinstance(request, Response):
                    response = request
                elif request.headers.get("host") != f"{LOOPBACK}:{port}":
                    response = Response.text(403, "wrong Host header")
                else:
                    try:
                        response = await self.handler(request, port)
                    except Exception as exc:
                        response = Response.text(500, f"{type(exc).__name__}: {exc}")
                with contextlib.suppress(anyio.BrokenResourceError, OSError):
                    await stream.send(_encode(response))

        return serve


async def _read_request(stream: SocketStream) -> Request | Response:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            return Response.text(413, "request head too large")
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return Response.text(400, "bad request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        return Response.text(400, "bad Content-Length")
    if length > MAX_BODY or length < 0:
        return Response.text(413, "request body too large")
    while len(body) < length:
        body += await stream.receive()
    url = urlsplit(parts[1])
    query = {k: v[0] for k, v in parse_qs(url.query).items() if v}
    return Request(parts[0].upper(), unquote(url.path), query, headers, body[:length])


def _encode(response: Response) -> bytes:
    reason = _REASONS.get(response.status, "Error")
    headers = {
        "Content-Type": response.content_type,
        "Content-Length": str(len(response.body)),
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Connection": "close",
        **response.headers,
    }
    head = f"HTTP/1.1 {response.status} {reason}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return (head + "\r\n").encode("latin-1") + response.body
