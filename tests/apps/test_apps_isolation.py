"""What keeps an app page to itself, in Debian's chromium (issue 29: 7, 9, 10, 17, 18).

Pages are written by each test and served by tests/support/apps_page_server.py through
`python run_mcp.py -i` as a user runs it; chromium, driven by Playwright, opens the link the
REPL hands out. Asserted: the browser's link opens the page once and the page then needs the
cookie the link left (another local user reads the link in /proc); each server's pages have
their own origin (one cannot read another's localStorage); a declared CSP entry that points at
this machine is refused, told, and unreachable; the sandbox page carries `webrtc 'block'` and
a Permissions-Policy the browser applies; a page's `ui/message` becomes a turn only when the
person says yes, one question at a time.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import re
import select
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.apps.test_apps_browser import (
    BROWSER_ARGS,
    PUBLIC_NAME,
    URL,
    WAIT,
    ReplProcess,
    app_frame,
    chromium_path,
)
from tests.support.asgi_thread import serve_handler
from tests.support.cli import RUN_MCP, cli_env, mcp_json
from tests.support.fake_llm import ScriptedLLM, text, tool_calls
from tests.support.servers import SUPPORT
from tests.support.terminal import Terminal

pytestmark = pytest.mark.slow
playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

PAGE_SERVER = SUPPORT / "apps_page_server.py"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium_path(), args=BROWSER_ARGS)
        yield launched
        launched.close()


def page_server(tmp_path: Path, name: str, script: str, ui: dict[str, Any] | None = None) -> Any:
    """An mcpServers entry for apps_page_server.py with this page script and `_meta.ui`."""
    (tmp_path / f"{name}.js").write_text(script, encoding="utf-8")
    (tmp_path / f"{name}.json").write_text(json.dumps(ui or {}), encoding="utf-8")
    args = [str(PAGE_SERVER), name, str(tmp_path / f"{name}.js"), str(tmp_path / f"{name}.json")]
    return {"command": sys.executable, "args": args}


def wait_for_file(path: Path) -> str:
    deadline = time.monotonic() + WAIT
    while not (path.exists() and path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return path.read_text()


# -- 7: the link in the browser's command line ------------------------------------------


def test_the_browsers_link_opens_the_page_once_and_the_page_needs_its_cookie(
    tmp_path: Path, browser: Any
) -> None:
    """The host starts the browser with the link as an argument, where any local user reads
    it (/proc/PID/cmdline; here a $BROWSER command records it). The browser's first use
    trades it for an HttpOnly cookie; the same link fetched again, as such a reader would,
    is refused, and so is the page without the cookie."""
    argv = tmp_path / "argv.txt"
    recorder = tmp_path / "browser.py"
    recorder.write_text(
        f"import sys, pathlib\npathlib.Path({str(argv)!r}).write_text(sys.argv[1])\n"
    )
    config = mcp_json(tmp_path, {"a": page_server(tmp_path, "a", "")})
    with ScriptedLLM() as llm:
        repl = ReplProcess(
            config, tmp_path, llm.base_url, browser=f"{sys.executable} {recorder} %s"
        )
        try:
            repl.send("/app a__show")
            link = wait_for_file(argv)
            context = browser.new_context()
            page = context.new_page()
            page.goto(link)
            expect(app_frame(page).locator("#init")).to_have_text("run_mcp")  # the page works
            with httpx2.Client() as client:
                again = client.get(link)  # what a reader of /proc does, after the browser
                assert again.status_code == 403 and "used already" in again.text
                assert client.get(page.url).status_code == 403  # the page, no cookie
                assert client.get(page.url + "recv?after=0").status_code == 403
                send = client.post(page.url + "send", content=b"{}")
                assert send.status_code == 403
            assert page.evaluate("() => document.cookie") == ""  # HttpOnly: no script reads it
            [cookie] = context.cookies()
            token = httpx2.URL(page.url).path.split("/")[1]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            assert cookie["path"] == f"/{token}/"
            assert "/open/" not in page.url and link.split("/")[-2] not in page.url
            held = {"Cookie": f"{cookie['name']}={cookie['value']}"}
            assert httpx2.get(page.url, headers=held).status_code == 200  # what it all needs
            context.close()
            code, _ = repl.finish()
        finally:
            repl.kill()
    assert code == 0, "\n".join(repl.seen)


# -- 9: one origin per server ------------------------------------------------------------

KEEPS_LAST_RESULT = """
initialized.then(() => show("seen", String(localStorage.getItem("last-result"))));
toolResult.then((text) => { localStorage.setItem("last-result", text); show("stored", text); });
"""


def test_a_servers_page_cannot_read_what_another_servers_page_stored(
    tmp_path: Path, browser: Any
) -> None:
    """Server a's page keeps its tool's result in localStorage; server b's page, open in the
    same browser, finds nothing there, while a's own next page does."""
    servers = {
        "a": page_server(tmp_path, "a", KEEPS_LAST_RESULT),
        "b": page_server(tmp_path, "b", KEEPS_LAST_RESULT),
    }
    config = mcp_json(tmp_path, servers)
    script = [tool_calls(("a__show", {"note": "the balance is 1,234"})), text("shown")]
    with ScriptedLLM(*script) as llm:
        repl = ReplProcess(config, tmp_path, llm.base_url)
        try:
            context = browser.new_context()
            repl.send("show a")
            page_a = context.new_page()
            page_a.goto(repl.wait_for(URL)["url"])
            expect(app_frame(page_a).locator("#stored")).to_have_text("a says the balance is 1,234")
            mark = len(repl.seen)
            repl.send("/app b__show")
            page_b = context.new_page()
            page_b.goto(repl.wait_for(URL, since=mark)["url"])
            expect(app_frame(page_b).locator("#seen")).to_have_text("null")
            mark = len(repl.seen)
            repl.send("/app a__show")  # the control: a's own origin kept it
            page_a2 = context.new_page()
            page_a2.goto(repl.wait_for(URL, since=mark)["url"])
            seen = app_frame(page_a2).locator("#seen")
            expect(seen).to_have_text("a says the balance is 1,234")
            context.close()
            code, _ = repl.finish()
        finally:
            repl.kill()
    assert code == 0, "\n".join(repl.seen)
    llm.assert_complete()


