"""MCP Apps shown by the REPL's app host, in a real browser.

`python run_mcp.py -i --no-browser` runs as a user runs it (input piped, so it prints the
page's URL), with the npm example servers `server-system-monitor` and
`server-basic-vanillajs` 2.0.3 and the scripted model. Debian's `chromium`, driven headless
by Playwright (pointed at the system executable: nothing is downloaded), opens the URL.
Asserted: what the app itself draws (its DOM, a screenshot), its tool calls reaching the
server and the answers reaching the app, a `ui/message` asked (and, from a pipe, refused),
an unapproved tool refused with an error for the app, and the host refusing requests without
its token and cookie and listening on 127.0.0.1 only. (test_apps_isolation.py: what keeps
one page from the person's machine, from other pages and from other local users.)
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import queue
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.support.asgi_thread import serve_handler
from tests.support.cli import RUN_MCP, cli_env, mcp_json, start_cli
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import SUPPORT, npm_server_js
from tests.support.terminal import Terminal

pytestmark = pytest.mark.slow
playwright_api = pytest.importorskip("playwright.sync_api")

WAIT = 30.0  # seconds for anything the REPL or the page should do
playwright_api.expect.set_options(timeout=WAIT * 1000)  # a busy 2-core CI is slow to draw
URL = re.compile(r"app (?P<title>.+?): (?P<url>http://127\.0\.0\.1:\d+/\S+/)$")
PUBLIC_NAME = "declared.test"  # chromium resolves it to 127.0.0.1: a "public" host for a test
BROWSER_ARGS = ["--no-sandbox", f"--host-resolver-rules=MAP {PUBLIC_NAME} 127.0.0.1"]


class ReplProcess:
    """`run_mcp.py -i` with piped input; its stderr lines collected as they come."""

    def __init__(
        self, config: Path, workdir: Path, base_url: str, browser: str | None = None
    ) -> None:
        env = cli_env(workdir, base_url, "sk-apps-test")
        flags = ["--no-browser"] if browser is None else []
        if browser is not None:
            env["BROWSER"] = browser
        args = ["--mcp-config", str(config), "-i", *flags]
        self.proc = start_cli(args, workdir, env, stdin_pipe=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert self.proc.stderr is not None
        threading.Thread(target=self._pump, args=(self.proc.stderr,), daemon=True).start()

    def _pump(self, stream: Any) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, pattern: str | re.Pattern[str], since: int = 0) -> re.Match[str]:
        """The first stderr line from line `since` on that matches (waiting for it)."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        for line in self.seen[since:]:
            if found := regex.search(line):
                return found
        deadline = time.monotonic() + WAIT
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(line)
            if found := regex.search(line):
                return found
        raise AssertionError(f"no stderr line matched {regex.pattern!r}:\n" + "\n".join(self.seen))

    def finish(self) -> tuple[int, str]:
        """End the input (Ctrl-D): the REPL exits, tearing its apps down first."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        out = self.proc.stdout.read() if self.proc.stdout else ""
        return self.proc.wait(timeout=WAIT), out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def chromium_path() -> str:
    found = shutil.which("chromium")
    assert found, "Debian's chromium is missing: bash scripts/install_apt.sh chromium"
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium_path(), args=BROWSER_ARGS)
        yield launched
        launched.close()


def app_config(tmp_path: Path, **servers: dict[str, Any]) -> Path:
    config = mcp_json(tmp_path, servers)
    return config


def npm_app(package: str, **extra: Any) -> dict[str, Any]:
    return {"command": "node", "args": [str(npm_server_js(package)), "--stdio"], **extra}


def app_frame(page: Any) -> Any:
    """The app's own document: host page › sandbox proxy › the app."""
    return page.frame_locator("#app").frame_locator("iframe")


