"""A local model server found with no configuration at all.

With neither an API key nor a base URL set, the agent looks for an OpenAI-compatible server
on this machine's usual ports (Ollama, llama.cpp's llama-server, LM Studio, vLLM or
llama-cpp-python) and uses the first that answers `GET /v1/models`, with its first model
unless one was configured. All ports are asked at once and the whole look takes well under
a second: a refused port answers at once, and a port that accepts but never answers is given
PROBE_TIMEOUT. Plain threads and urllib, not the async client: this runs once, before the
event loop has anything else to do, and must not pull in the OpenAI stack's imports.
"""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

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


def find_local_server(
    ports: tuple[int, ...], *, host: str = "127.0.0.1", budget: float = PROBE_BUDGET
) -> LocalServer | None:
    """The first port (in `ports` order) whose `/v1/models` answers like a model server."""
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
            body = json.loads(response.read(MAX_MODELS_BODY))
    except (OSError, ValueError):  # refused, timed out, HTTP error, not JSON
        return None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    return tuple(m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))
