"""MCP Apps as people use them (issue 32 #7), in Debian's chromium through `run_mcp.py -i`.

The reference PDF viewer starts its PDF.js worker from a `blob:` URL; the page of these
tests (tests/support/apps_page_server.py) does the same, and its worker, which inherits the
page's policy, still reaches nothing the page may not.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.apps.test_apps_browser import URL, ReplProcess, app_frame, browser
from tests.apps.test_apps_isolation import local_service, page_server
from tests.support.cli import RUN_MCP, cli_env, mcp_json
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.terminal import Terminal

__all__ = ["browser"]  # the shared fixture
pytestmark = pytest.mark.slow
playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

STARTS_A_BLOB_WORKER = """
initialized.then(() => {
  const code = `postMessage("worker " + (20 + 1));
    fetch("LOCAL").then(() => postMessage("reached"), () => postMessage("blocked"));`;
  const blob = new Blob([code], {type: "text/javascript"});
  try {
    const worker = new Worker(URL.createObjectURL(blob));
    worker.onmessage = (event) => show(event.data === "worker 21" ? "worker" : "fetch", event.data);
    worker.onerror = () => show("worker", "refused");
  } catch (error) {
    show("worker", "refused: " + error);
  }
});
"""


def test_a_page_starts_its_worker_from_a_blob_and_the_worker_keeps_the_page_s_policy(
    tmp_path: Path, browser: Any
) -> None:
    with local_service() as (local, hosts):
        script = STARTS_A_BLOB_WORKER.replace("LOCAL", local)
        config = mcp_json(tmp_path, {"viewer": page_server(tmp_path, "viewer", script)})
        with ScriptedLLM() as llm:
            repl = ReplProcess(config, tmp_path, llm.base_url)
            try:
                repl.send("/app viewer__show")
                page = browser.new_page()
                page.goto(repl.wait_for(URL)["url"])
                app = app_frame(page)
                expect(app.locator("#worker")).to_have_text("worker 21")
                expect(app.locator("#fetch")).to_have_text("blocked")  # connect-src 'none'
                page.close()
                code, _ = repl.finish()
            finally:
                repl.kill()
    assert code == 0, "\n".join(repl.seen)
    assert hosts == []


SHOWS_THE_RESULT = """
initialized.then(() => show("loaded", "yes"));
toolResult.then((text) => show("result", text));
"""


def test_a_reloaded_page_is_initialized_again_and_shows_its_result(
    tmp_path: Path, browser: Any
) -> None:
    """Reload, as a person does when a page looks stuck: the page starts again and gets
    the tool's result again (it waited forever: the view counted as initialized)."""
    config = mcp_json(tmp_path, {"viewer": page_server(tmp_path, "viewer", SHOWS_THE_RESULT)})
    script = [tool_calls(("viewer__show", {"note": "page one"})), text("shown")]
    with ScriptedLLM(*script) as llm:
        repl = ReplProcess(config, tmp_path, llm.base_url)
        try:
            repl.send("show it")
            page = browser.new_page()
            page.goto(repl.wait_for(URL)["url"])
            expect(app_frame(page).locator("#result")).to_have_text("viewer says page one")
            for _ in range(2):
                page.reload()
                app = app_frame(page)
                expect(app.locator("#loaded")).to_have_text("yes")
                expect(app.locator("#result")).to_have_text("viewer says page one")
            page.close()
            code, _ = repl.finish()
        finally:
            repl.kill()
    assert code == 0, "\n".join(repl.seen)


TICKS = """
initialized.then(async () => {
  for (const n of [1, 2, 3]) {
    const reply = await request("tools/call", {name: "tick", arguments: {n}});
    show("tick" + n, reply.result ? reply.result.content[0].text : "refused");
  }
});
"""


def test_a_page_s_own_tools_are_asked_once_for_the_page_and_every_call_is_still_gated(
    tmp_path: Path, browser: Any
) -> None:
    """A viewer calls its app-only tool again and again while the browser waits: the
    question offers `[p]age`, and after it the page's own tools run unasked — each call
    still passes the gate (recorded in the transcript with the page as its origin)."""
    config = mcp_json(tmp_path, {"viewer": page_server(tmp_path, "viewer", TICKS)})
    with ScriptedLLM() as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-apps-test") | {"TERM": "xterm-256color"}
        for name in ("PYTEST_CURRENT_TEST", "COLUMNS", "LINES"):
            env.pop(name, None)
        command = [sys.executable, RUN_MCP, "--mcp-config", str(config), "--no-browser"]
        terminal = Terminal(command, cwd=tmp_path, env=env, log=tmp_path / "screen.txt")
        try:
            terminal.wait_for(r"tools from 1 server")
            terminal.type("/app viewer__show")
            terminal.wait_for(r"app viewer › show: http://127\.0\.0\.1:\d+/\S+/")
            url = re.search(r"http://127\.0\.0\.1:\d+/\S+/", terminal.screen())
            assert url is not None
            page = browser.new_page()
            page.goto(url[0])
            question = r"Run viewer › tick \{\"n\": 1\}\? .*this \[p\]age's own tools:"
            terminal.wait_for(question)
            terminal.type("p")
            terminal.wait_for(r"app-only tools run without asking while this page is open")
            app = app_frame(page)
            for n in (1, 2, 3):
                expect(app.locator(f"#tick{n}")).to_have_text(f"viewer tick {n}")
            screen = terminal.save()
            page.close()
            terminal.type("/exit")
            assert terminal.exit_code() == 0
        finally:
            terminal.close()
    assert screen.count("Run viewer › tick") == 1, screen
    assert screen.count("asks to run a tool") == 1, screen
    [session] = (tmp_path / "state" / "sessions").glob("*.jsonl")
    records = [json.loads(line) for line in session.read_text().splitlines()]
    calls = [r for r in records if r.get("type") == "tool_call" and r.get("tool") == "tick"]
    assert [c["arguments"]["n"] for c in calls] == [1, 2, 3], records
    assert all(c["origin"].startswith("app viewer › show") for c in calls)
