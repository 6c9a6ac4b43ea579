"""Serve an ASGI app on a free loopback port from a thread, for the length of a `with`.

The scripted model, the recording OpenAPI server and small fault servers all need the same
thing: a real HTTP server the code under test reaches over TCP, started in milliseconds,
stopped for sure. `serve_handler` is the same for a stdlib request handler (a page to fetch,
an origin that answers anything), yielding the origin URL.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

START_TIMEOUT = 10.0


@contextlib.contextmanager
def serve(app: Any, **config: Any) -> Iterator[int]:
    """Yield the port `app` is served on; `config` goes to uvicorn.Config."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without, each reply on a kept-alive connection
    # waits ~40 ms for a delayed ACK (Nagle), slowing every multi-request test.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config.setdefault("lifespan", "off")
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the test HTTP server did not start")
            time.sleep(0.01)
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextlib.contextmanager
def serve_handler(handler: Any) -> Iterator[str]:
    """Yield `http://127.0.0.1:PORT` where a threading stdlib server runs `handler` (a
    request handler class, or a callable making one); shut down when the `with` ends."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
