"""What a stdio server inherits: what a launcher needs (certificates, uv / npm / pip
settings), never the agent's secrets. Driven through `run_mcp.py -p` with the scripted model;
the server reports its own environment as a tool result the model receives.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import RUN_MCP, cli_env, mcp_json
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import REPO_ROOT, SUPPORT

ENV_SERVER = str(SUPPORT / "env_server.py")
LAUNCHER_SETTINGS = {
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    "SSL_CERT_DIR": "/etc/ssl/certs",
    "REQUESTS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
    "CURL_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
    "NODE_EXTRA_CA_CERTS": "/etc/ssl/certs/ca-certificates.crt",
    "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt",
    "UV_CACHE_DIR": "/tmp/uv-cache",
    "UV_NATIVE_TLS": "1",
    "NPM_CONFIG_REGISTRY": "https://registry.npmjs.org/",
    "PIP_INDEX_URL": "https://pypi.org/simple",
}
SECRETS = {
    "GITHUB_TOKEN": "ghp_0123456789abcdef",
    "DB_PASSWORD": "hunter2-db-pass",
    "NPM_CONFIG__AUTHTOKEN": "npm_tok_0123456789",
    "UV_INDEX_PRIVATE_PASSWORD": "uv-index-pass-0123",
    "UV_INDEX_URL": "https://alice:s3cr3t-pw@pypi.corp.example/simple",
}


def run_with_env(
    args: list[str], workdir: Path, base_url: str, env: dict[str, str], timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """`run_mcp.py ARGS` with `env` on top of the test environment (PATH included)."""
    return subprocess.run(
        [sys.executable, RUN_MCP, *args],
        cwd=workdir,
        env={**cli_env(workdir, base_url, "sk-e2e-secret-key"), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def reported_environment(llm: ScriptedLLM) -> dict[str, str]:
    tool = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"][0]
    return json.loads(tool[tool.index("{") : tool.rindex("}") + 1])


def env_server_config(tmp_path: Path, **extra: Any) -> Path:
    server = {"command": sys.executable, "args": [ENV_SERVER], **extra}
    config = mcp_json(tmp_path, {"env": server})
    return config


def test_a_stdio_server_gets_certificates_and_launcher_settings_not_our_secrets(
    tmp_path: Path,
) -> None:
    config = env_server_config(tmp_path, env={"SERVICE_TOKEN": "${SERVICE_TOKEN}"})
    script = [tool_calls(("env__environment", {})), text("seen")]
    with ScriptedLLM(*script) as llm:
        proc = run_with_env(
            ["--mcp-config", str(config), "-p", "what is your environment?"],
            tmp_path,
            llm.base_url,
            {**LAUNCHER_SETTINGS, **SECRETS, "SERVICE_TOKEN": "tok-named-by-env-9"},
        )
    assert proc.returncode == 0, proc.stderr
    seen = reported_environment(llm)
    for name, value in LAUNCHER_SETTINGS.items():
        assert seen.get(name) == value, name
    assert not set(SECRETS) & set(seen), set(SECRETS) & set(seen)
    assert "OPENAI_API_KEY" not in seen and "OPENAI_BASE_URL" not in seen
    assert seen["SERVICE_TOKEN"] == "tok-named-by-env-9"  # the server's own `env` names it
    assert seen["PATH"] == os.environ["PATH"]


@pytest.mark.slow
def test_the_readme_uvx_example_starts_behind_this_machines_tls(tmp_path: Path) -> None:
    """`--server-command "uvx mcp-server-time"`, as the README shows it: uvx needs the
    certificate settings to reach PyPI here (a TLS-inspecting proxy), and gets them."""
    uvx = shutil.which("uvx", path=str(Path(sys.executable).parent))
    assert uvx, "uv is a dev dependency: pip install -e '.[dev]'"
    path = f"{Path(uvx).parent}{os.pathsep}{os.environ['PATH']}"
    cache = REPO_ROOT / ".cache" / "uv"
    script = [tool_calls(("main__get_current_time", {"timezone": "Asia/Tokyo"})), text("late")]
    with ScriptedLLM(*script) as llm:
        proc = run_with_env(
            ["--server-command", "uvx mcp-server-time", "-p", "time in Tokyo?"],
            tmp_path,
            llm.base_url,
            {"PATH": path, "UV_CACHE_DIR": str(cache)},
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    tool = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "Asia/Tokyo" in tool and "+09:00" in tool