def test_system_monitor_shows_the_tools_result_and_polls_its_server(
    tmp_path: Path, browser: Any
) -> None:
    trusted = npm_app("server-system-monitor", trust=["get-system-info", "poll-system-stats"])
    config = app_config(tmp_path, sysmon=trusted)
    script = [
        tool_calls(("sysmon__get-system-info", {})),
        text("Here is your system."),
        tool_calls(("sysmon__get-system-info", {})),
        text("Updated."),
    ]
    with ScriptedLLM(*script) as llm:
        repl = ReplProcess(config, tmp_path, llm.base_url)
        try:
            repl.send("how is my machine?")
            url = repl.wait_for(URL)["url"]
            page = browser.new_page(viewport={"width": 880, "height": 720})
            page.goto(url)
            first = page.url  # the page itself (the link was spent on the way)
            app = app_frame(page)
            # The tool's result, pushed as ui/notifications/tool-result, drawn by the app.
            hostname = socket.gethostname()
            playwright_api.expect(app.locator("#info-hostname")).to_have_text(hostname)
            playwright_api.expect(app.locator("h1.title")).to_have_text("System Monitor")
            # ui/notifications/size-changed: the frame takes the height the app asked for
            sized = re.compile(r"height: \d+px")
            playwright_api.expect(page.locator("#app")).to_have_attribute("style", sized)
            # The result starts the app's polling: its own tools/call of the app-only
            # poll-system-stats, through the host to the server and back.
            playwright_api.expect(app.locator("#poll-toggle-btn")).to_have_text("Stop")
            percent = app.locator("#memory-percent")
            playwright_api.expect(percent).to_have_text(re.compile(r"^\d+(\.\d+)?%$"))
            status = app.locator("#status-text")  # the time of the last poll
            playwright_api.expect(status).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
            shot = page.screenshot(path=str(tmp_path / "system-monitor.png"))
            if target := os.environ.get("MCP_AGENT_APPS_SCREENSHOT"):  # the README's image
                Path(target).write_bytes(shot)
            assert shot.startswith(b"\x89PNG") and len(shot) > 10_000
            # No more than the page's metadata asks for (no csp: the spec's default, no
            # network at all), also for the app's own origin, and no popups.
            body = app.locator("body")
            fetched = "() => fetch(location.origin).then(() => 'fetched', () => 'blocked')"
            assert body.evaluate(fetched) == "blocked"
            assert body.evaluate("() => window.open('https://example.com') === null")
            app.locator("#poll-toggle-btn").click()  # a person's click reaches the app
            playwright_api.expect(app.locator("#status-text")).to_have_text("Stopped")
            # The tool runs again: a new view of its own, in the same tab (the old one is
            # torn down), showing the new result (so it polls again).
            mark = len(repl.seen)
            repl.send("and now?")
            second = repl.wait_for(URL, since=mark)["url"]
            assert second != url
            page.wait_for_url(lambda now: now != first)
            playwright_api.expect(app.locator("#poll-toggle-btn")).to_have_text("Stop")
            page.close()
            code, out = repl.finish()
        finally:
            repl.kill()
    assert code == 0
    assert "Here is your system." in out and "Updated." in out

    for request in llm.requests:  # the app-only tool never reached the model
        assert "poll-system-stats" not in json.dumps(request.get("tools", []))
    llm.assert_complete()


def test_basic_app_message_is_asked_and_an_unapproved_tool_is_refused(
    tmp_path: Path, browser: Any
) -> None:
    config = app_config(tmp_path, clock=npm_app("server-basic-vanillajs"))
    console: list[str] = []
    with ScriptedLLM() as llm:
        repl = ReplProcess(config, tmp_path, llm.base_url)
        try:
            repl.send("/app clock__get-time")
            url = repl.wait_for(URL)["url"]
            page = browser.new_page()
            page.on("console", lambda message: console.append(message.text))
            page.goto(url)
            app = app_frame(page)
            playwright_api.expect(app.locator("#get-time-btn")).to_have_text("Get Server Time")
            # get-time may change things (no annotations) and nobody approved it here:
            # refused, and the app is told so (it shows its error).
            app.locator("#get-time-btn").click()
            playwright_api.expect(app.locator("#server-time")).to_have_text("[ERROR]")
            repl.wait_for(r"clock › get-time refused")
            # ui/message: asked first (test_apps_isolation.py has the yes); with no
            # terminal to ask, declined, and the model never hears of it.
            app.locator("#message-text").fill("Please summarise the server time.")
            app.locator("#send-message-btn").click()
            repl.wait_for(
                r'App clock › Get Time wants to send a message as you: "Please summarise the '
                r'server time\." — send it\? \[y\]es / \[n\]o — no: input is not a terminal'
            )
            # logging
            app.locator("#log-text").fill("a line from the app")
            app.locator("#send-log-btn").click()
            repl.wait_for(r"\[info\] a line from the app")
            # open-link: asked, and with no terminal to ask, declined (never opened)
            app.locator("#open-link-btn").click()
            repl.wait_for(r"asks to open https://modelcontextprotocol\.io/.* no: input is not")
            code, out = repl.finish()
            # Teardown at the end of the session: the app was asked and answered.
            playwright_api.expect(page.locator("body")).to_have_attribute("data-state", "ended")
            page.close()
        finally:
            repl.kill()
    assert code == 0, "\n".join(repl.seen)
    assert llm.requests == []
    assert any("App is being torn down" in line for line in console)


