"""Trust per tool in the config: `trust` (true, or the server's own tool names) approves
those tools without asking, in the REPL and in single-shot runs without --yes; the
approval prompt's "always" is kept by `/approve save` in a file of our own (never in the
mcpServers file, which may be another program's or a symlink), per file, server and what
that server runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.config import saved_approvals
from agent.config.build import build_settings
from agent.config.settings import Settings
from agent.loop.approval import ApprovalPolicy, ApprovalRequest
from agent.tools.registry import ToolRegistry
from tests.support.cli import mcp_json, run_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.fake_model import FakeModel, answer, calls
from tests.support.repl import drive
from tests.support.servers import time_server_command

pytestmark = pytest.mark.anyio


def write_config(tmp_path: Path, **extra: object) -> Path:
    command, args = time_server_command()
    return mcp_json(tmp_path, {"time": {"command": command, "args": args, **extra}}, mode=0o640)


def settings_from(config: Path, tmp_path: Path):
    return build_settings(
        config_path=None,
        mcp_config_path=config,
        cli_server=None,
        environ={"MCP_AGENT_STATE_DIR": str(tmp_path / "state")},
        workspace=tmp_path,
    )


@pytest.fixture
def registry_settings(tmp_path: Path) -> Settings:
    return settings_from(write_config(tmp_path), tmp_path)


@pytest.fixture
def registry_options() -> dict[str, Any]:
    return {"reserved_names": {"terminate"}}


@pytest.fixture
def registry(registry: ToolRegistry) -> ToolRegistry:
    """The shared fixture's registry, its tools as if they carried no annotations."""
    for name, spec in list(registry.tools.items()):
        registry.tools[name] = spec.__class__(**{**spec.__dict__, "read_only": False})
    return registry


async def test_always_then_approve_save_keeps_it_in_our_file_and_the_next_run_honours_it(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    model = FakeModel([calls(("time__get_current_time", {"timezone": "UTC"})), answer("one")])
    policy = ApprovalPolicy(mode="ask")
    config = tmp_path / "mcp.json"
    before = config.read_bytes()
    out, _ = await drive(
        registry,
        model,
        ["t1", "a", "/approve save"],
        tmp_path,
        approval=policy,
        settings=settings_from(config, tmp_path),
    )
    kept = tmp_path / "state" / "approvals.json"
    said = " ".join(out.split())  # the console wraps long lines
    assert "/approve save remembers it in approvals.json in the state folder" in said
    assert f"time trust += get_current_time, for {config} kept in {kept}" in said
    assert config.read_bytes() == before  # the mcpServers file is never rewritten
    assert kept.stat().st_mode & 0o777 == 0o600
    settings = settings_from(config, tmp_path)
    assert settings.trusts("time", "get_current_time")
    assert not settings.trusts("time", "convert_time")
    trusted = ApprovalPolicy(mode="ask", ask=None, trusted=settings.trusts)  # a script
    spec = registry.tools["time__get_current_time"]
    request = ApprovalRequest("time", spec.name, "time__get_current_time", {}, spec)
    assert (await trusted.check(request)).allowed
    other = registry.tools["time__convert_time"]
    refused = ApprovalRequest("time", other.name, "time__convert_time", {}, other)
    assert not (await trusted.check(refused)).allowed


def test_a_trusted_tool_runs_in_a_single_shot_run_without_yes(tmp_path: Path) -> None:
    """mcp-server-git's tools carry no approval the agent would honour without asking
    (git_add writes); `trust` lets a script run exactly the tools named."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    args = ["-m", "mcp_server_git", "--repository", str(repo)]
    server = {"command": sys.executable, "args": args, "trust": ["git_add"]}
    config = mcp_json(tmp_path, {"git": server})
    script = [
        tool_calls(("git__git_add", {"repo_path": str(repo), "files": ["a.txt"]})),
        tool_calls(("git__git_reset", {"repo_path": str(repo)})),
        text("done"),
    ]
    with ScriptedLLM(*script) as llm:
        proc = run_cli(
            ["--mcp-config", str(config), "-p", "stage it", "--output", "json"],
            tmp_path,
            base_url=llm.base_url,
        )
    assert proc.returncode == 0, proc.stderr
    calls_made = json.loads(proc.stdout)["tool_calls"]
    assert not calls_made[0]["is_error"]  # trusted: ran
    assert calls_made[1]["is_error"] and "Not run" in calls_made[1]["output"]  # not trusted


def test_kept_approvals_follow_what_the_server_runs_and_leave_symlinks_links(
    tmp_path: Path,
) -> None:
    """Claude Desktop's config, a symlink into a dotfiles folder, is never written; our own
    approvals file, a symlink too, is written through; an entry changed to run something
    else loses the approvals."""
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    desktop = write_config(dotfiles)
    link = tmp_path / "claude_desktop_config.json"
    link.symlink_to(desktop)
    state = tmp_path / "state"
    state.mkdir()
    (dotfiles / "approvals.json").write_text("{}")
    (state / "approvals.json").symlink_to(dotfiles / "approvals.json")
    before = desktop.read_bytes()
    cfg = settings_from(link, tmp_path).servers[0]
    print_ = saved_approvals.fingerprint(cfg.command, cfg.args, cfg.url)
    path, added = saved_approvals.save(state, str(link), "time", print_, ["get_current_time"])
    assert added == ["get_current_time"] and path == state / "approvals.json"
    assert desktop.read_bytes() == before and link.is_symlink()
    assert (state / "approvals.json").is_symlink()  # written through: the link is kept
    assert "get_current_time" in (dotfiles / "approvals.json").read_text()
    assert settings_from(link, tmp_path).trusts("time", "get_current_time")
    assert settings_from(desktop, tmp_path).trusts("time", "get_current_time")  # same file
    command, args = time_server_command()
    other = {"command": command, "args": [*args, "--other"]}
    desktop.write_text(json.dumps({"mcpServers": {"time": other}}))
    assert not settings_from(link, tmp_path).trusts("time", "get_current_time")
