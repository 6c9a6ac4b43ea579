"""The interactive part of a login: where the browser comes back to, and who may open it.

The authorization server sends the browser back to `http://127.0.0.1:<port>/callback`; a
tiny HTTP listener there takes the code. It is bound before the client metadata is built, so
the registered `redirect_uris` name the port actually in use (port 0 lets the OS choose,
unless a pre-registered client needs a fixed `redirect_port`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import webbrowser
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlparse

import anyio
from anyio.abc import SocketStream
from mcp.shared.auth import AuthorizationCodeResult

NEEDS_LOGIN = "needs a login"
LOGIN_TIMEOUT = 300.0  # seconds a person gets to finish logging in
CALLBACK_PATH = "/callback"
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>mcp-agent</title>"
    "<p>{message}</p><p>You can close this tab and return to the terminal.</p>"
)


class LoginRequired(Exception):
    """A login is needed but this run may not ask for one (headless)."""


class LoginFailed(Exception):
    """The person's login did not complete: refused, timed out, or a bad callback."""


@dataclass
class LoginHost:
    """What a run allows a login to do, shared by all its servers.

    `interactive`: may open a browser and wait for a person (REPL at a terminal, or
    `--login`). `notify` shows one line to the person (the URL to open). Logins take turns
    (`turn`), so two servers needing one at the same start never race for the browser.
    """

    interactive: bool = False
    notify: Callable[[str], None] = lambda line: print(line, file=sys.stderr)
    paste: Callable[[], Awaitable[str]] | None = None  # reads a pasted redirect URL
    browser: Callable[[str], Awaitable[None]] | None = None  # default: `webbrowser`, if any
    timeout: float = LOGIN_TIMEOUT
    turn: anyio.Lock = field(default_factory=anyio.Lock)


def may_open_browser() -> bool:
    """A browser can show up: `$BROWSER` is set, or a display and no SSH session."""
    if os.environ.get("BROWSER"):
        return True
    if os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"):
        return False
    return sys.platform == "darwin" or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


async def open_browser(url: str) -> None:
    """Python's `webbrowser` (so `$BROWSER` is honoured), off the event loop: a console
    browser command runs until it is done, and it may well be visiting our callback."""
    await anyio.to_thread.run_sync(webbrowser.open, url, abandon_on_cancel=True)


class CallbackListener:
    """One-shot HTTP listener on 127.0.0.1 for the authorization redirect."""

    def __init__(self, port: int = 0) -> None:
        self._wanted_port = port
        self._listener: anyio.abc.Listener[SocketStream] | None = None
        self._result: AuthorizationCodeResult | None = None
        self._error: str | None = None
        self._arrived = anyio.Event()
        self.port = 0

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def bind(self) -> None:
        """Take the port now: the redirect URI must be known before the client registers.
        Browsers that arrive before `wait` serves them queue in the socket's backlog."""
        try:
            listener = await anyio.create_tcp_listener(
                local_host="127.0.0.1", local_port=self._wanted_port
            )
        except OSError as exc:
            raise LoginFailed(
                f"cannot listen on 127.0.0.1:{self._wanted_port} for the login callback "
                f"({exc.strerror}); free the port or change 'redirect_port'"
            ) from None
        self._listener = listener
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def aclose(self) -> None:
        if self._listener is not None:
            await self._listener.aclose()
            self._listener = None

    def deliver(self, redirect_url: str) -> bool:
        """Take a redirect URL pasted by the person; whether it carried an answer."""
        return self._take(urlparse(redirect_url.strip()).query)

    async def wait(
        self, timeout: float, paste: Callable[[], Awaitable[str]] | None = None
    ) -> AuthorizationCodeResult:
        """Serve the callback until the browser (or a pasted URL) brings an answer."""
        assert self._listener is not None, "bind() first"
        listener = self._listener
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, self._handle)
            if paste is not None:
                tg.start_soon(self._read_pasted, paste)
            with anyio.move_on_after(timeout):
                await self._arrived.wait()
            tg.cancel_scope.cancel()
        if not self._arrived.is_set():
            raise LoginFailed(f"no answer from the browser within {timeout:g} s")
        if self._error is not None or self._result is None:
            raise LoginFailed(f"the authorization server refused: {self._error}")
        return self._result

    async def _read_pasted(self, paste: Callable[[], Awaitable[str]]) -> None:
        with contextlib.suppress(Exception):  # the browser may still answer
            while not self.deliver(await paste()):
                pass

    def _take(self, query: str) -> bool:
        params = {k: v[0] for k, v in parse_qs(query).items() if v}
        if "code" in params:
            self._result = AuthorizationCodeResult(
                code=params["code"], state=params.get("state"), iss=params.get("iss")
            )
        elif "error" in params:
            detail = params.get("error_description")
            self._error = params["error"] + (f" ({detail})" if detail else "")
        else:
            return False
        self._arrived.set()
        return True

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            with contextlib.suppress(Exception), anyio.fail_after(10):
                head = await _read_head(stream)
                target = head.split(b" ", 2)[1].decode("latin-1") if head.count(b" ") >= 2 else ""
                url = urlparse(target)
                done = url.path == CALLBACK_PATH and not self._arrived.is_set()
                done = done and self._take(url.query)
                message = "Login complete." if done and self._error is None else "Login failed."
                if not done:
                    message = "Nothing to do here."
                body = _PAGE.format(message=message).encode()
                await stream.send(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                    + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )


async def _read_head(stream: SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 16384:
        data += await stream.receive()
    return data
