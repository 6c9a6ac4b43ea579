"""Servers nobody here wrote, configured the way their READMEs say (an mcpServers file, as a
Claude Desktop user would paste it; `node dist/index.js` stands in for `npx -y`, `uvx` for
the installed command): the calls a user would make return the right content.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent.config.build import build_settings
from agent.tools.catalog import Catalog
from agent.tools.registry import ToolRegistry
from tests.support.servers import npm_server_js, sqlite_server_bin

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@asynccontextmanager
async def pasted(tmp_path: Path, servers: dict[str, Any]) -> AsyncIterator[ToolRegistry]:
    """A registry over an mcpServers file written as a user would write it."""
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": servers}))
    settings = build_settings(
        config_path=None,
        mcp_config_path=config,
        cli_server=None,
        environ={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        workspace=tmp_path,
    ).model_copy(update={"state_dir": tmp_path / "state"})
    async with ToolRegistry(settings, environ={"PATH": "/usr/bin:/bin"}) as registry:
        with anyio.fail_after(60):
            assert await registry.connect_all() == []
        yield registry


def filesystem(*folders: Path, **extra: Any) -> dict[str, Any]:
    js = npm_server_js("server-filesystem")
    return {"command": "node", "args": [str(js), *map(str, folders)], **extra}


async def test_server_filesystem_serves_exactly_the_folders_in_its_args(tmp_path: Path) -> None:
    photos, notes = tmp_path / "photos", tmp_path / "notes"
    for folder in (photos, notes):
        folder.mkdir()
    (photos / "a.txt").write_text("in photos")
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    async with pasted(tmp_path, {"files": filesystem(photos, notes)}) as registry:
        allowed = await registry.call("files__list_allowed_directories", {})
        assert str(photos) in allowed.text and str(notes) in allowed.text
        assert str(tmp_path) + "\n" not in allowed.text  # not the working directory
        read = await registry.call("files__read_text_file", {"path": str(photos / "a.txt")})
        assert "in photos" in read.text and not read.is_error
        secret = {"path": str(tmp_path / "secret.txt")}
        outside = await registry.call("files__read_text_file", secret)
        assert outside.is_error and "TOPSECRET" not in outside.text
        assert registry.servers["files"].roots == ()  # offered none


async def test_server_filesystem_with_roots_configured_serves_those(tmp_path: Path) -> None:
    args_dir, root = tmp_path / "from-args", tmp_path / "from-roots"
    for folder in (args_dir, root):
        folder.mkdir()
    (root / "r.txt").write_text("served by root")
    server = filesystem(args_dir, roots=[str(root)])
    async with pasted(tmp_path, {"files": server}) as registry:
        assert registry.servers["files"].roots == (root,)
        with anyio.fail_after(20):  # it asks for the roots right after the handshake
            for _ in range(1000):  # each round trip gives it time to apply them
                allowed = await registry.call("files__list_allowed_directories", {})
                if str(root) in allowed.text:
                    break
        assert str(root) in allowed.text and str(args_dir) not in allowed.text
        read = await registry.call("files__read_text_file", {"path": str(root / "r.txt")})
        assert "served by root" in read.text


async def test_server_memory_remembers_what_it_is_told(tmp_path: Path) -> None:
    store = tmp_path / "memory.jsonl"
    server = {
        "command": "node",
        "args": [str(npm_server_js("server-memory"))],
        "env": {"MEMORY_FILE_PATH": str(store)},
    }
    async with pasted(tmp_path, {"memory": server}) as registry:
        said = ["wrote the first program"]
        entity = {"name": "Ada", "entityType": "person", "observations": said}
        created = await registry.call("memory__create_entities", {"entities": [entity]})
        assert not created.is_error
        found = await registry.call("memory__search_nodes", {"query": "Ada"})
        assert "wrote the first program" in found.text
        assert "Ada" in store.read_text()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit and an unstaged change."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.org"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    (repo / "hello.txt").write_text("hi\n")
    subprocess.run([*git, "add", "hello.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first commit here"], check=True)
    (repo / "hello.txt").write_text("hi again\n")
    return repo


async def test_mcp_server_git_reads_the_repository(tmp_path: Path, repo: Path) -> None:
    args = ["-m", "mcp_server_git", "--repository", str(repo)]
    server = {"command": sys.executable, "args": args}
    async with pasted(tmp_path, {"git": server}) as registry:
        log = await registry.call("git__git_log", {"repo_path": str(repo)})
        assert "first commit here" in log.text
        diff = await registry.call("git__git_diff_unstaged", {"repo_path": str(repo)})
        assert "+hi again" in diff.text
        elsewhere = await registry.call("git__git_status", {"repo_path": str(tmp_path)})
        assert elsewhere.is_error or "outside the allowed repository" in elsewhere.text


async def test_mcp_server_sqlite_resources_without_templates(tmp_path: Path) -> None:
    db = tmp_path / "test.db"
    server = {"command": str(sqlite_server_bin()), "args": ["--db-path", str(db)]}
    async with pasted(tmp_path, {"sqlite": server}) as registry:
        catalog = Catalog(registry)
        await catalog.refresh()
        assert catalog.errors == {}  # no templates (-32601): not a warning
        assert [str(r.uri) for _, r in catalog.resources] == ["memo://insights"]
        assert [p.name for _, p in catalog.prompts] == ["mcp-demo"]
        sql = "CREATE TABLE birds (name TEXT)"
        assert not (await registry.call("sqlite__create_table", {"query": sql})).is_error
        insert = "INSERT INTO birds VALUES ('wren')"
        assert not (await registry.call("sqlite__write_query", {"query": insert})).is_error
        rows = await registry.call("sqlite__read_query", {"query": "SELECT name FROM birds"})
        assert "wren" in rows.text
        await registry.call("sqlite__append_insight", {"insight": "wrens are small"})
        assert "wrens are small" in await catalog.read("sqlite", "memo://insights")