def test_host_refuses_requests_without_its_token_and_listens_on_loopback_only(
    tmp_path: Path,
) -> None:
    config = app_config(tmp_path, clock=npm_app("server-basic-vanillajs"))
    with ScriptedLLM() as llm:
        repl = ReplProcess(config, tmp_path, llm.base_url)
        try:
            repl.send("/app clock__get-time")
            link = httpx2.URL(repl.wait_for(URL)["url"])
            with httpx2.Client() as client:
                opened = client.get(link)  # a one-time link: a cookie, and on to the page
                assert opened.status_code == 303
                url = link.join(opened.headers["location"])
                token = url.path.strip("/").split("/")[0]
                port = url.port
                assert port is not None  # the page URL names its port
                assert client.get(str(url)).status_code == 200  # the client holds the cookie
                wrong = url.copy_with(path=url.path.replace(token, "x" * len(token)))
                assert client.get(str(wrong)).status_code == 404
                assert client.get(str(url.copy_with(path="/"))).status_code == 404
                no_token = url.copy_with(path="/" + "/".join(url.path.split("/")[2:]))
                assert client.get(str(no_token)).status_code == 404
                # DNS rebinding: the right token under another name is refused
                assert (
                    client.get(str(url), headers={"Host": f"evil.test:{port}"}).status_code == 403
                )
                # another site's script in the user's browser
                evil = {"Origin": "http://evil.test"}
                assert (
                    client.post(str(url) + "send", content=b"{}", headers=evil).status_code == 403
                )
            assert listening_addresses(port) == {"127.0.0.1"}
            with pytest.raises(OSError):  # 127.0.1.1 is loopback too, but not bound
                socket.create_connection(("127.0.1.1", port), timeout=2).close()
            code, _ = repl.finish()
        finally:
            repl.kill()
    assert code == 0


def test_the_page_opens_with_the_browser_named_in_BROWSER(tmp_path: Path) -> None:
    """Python's webbrowser, so $BROWSER is honoured (here: a command that records the URL)."""
    opened = tmp_path / "opened.txt"
    recorder = tmp_path / "browser.py"
    recorder.write_text(
        f"import sys, pathlib\npathlib.Path({str(opened)!r}).write_text(sys.argv[1])\n"
    )
    config = app_config(tmp_path, clock=npm_app("server-basic-vanillajs"))
    with ScriptedLLM() as llm:
        repl = ReplProcess(
            config, tmp_path, llm.base_url, browser=f"{sys.executable} {recorder} %s"
        )
        try:
            repl.send("/app clock__get-time")
            url = repl.wait_for(URL)["url"]
            deadline = time.monotonic() + WAIT
            while not (opened.exists() and opened.read_text()) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert opened.read_text() == url
            code, _ = repl.finish()
        finally:
            repl.kill()
    assert code == 0


def test_the_host_keeps_the_rules_a_page_cannot_bend(tmp_path: Path, browser: Any) -> None:
    """A hand-written page (tests/support/apps_probe_server.py) asks for what it may and may not
    have: a model-only tool is refused, an app-only read-only tool runs, its server's
    resource is read, and only the origin its metadata declares is reachable."""
    with live_origin() as declared, live_origin() as undeclared:
        # declared under a public-looking name: a loopback origin would be refused itself
        public = declared.replace("127.0.0.1", PUBLIC_NAME)
        probe = {"command": sys.executable, "args": [str(PROBE), public, undeclared]}
        config = app_config(tmp_path, probe=probe)
        with ScriptedLLM(tool_calls(("probe__show", {})), text("shown")) as llm:
            repl = ReplProcess(config, tmp_path, llm.base_url)
            try:
                repl.send("show the probe")
                page = browser.new_page()
                page.goto(repl.wait_for(URL)["url"])
                app = app_frame(page)
                expect = playwright_api.expect
                expect(app.locator("#init")).to_have_text("2026-01-26 run_mcp")
                expect(app.locator("#model-only")).to_contain_text("error: tool 'model_only'")
                expect(app.locator("#app-only")).to_contain_text("app-only ran")
                expect(app.locator("#read")).to_contain_text("data from the probe server")
                expect(app.locator("#declared")).to_have_text("reached")
                expect(app.locator("#undeclared")).to_have_text("blocked")
                page.close()
                code, _ = repl.finish()
            finally:
                repl.kill()
        names = [t["function"]["name"] for t in llm.requests[0]["tools"]]
    assert code == 0
    assert "probe__model_only" in names and not any("app_only" in n for n in names)


PROBE = SUPPORT / "apps_probe_server.py"


@contextlib.contextmanager
def live_origin() -> Iterator[str]:
    """A web server on 127.0.0.1 that answers every GET (an origin a page could reach)."""

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    with serve_handler(Ok) as origin:
        yield origin


