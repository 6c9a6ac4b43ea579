"""A small MCP Apps server for the host's own rules (`python tests/support/apps_probe_server.py`).

Its page speaks the app protocol by hand, as the spec shows ("you don't need an SDK"): it
initializes, then asks the host for what a page may and may not have, and writes each
answer into the DOM for the test to read: a tool visible to the model only (refused), an
app-only read-only tool (runs without a question), a resource of its own server, and a
fetch to an origin its CSP declares versus one it does not (both are live servers, so only
the policy tells them apart).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

PAGE_URI = "ui://probe/page.html"
READ_ONLY = ToolAnnotations(read_only_hint=True)

PAGE = """<!doctype html>
<html><body>
<h1>Probe</h1>
<p id="init">…</p><p id="model-only">…</p><p id="app-only">…</p><p id="read">…</p>
<p id="declared">…</p><p id="undeclared">…</p>
<script>
let next = 1;
const waiting = new Map();
window.addEventListener("message", (event) => {
  const msg = event.data;
  if (msg && msg.id !== undefined && waiting.has(msg.id)) {
    waiting.get(msg.id)(msg);
    waiting.delete(msg.id);
  }
});
function request(method, params) {
  const id = next++;
  window.parent.postMessage({jsonrpc: "2.0", id, method, params}, "*");
  return new Promise((resolve) => waiting.set(id, resolve));
}
const show = (id, text) => { document.getElementById(id).textContent = text; };
const outcome = (msg) => msg.error ? "error: " + msg.error.message
                                   : "ok: " + JSON.stringify(msg.result);
const probe = (url) => fetch(url, {mode: "no-cors"}).then(() => "reached", () => "blocked");
(async () => {
  const init = await request("ui/initialize", {
    appInfo: {name: "probe", version: "1"}, appCapabilities: {}, protocolVersion: "2026-01-26"});
  show("init", init.result.protocolVersion + " " + init.result.hostInfo.name);
  window.parent.postMessage({jsonrpc: "2.0", method: "ui/notifications/initialized"}, "*");
  show("model-only", outcome(await request("tools/call", {name: "model_only", arguments: {}})));
  show("app-only", outcome(await request("tools/call", {name: "app_only", arguments: {}})));
  show("read", outcome(await request("resources/read", {uri: "probe://data"})));
  show("declared", await probe("DECLARED/x"));
  show("undeclared", await probe("UNDECLARED/x"));
})();
</script>
</body></html>
"""


def build(declared: str, undeclared: str) -> MCPServer:
    app = MCPServer("probe")
    ui = {"ui": {"csp": {"connectDomains": [declared]}}}

    @app.resource(PAGE_URI, mime_type="text/html;profile=mcp-app", meta=ui)
    def page() -> str:
        return PAGE.replace("UNDECLARED", undeclared).replace("DECLARED", declared)

    @app.resource("probe://data", mime_type="text/plain")
    def data() -> str:
        return "data from the probe server"

    meta_show = {"ui": {"resourceUri": PAGE_URI}}

    @app.tool(annotations=READ_ONLY, meta=meta_show)
    def show() -> str:
        """Show the probe page."""
        return "shown"

    @app.tool(annotations=READ_ONLY, meta={"ui": {"visibility": ["model"]}})
    def model_only() -> str:
        """Only the model may call this."""
        return "model-only ran"

    @app.tool(annotations=READ_ONLY, meta={"ui": {"visibility": ["app"]}})
    def app_only() -> str:
        """Only the page may call this."""
        return "app-only ran"

    return app


if __name__ == "__main__":
    import sys

    build(sys.argv[1], sys.argv[2]).run()
