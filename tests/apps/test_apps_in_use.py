"""MCP Apps as people use them (issue 32 #7), in Debian's chromium through `run_mcp.py`.

The reference PDF viewer (`@modelcontextprotocol/server-pdf`) is run as a person meets it:
without roots its error says how to offer a folder; with one, PDF.js (its worker a `data:`
module that a `blob:` worker imports) shows the file, its many app-only calls are asked
once with `[p]age`, and a reload shows it again. The pages of tests/support/apps_page_server.py
show each piece alone: a blob worker that keeps the page's policy, a reload, `[p]age`.
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
from tests.support.servers import npm_server_js
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
            terminal.leave()
        finally:
            terminal.close()
    assert screen.count("Run viewer › tick") == 1, screen
    assert screen.count("asks to run a tool") == 1, screen
    [session] = (tmp_path / "state" / "sessions").glob("*.jsonl")
    records = [json.loads(line) for line in session.read_text().splitlines()]
    calls = [r for r in records if r.get("type") == "tool_call" and r.get("tool") == "tick"]
    assert [c["arguments"]["n"] for c in calls] == [1, 2, 3], records
    assert all(c["origin"].startswith("app viewer › show") for c in calls)


def one_page_pdf(text: str) -> bytes:
    """A valid one-page PDF that shows `text` (Helvetica, not embedded)."""
    stream = f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    trailer = b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n"
    return out + trailer % (len(objects) + 1, xref)


def test_the_reference_pdf_viewer_opens_a_local_file_asks_once_and_survives_a_reload(
    tmp_path: Path, browser: Any
) -> None:
    """@modelcontextprotocol/server-pdf as a person meets it: without roots its error
    hints at them; with a folder offered, the viewer (PDF.js and its blob worker) shows the
    file, its many read_pdf_bytes calls asked once with [p]age, and a reload shows it again."""
    docs = tmp_path / "docs"
    docs.mkdir()
    pdf = docs / "hello.pdf"
    pdf.write_bytes(one_page_pdf("Hello from the PDF"))
    entry = {"command": "node", "args": [str(npm_server_js("server-pdf")), "--stdio"]}
    config = mcp_json(tmp_path, {"pdf": entry})
    script = [
        tool_calls(("pdf__display_pdf", {"url": str(pdf)})),
        text("not shown"),
        tool_calls(("pdf__display_pdf", {"url": str(pdf)})),
        text("shown"),
    ]
    with ScriptedLLM(*script) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-apps-test") | {"TERM": "xterm-256color"}
        for name in ("PYTEST_CURRENT_TEST", "COLUMNS", "LINES"):
            env.pop(name, None)
        command = [sys.executable, RUN_MCP, "--mcp-config", str(config), "--no-browser"]
        terminal = Terminal(command, cwd=tmp_path, env=env, log=tmp_path / "pdf.screen.txt")
        try:
            terminal.wait_for(r"tools from 1 server", timeout=60)
            terminal.type("show me hello.pdf")
            terminal.wait_for(r"Run pdf › display_pdf")
            terminal.type("y")
            terminal.wait_for(r"not shown")
            terminal.wait_for(r"'pdf' is offered no folders \(MCP roots\)")
            terminal.leave()
        finally:
            terminal.close()
        config = mcp_json(tmp_path, {"pdf": entry | {"roots": [str(docs)]}})
        command = [sys.executable, RUN_MCP, "--mcp-config", str(config), "--no-browser"]
        terminal = Terminal(command, cwd=tmp_path, env=env, log=tmp_path / "pdf2.screen.txt")
        try:
            terminal.wait_for(r"tools from 1 server", timeout=60)
            terminal.type("show me hello.pdf")
            terminal.wait_for(r"Run pdf › display_pdf")
            terminal.type("y")
            terminal.wait_for(r"app pdf › Display PDF: http://127\.0\.0\.1:\d+/\S+/")
            url = re.findall(r"http://127\.0\.0\.1:\d+/\S+/", terminal.screen())[-1]
            page = browser.new_page()
            page.goto(url)
            terminal.wait_for(r"Run pdf › read_pdf_bytes[\s\S]*this \[p\]age's own tools:")
            terminal.type("p")
            app = app_frame(page)
            expect(app.get_by_text("Hello from the PDF")).to_be_visible()
            page.reload()
            expect(app_frame(page).get_by_text("Hello from the PDF")).to_be_visible()
            screen = terminal.save()
            page.close()
            terminal.leave()
        finally:
            terminal.close()
    assert screen.count("Run pdf › read_pdf_bytes") == 1, screen