def listening_addresses(port: int) -> set[str]:
    """Local addresses with a listening TCP socket on `port` (Linux /proc/net/tcp{,6})."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if int(hex_port, 16) == port and fields[3] == "0A":  # LISTEN
                if len(address) == 8:
                    found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
                else:
                    found.add(address)
    return found


def test_an_apps_tool_call_is_approved_by_the_question_in_the_terminal(
    tmp_path: Path, browser: Any
) -> None:
    """At the prompt (nothing running), the app's call interrupts it with the same question
    the model's calls get; answering yes runs the tool and the app shows its answer."""
    config = app_config(tmp_path, clock=npm_app("server-basic-vanillajs"))
    with ScriptedLLM() as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-apps-test") | {"TERM": "xterm-256color"}
        for name in ("PYTEST_CURRENT_TEST", "COLUMNS", "LINES"):
            env.pop(name, None)
        command = [sys.executable, RUN_MCP, "--mcp-config", str(config), "--no-browser"]
        terminal = Terminal(command, cwd=tmp_path, env=env, log=tmp_path / "screen.txt")
        try:
            terminal.wait_for(r"tools from 1 server")
            terminal.type("/app clock__get-time")
            terminal.wait_for(r"app clock › Get Time: http://127\.0\.0\.1:\d+/\S+/")
            url = re.search(r"http://127\.0\.0\.1:\d+/\S+/", terminal.screen())
            assert url is not None
            page = browser.new_page()
            page.goto(url[0])
            app = app_frame(page)
            playwright_api.expect(app.locator("#get-time-btn")).to_have_text("Get Server Time")
            app.locator("#get-time-btn").click()
            terminal.wait_for(r"app clock › Get Time asks to run a tool:")
            terminal.wait_for(r"Run clock › get-time \{\}\? \[y\]es / \[n\]o / \[a\]lways")
            terminal.type("y")
            time_text = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
            playwright_api.expect(app.locator("#server-time")).to_have_text(time_text)
            page.close()
            terminal.leave()
        finally:
            terminal.close()
    assert llm.requests == []  # the app's call never involved the model


# A PreToolUse hook of the user's that blocks get-time, whoever asks for it.
BLOCK_GET_TIME = """
import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(os.path.dirname(__file__), "seen.json"), "w") as fh:
    json.dump(event, fh)
print("get-time is off today", file=sys.stderr)
sys.exit(2)
"""


def test_a_hook_that_blocks_a_tool_for_the_model_blocks_a_page_s_call_too(
    tmp_path: Path, browser: Any
) -> None:
    """The page's call passes the same gate as the model's (issue 29, defect 8): the user's
    PreToolUse hook sees it and blocks it although `trust` approves the tool, the app is
    told, and the transcript records the call and who made it."""
    hook = tmp_path / "hooks" / "block.py"
    hook.parent.mkdir()
    hook.write_text(BLOCK_GET_TIME, encoding="utf-8")
    hooks_json = tmp_path / "xdg-config" / "mcp-agent" / "hooks.json"
    hooks_json.parent.mkdir(parents=True)
    entry = {"type": "command", "command": f"{sys.executable} {hook}"}
    hooks_json.write_text(
        json.dumps({"hooks": {"PreToolUse": [{"matcher": "get-time", "hooks": [entry]}]}})
    )
    config = app_config(tmp_path, clock=npm_app("server-basic-vanillajs", trust=["get-time"]))
    with ScriptedLLM() as llm:
        repl = ReplProcess(config, tmp_path, llm.base_url)
        try:
            repl.send("/app clock__get-time")
            url = repl.wait_for(URL)["url"]
            page = browser.new_page()
            page.goto(url)
            app = app_frame(page)
            playwright_api.expect(app.locator("#get-time-btn")).to_have_text("Get Server Time")
            app.locator("#get-time-btn").click()
            playwright_api.expect(app.locator("#server-time")).to_have_text("[ERROR]")
            repl.wait_for(r"clock › get-time refused")
            page.close()
            code, _ = repl.finish()
        finally:
            repl.kill()
    assert code == 0, "\n".join(repl.seen)
    seen = json.loads((hook.parent / "seen.json").read_text())
    assert seen["hook_event_name"] == "PreToolUse" and seen["mcp_server"] == "clock"
    assert seen["mcp_tool"] == "get-time"
    transcript = next((tmp_path / "state" / "sessions").glob("*.jsonl")).read_text()
    [record] = [
        r for line in transcript.splitlines() if (r := json.loads(line))["type"] == "tool_call"
    ]
    assert record["origin"] == "app clock › Get Time" and record["denied"] is True
    assert record["server"] == "clock" and "get-time is off today" in record["output"]
    assert llm.requests == []