# -- 10: a declared CSP that points at this machine ----------------------------------------

PROBES_LOCAL = """
const probe = (url) => fetch(url, {mode: "no-cors"}).then(() => "reached", () => "blocked");
const image = (url) => new Promise((resolve) => {
  const img = new Image();
  img.onload = img.onerror = () => resolve("tried");
  img.src = url;
});
initialized.then(async () => {
  show("loopback", await probe("LOCAL/fetch"));
  show("localhost", await probe("LOCAL/fetch".replace("127.0.0.1", "localhost")));
  await image("LOCAL/image");
  show("public", await probe("PUBLIC/fetch"));
});
"""


@contextlib.contextmanager
def local_service() -> Iterator[tuple[str, list[str]]]:
    """A web service on 127.0.0.1 (another port, as a database's admin page is): its origin,
    and the Host header of each request it got."""
    hosts: list[str] = []

    class Recording(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hosts.append(self.headers.get("Host", ""))
            self.send_response(204)
            self.send_header("Access-Control-Allow-Origin", "*")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    with serve_handler(Recording) as origin:
        yield origin, hosts


def test_a_declared_csp_entry_for_this_machine_is_refused_told_and_unreachable(
    tmp_path: Path, browser: Any
) -> None:
    with local_service() as (local, hosts):
        port = local.rsplit(":", 1)[1]
        public = f"http://{PUBLIC_NAME}:{port}"  # the same service under a public-looking name
        declared = [
            local,
            f"http://localhost:{port}",
            "http://127.0.0.1:*",
            "http://169.254.169.254",
            "https://*.com",
            f"http://[::1]:{port}",
            "http://10.0.0.8",
            public,
        ]
        ui = {"csp": {"connectDomains": declared, "resourceDomains": [local]}}
        script = PROBES_LOCAL.replace("LOCAL", local).replace("PUBLIC", public)
        config = mcp_json(tmp_path, {"probe": page_server(tmp_path, "probe", script, ui)})
        with ScriptedLLM() as llm:
            repl = ReplProcess(config, tmp_path, llm.base_url)
            try:
                repl.send("/app probe__show")
                page = browser.new_page()
                page.goto(repl.wait_for(URL)["url"])
                app = app_frame(page)
                expect(app.locator("#public")).to_have_text("reached")  # the last probe
                for probe in ("#loopback", "#localhost"):
                    expect(app.locator(probe)).to_have_text("blocked")
                page.close()
                for entry in declared[:-1]:
                    told = rf"probe: ui://page/page\.html asks \w+ '{re.escape(entry)}', refused: "
                    repl.wait_for(told)
                code, _ = repl.finish()
            finally:
                repl.kill()
    assert code == 0, "\n".join(repl.seen)
    assert hosts == [f"{PUBLIC_NAME}:{port}"]  # only the declared public origin got through
    assert not any(PUBLIC_NAME in line for line in repl.seen)  # a fine entry is not told


# -- 17: WebRTC and powerful features ----------------------------------------------------

ASKS_FEATURES = """
initialized.then(() => {
  for (const feature of ["microphone", "camera", "geolocation", "usb", "display-capture"]) {
    show(feature, String(document.featurePolicy.allowsFeature(feature)));
  }
});
"""


def test_the_sandbox_page_carries_webrtc_block_and_a_permissions_policy_the_browser_applies(
    tmp_path: Path, browser: Any
) -> None:
    """Chromium has no CSP directive for WebRTC (docs/extensions.md says what is left);
    `webrtc 'block'` is there for browsers that have one. Features the page did not declare
    are off for its whole origin, whatever a frame's `allow` says."""
    ui: dict[str, Any] = {"permissions": {"microphone": {}}}
    config = mcp_json(tmp_path, {"media": page_server(tmp_path, "media", ASKS_FEATURES, ui)})
    with ScriptedLLM() as llm:
        repl = ReplProcess(config, tmp_path, llm.base_url)
        try:
            repl.send("/app media__show")
            page = browser.new_page()
            with page.expect_response(re.compile(r"/sandbox$")) as sandbox:
                page.goto(repl.wait_for(URL)["url"])
            headers = sandbox.value.all_headers()
            app = app_frame(page)
            expect(app.locator("#microphone")).to_have_text("true")
            for feature in ("camera", "geolocation", "usb", "display-capture"):
                expect(app.locator(f"#{feature}")).to_have_text("false")
            page.close()
            code, _ = repl.finish()
        finally:
            repl.kill()
    assert code == 0, "\n".join(repl.seen)
    assert "webrtc 'block'" in headers["content-security-policy"].split("; ")
    policy = headers["permissions-policy"].split(", ")
    assert "microphone=(self)" in policy and "camera=()" in policy and "usb=()" in policy


SENDS_STUN = """(body, port) => {
  const pc = new RTCPeerConnection({iceServers: [{urls: "stun:127.0.0.1:" + port}]});
  window.kept = pc;
  pc.createDataChannel("probe");
  window.gathered = new Promise((resolve) => {
    pc.onicegatheringstatechange = () => pc.iceGatheringState === "complete" && resolve();
  });
  pc.createOffer().then((offer) => pc.setLocalDescription(offer));
}"""


def start_stun(browser: Any, link: str, port: int) -> Any:
    """The app's page, opened from `link`, gathering ICE candidates with a STUN server at
    127.0.0.1:`port`; the app's document."""
    page = browser.new_page()
    page.goto(link)
    body = app_frame(page).locator("body")
    expect(body.locator("#init")).to_have_text("run_mcp")
    body.evaluate(SENDS_STUN, port)
    return body


def test_webrtc_gets_past_the_csp_unless_the_browser_is_told_what_the_docs_say(
    tmp_path: Path, browser: Any
) -> None:
    """The limit docs/extensions.md owns up to, and its advice, in this chromium: a page with
    no network granted (connect-src 'none', `webrtc 'block'`) still sends STUN packets; a
    chromium started with --webrtc-ip-handling-policy=disable_non_proxied_udp sends none."""
    config = mcp_json(tmp_path, {"a": page_server(tmp_path, "a", "")})
    advised = [*BROWSER_ARGS, "--webrtc-ip-handling-policy=disable_non_proxied_udp"]
    with ScriptedLLM() as llm, stun_server() as (first, port), stun_server() as (second, port2):
        told = browser.browser_type.launch(executable_path=chromium_path(), args=advised)
        repl = ReplProcess(config, tmp_path, llm.base_url)
        try:
            repl.send("/app a__show")
            start_stun(browser, repl.wait_for(URL)["url"], port)
            assert select.select([first], [], [], WAIT)[0], "no STUN packet"  # it got out
            mark = len(repl.seen)
            repl.send("/app a__show")
            body = start_stun(told, repl.wait_for(URL, since=mark)["url"], port2)
            body.evaluate("() => window.gathered")  # nothing to gather: done at once
            assert not select.select([second], [], [], 0)[0]  # and nothing was sent
            code, _ = repl.finish()
        finally:
            repl.kill()
            told.close()
    assert code == 0, "\n".join(repl.seen)


@contextlib.contextmanager
def stun_server() -> Iterator[tuple[socket.socket, int]]:
    """A UDP socket on 127.0.0.1 where a page's STUN packets would arrive, and its port."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock, sock.getsockname()[1]


# -- 18: ui/message -----------------------------------------------------------------------

SENDS = """
window.sendAs = (id, text) => request("ui/message", {role: "user", content: [{type: "text", text}]})
  .then((reply) => show(id, reply.error ? "refused: " + reply.error.message : "sent"));
"""


def test_a_pages_message_becomes_a_turn_only_when_the_person_says_yes(
    tmp_path: Path, browser: Any
) -> None:
    """Each `ui/message` is asked in the terminal, showing the text; yes sends it as the
    person's turn, no refuses it; while one is asked, a flood of 24 more is refused at once
    (no second question), and none of it reaches the model."""
    config = mcp_json(tmp_path, {"a": page_server(tmp_path, "a", SENDS)})
    with ScriptedLLM(text("Summary: nothing to see.")) as llm:
        env = cli_env(tmp_path, llm.base_url, "sk-apps-test") | {"TERM": "xterm-256color"}
        for name in ("PYTEST_CURRENT_TEST", "COLUMNS", "LINES"):
            env.pop(name, None)
        command = [sys.executable, RUN_MCP, "--mcp-config", str(config), "--no-browser"]
        terminal = Terminal(command, cwd=tmp_path, env=env, log=tmp_path / "screen.txt")
        try:
            terminal.wait_for(r"tools from 1 server")
            terminal.type("/app a__show")
            terminal.wait_for(r"app a › show: http://127\.0\.0\.1:\d+/\S+/")
            link = re.search(r"http://127\.0\.0\.1:\d+/\S+/", terminal.screen())
            assert link is not None
            page = browser.new_page()
            page.goto(link[0])
            body = app_frame(page).locator("body")
            expect(body.locator("#init")).to_have_text("run_mcp")
            body.evaluate("() => { sendAs('first', 'Please summarise my files.'); }")
            terminal.wait_for(
                r'App a › show wants to send a message as you: "Please summarise my files\." '
                r"— send it\? \[y\]es / \[n\]o"
            )
            terminal.type("y")
            expect(body.locator("#first")).to_have_text("sent")
            terminal.wait_for(r"Summary: nothing to see\.")
            flood = "() => { for (let i = 0; i < 25; i++) sendAs('flood' + i, 'flood ' + i); }"
            body.evaluate(flood)
            terminal.wait_for(r'wants to send a message as you: "flood 0"')
            for i in range(1, 25):
                expect(body.locator(f"#flood{i}")).to_contain_text("refused: the user is being")
            terminal.type("n")
            expect(body.locator("#flood0")).to_have_text(
                "refused: the user did not send this message"
            )
            page.close()
            screen = terminal.screen()
            terminal.leave()
        finally:
            terminal.close()
    assert screen.count("wants to send a message as you") == 2  # one per question, no more
    [request] = llm.requests
    user_turns = [m["content"] for m in request["messages"] if m["role"] == "user"]
    assert user_turns == ["Please summarise my files."]
    assert "flood" not in json.dumps(request)
