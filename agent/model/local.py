"""A local model server found with no configuration at all.

With neither an API key nor a base URL set, the agent looks for an OpenAI-compatible server
on this machine's usual ports (Ollama, llama.cpp's llama-server, LM Studio, vLLM or
llama-cpp-python) and uses the first that answers `GET /v1/models`, with its first model
unless one was configured. All ports are asked at once and the whole look takes well under
a second: a refused port answers at once, and a port that accepts but never answers is given
PROBE_TIMEOUT. Plain threads and urllib, not the async client: this runs once, before the
event loop has anything else to do, and must not pull in the OpenAI stack's imports.

Whatever listens there gets the prompt and every tool result. On a shared machine any user
can open port 11434, so a listener that belongs to another user (Linux says who in
/proc/net/tcp) is never asked, and the run says so; `[llm] local_ports = []` turns the
look off altogether.
"""

from __future__ import annotations

import os
import time
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from agent.common import json_limits

# The usual ports, in the order they are preferred when several answer.
LOCAL_SERVERS: dict[int, str] = {
    11434: "Ollama",
    8080: "llama.cpp",
    1234: "LM Studio",
    8000: "vLLM or llama-cpp-python",
}
PROBE_TIMEOUT = 0.3  # seconds for one port (connect + answer)
PROBE_BUDGET = 0.5  # seconds for all of them together
MAX_MODELS_BODY = 1 << 20


@dataclass(frozen=True)
class LocalServer:
    """A server that answered: where, what it usually is, and the models it lists."""

    name: str
    base_url: str
    models: tuple[str, ...]


def describe_ports(ports: tuple[int, ...]) -> str:
    """`Ollama 11434, llama.cpp 8080, ...` for messages."""
    return ", ".join(f"{LOCAL_SERVERS.get(p, 'port')} {p}" for p in ports)


_LISTEN = "0A"
_LOOPBACK_OR_ANY = {
    "0100007F",  # 127.0.0.1
    "00000000",  # 0.0.0.0
    "00000000000000000000000001000000",  # ::1
    "00000000000000000000000000000000",  # ::
    "0000000000000000FFFF00000100007F",  # ::ffff:127.0.0.1
}


def listener_owners(port: int, proc: str = "/proc/net") -> set[int]:
    """The uids of the sockets listening on `port` at a loopback or wildcard address, as
    Linux's /proc/net/tcp{,6} tell; empty where the OS does not say."""
    owners: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"{proc}/{table}", encoding="ascii") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 8 or fields[3] != _LISTEN:
                continue
            address, _, hex_port = fields[1].partition(":")
            if int(hex_port, 16) == port and address.upper() in _LOOPBACK_OR_ANY:
                owners.add(int(fields[7]))
    return owners


def foreign_ports(ports: tuple[int, ...], uid: int | None = None) -> dict[int, int]:
    """Ports whose listener belongs to another user: port -> that user's uid."""
    me = os.getuid() if uid is None else uid
    found: dict[int, int] = {}
    for port in ports:
        others = listener_owners(port) - {me}
        if others:
            found[port] = min(others)
    return found


def find_local_server(
    ports: tuple[int, ...], *, host: str = "127.0.0.1", budget: float = PROBE_BUDGET
) -> LocalServer | None:
    """The first port (in `ports` order) whose `/v1/models` answers like a model server.
    Pass only ports `foreign_ports` has not ruled out."""
    if not ports:
        return None
    deadline = time.monotonic() + budget
    pool = ThreadPoolExecutor(max_workers=len(ports), thread_name_prefix="probe")
    try:
        futures: list[tuple[int, Future[tuple[str, ...] | None]]] = [
            (port, pool.submit(_models, f"http://{host}:{port}/v1")) for port in ports
        ]
        for port, future in futures:
            try:
                models = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                continue
            if models is not None:
                name = LOCAL_SERVERS.get(port, f"port {port}")
                return LocalServer(name, f"http://{host}:{port}/v1", models)
        return None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _models(base_url: str) -> tuple[str, ...] | None:
    """The model ids of an OpenAI-compatible `/models` answer; None if it is not one."""
    # No proxy: a proxy from the environment would answer for ports that are not ours.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"{base_url}/models", timeout=PROBE_TIMEOUT) as response:
            if response.status != 200:
                return None
            body = json_limits.loads(response.read(MAX_MODELS_BODY))
    except (OSError, ValueError):  # refused, timed out, HTTP error, not JSON
        return None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    return tuple(m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))
