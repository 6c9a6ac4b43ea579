"""`serve --http`: the socket it listens on, bound before anything else starts, and the
one line saying where (the URL a client's config takes).

The SDK's run_streamable_http_async binds inside uvicorn once the session is open: a busy
port was a 113-line traceback after every server had started, and a port the system picks
(`--http 0`) was never said. Here the port is taken first, its problems are one line each,
and the SDK's own app runs on it (uvicorn, which the SDK's server depends on, given our
socket through its public `serve(sockets=...)`).
"""

from __future__ import annotations

import errno
import ipaddress
import socket

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer

from agent.common.errors import ConfigError
from agent.ui.safe import SafeConsole

LOOPBACK = frozenset({"localhost"})
Listener = socket.socket
SHUTDOWN_WAIT = 5.0  # seconds the HTTP side has to close when serve is ended


def is_loopback(host: str) -> bool:
    if host in LOOPBACK:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def listen(host: str, port: int) -> socket.socket:
    """The --http socket, bound and listening before anything else starts (port 0: one the
    system picks); what stops it is one line saying what to change."""
    where = f"serve --http: port {port} on {host}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ConfigError(f"serve --host {host}: not an address ({exc.strerror})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"{where} is in use: pick another with --http PORT (--http 0: any free one)"
            ) from None
        if exc.errno == errno.EACCES:
            raise ConfigError(f"{where} is not allowed to you: pick one above 1023") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ConfigError(f"serve --host {host}: not an address of this machine") from None
        raise ConfigError(f"{where}: cannot listen ({exc.strerror})") from None
    return sock


def http_url(host: str, listener: socket.socket) -> str:
    """The URL a client on this machine puts in its config (an unspecified address, which
    listens on all of them, is reached at loopback)."""
    port = listener.getsockname()[1]
    if listener.family == socket.AF_INET6:
        shown = "::1" if host in ("::", "") else host
        return f"http://[{shown}]:{port}/mcp"
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return f"http://{shown}:{port}/mcp"


async def serve_http(
    server: MCPServer, host: str, listener: socket.socket, stderr: SafeConsole
) -> None:
    """Streamable HTTP on the bound socket: the SDK's own app (DNS-rebinding protection
    for a loopback `host`) run by uvicorn, as the SDK's run_streamable_http_async runs it,
    but on our socket, so that the port is known and taken before this line says it."""
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    stderr.print(f"serving MCP at {http_url(host, listener)}", markup=False, highlight=False)
    running = uvicorn.Server(config)
    try:
        await running.serve(sockets=[listener])
    except anyio.get_cancelled_exc_class():
        # SIGTERM ends serve by cancelling it (agent.common.signals): uvicorn's own shutdown
        # still ends the app's lifespan, which was otherwise cancelled at the loop's close
        # and logged as a traceback.
        if running.started:
            with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_WAIT):
                await running.shutdown(sockets=[listener])
        raise
