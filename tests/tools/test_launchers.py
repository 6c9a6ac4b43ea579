"""Servers started through a launcher that installs them (`uvx`, `npx -y`): waiting for the
download is not a dead server. A stand-in `uvx` (a script of that name that takes a while,
as a first download does, then starts a real server) runs through `run_mcp.py -p`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.config.settings import ServerConfig
from agent.tools.launchers import LAUNCHER_CONNECT_TIMEOUT, connect_timeout, installing_launcher
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import SUPPORT

ENV_SERVER = SUPPORT / "env_server.py"


def fake_launcher(tmp_path: Path, body: str) -> Path:
    """An executable named `uvx`: a Python script with `body` as its code."""
    folder = tmp_path / "bin"
    folder.mkdir()
    launcher = folder / "uvx"
    launcher.write_text(f"#!{sys.executable}\n{body}\n")
    launcher.chmod(0o755)
    return launcher


# A first download: it starts when the client first writes (the agent starts servers
# before its own imports, so a download timed from the spawn could be over before the
# connect starts), takes 2.5 s, then the real server runs on the same stdin.
DOWNLOAD_THEN_SERVE = f"""
import runpy, select, sys, time
select.select([0], [], [])
time.sleep(2.5)
sys.argv = [{str(ENV_SERVER)!r}]
runpy.run_path({str(ENV_SERVER)!r}, run_name="__main__")
"""


def write_config(tmp_path: Path, server: dict[str, object]) -> list[str]:
    (tmp_path / "config.toml").write_text("[agent]\nconnect_timeout = 1\n")
    return [
        "--mcp-config",
        str(mcp_json(tmp_path, {"pkg": server})),
        "--config",
        str(tmp_path / "config.toml"),
    ]


def test_a_launcher_that_downloads_longer_than_connect_timeout_still_connects_and_says_why(
    tmp_path: Path,
) -> None:
    uvx = fake_launcher(tmp_path, DOWNLOAD_THEN_SERVE)
    flags = write_config(tmp_path, {"command": str(uvx), "args": ["some-server"]})
    with ScriptedLLM(tool_calls(("pkg__environment", {})), text("started")) as llm:
        proc = run_cli([*flags, "-p", "go"], tmp_path, base_url=llm.base_url)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "started\n"
    said = "server 'pkg' is still starting after 1 s: uvx may be downloading it (first start); "
    assert said + f"waiting up to {LAUNCHER_CONNECT_TIMEOUT:g} s" in proc.stderr
    assert proc.stderr.count("still starting") == 1


@pytest.mark.slow  # ~10 s: stopping a server that never answered takes the SDK's grace
def test_a_launcher_that_runs_out_of_time_names_the_timeout_key(tmp_path: Path) -> None:
    uvx = fake_launcher(tmp_path, "import time; time.sleep(60)")
    flags = write_config(tmp_path, {"command": str(uvx), "args": ["x"], "timeout": 1.5})
    proc = run_cli([*flags, "-p", "go", "--output", "json"], tmp_path, base_url=None)
    assert proc.returncode == 1, proc.stderr
    error = json.loads(proc.stdout)["error"]
    assert "no answer within 1.5 s (uvx may still be downloading it" in error
    assert f'raise "timeout" (seconds) in its entry in {tmp_path / "mcp.json"}' in error
    assert proc.stderr.count("still starting after 1 s") == 1


def test_which_commands_are_installing_launchers() -> None:
    def server(command: str, *args: str, **kw: object) -> ServerConfig:
        return ServerConfig(name="s", type="stdio", command=command, args=args, **kw)  # type: ignore[arg-type]

    assert installing_launcher(server("npx", "-y", "@scope/pkg")) == "npx"
    assert installing_launcher(server("/usr/local/bin/uvx", "mcp-server-time")) == "uvx"
    assert installing_launcher(server("pipx", "run", "pkg")) == "pipx run"
    assert installing_launcher(server("docker", "run", "-i", "img")) == "docker run"
    assert installing_launcher(server("docker", "exec", "c")) is None
    assert installing_launcher(server("python", "-m", "pkg")) is None
    assert connect_timeout(server("npx", "pkg"), 30) == LAUNCHER_CONNECT_TIMEOUT
    assert connect_timeout(server("npx", "pkg", timeout=12), 30) == 12  # its own wins
    assert connect_timeout(server("node", "x.js"), 30) == 30
