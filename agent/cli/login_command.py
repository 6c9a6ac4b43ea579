"""`run_mcp.py --login NAME`: log in to one configured server, store its tokens, exit.

It was asked for, so unlike every other run without a terminal it opens the browser
(Python's `webbrowser`, so `$BROWSER` is honoured) and waits for the callback. At a
terminal the URL the browser ends on may also be pasted, for a browser on another machine.
"""

from __future__ import annotations

import os
import sys

import anyio
from rich.text import Text

from agent.auth.provider import auth_words, forget
from agent.common.errors import AgentError, ConfigError, ToolServerError
from agent.config.settings import ServerConfig, Settings
from agent.tools.registry import ToolRegistry
from agent.ui.login_host import terminal_host
from agent.ui.safe import SafeConsole


def login_server(settings: Settings, name: str) -> ServerConfig:
    """The configured server `name`, if it is one that logs in; else a ConfigError."""
    servers = {s.name: s for s in settings.servers}
    config = servers.get(name)
    if config is None:
        known = ", ".join(servers) or "none"
        raise ConfigError(f"--login {name}: no server of that name (servers: {known})")
    if config.oauth_config() is None:
        why = (
            "it has an Authorization header"
            if any(k.lower() == "authorization" for k in config.headers)
            else "'oauth' is false"
            if config.oauth is False
            else f"it is a {config.type} server (only http and sse servers log in)"
        )
        raise ConfigError(f"--login {name}: this server does not log in: {why}")
    return config


async def _login(settings: Settings, name: str) -> int:
    config = login_server(settings, name)
    console = SafeConsole(stderr=True, redact=settings.redactor(os.environ))
    host = terminal_host(console, paste=sys.stdin.isatty())
    only = settings.model_copy(update={"servers": (config,)})
    failure: ToolServerError | None = None
    async with ToolRegistry(only, login=host) as registry:
        server = registry.servers[name]
        assert server.auth is not None  # login_server() checked that it logs in
        forget(server.auth, delete=False)  # a fresh login, even if tokens are stored
        failures = await registry.connect_all()
        if failures:
            failure = failures[0]  # raised outside: inside, the task group would wrap it
        else:
            words = auth_words(config, server.token_store)
            console.print(
                Text(f"logged in to '{name}' ({words}); {_tools(server.status.tool_count)}"),
                style="green",
            )
    if failure is not None:
        raise failure
    return 0


def _tools(count: int) -> str:
    return f"{count} tool" + ("" if count == 1 else "s")


def run_login(settings: Settings, name: str) -> int:
    """Log in; a failure is the AgentError (one line, exit code) it carries, never the
    task group's ExceptionGroup around it."""
    try:
        return anyio.run(_login, settings, name)
    except BaseExceptionGroup as group:
        errors = [e for e in _leaves(group) if isinstance(e, AgentError | KeyboardInterrupt)]
        if errors:
            raise errors[0] from None
        raise


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found
