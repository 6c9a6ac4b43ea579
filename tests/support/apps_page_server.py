"""An MCP Apps server whose page a test writes:
`python tests/support/apps_page_server.py NAME PAGE.js META.json`.

The page is a few lines of protocol (as apps_probe_server.py's, by hand, no SDK) and then
the test's own script, PAGE.js, which sees `request(method, params)`, `show(id, text)` (a
`<p id=…>` for the test to read), `initialized` (a promise: the host answered
`ui/initialize`) and `toolResult` (a promise of the tool's text, pushed by the host). META.json
is the page's `_meta.ui` (its csp, permissions). One tool, `show(note)`, read-only, comes
with the page and answers "NAME says NOTE"; one for the page only (visibility ["app"]),
`tick(n)`, unannotated, answers "NAME tick N".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

PAGE_URI = "ui://page/page.html"

PRELUDE = """<!doctype html>
<html><body>
<h1 id="name">NAME</h1>
<div id="out"></div>
<script>
let next = 1;
const waiting = new Map();
let resultArrived;
const toolResult = new Promise((resolve) => { resultArrived = resolve; });
window.addEventListener("message", (event) => {
  const msg = event.data;
  if (msg && msg.id !== undefined && waiting.has(msg.id)) {
    waiting.get(msg.id)(msg);
    waiting.delete(msg.id);
  } else if (msg && msg.method === "ui/notifications/tool-result") {
    resultArrived(msg.params.content.map((block) => block.text).join(""));
  }
});
function request(method, params) {
  const id = next++;
  window.parent.postMessage({jsonrpc: "2.0", id, method, params}, "*");
  return new Promise((resolve) => waiting.set(id, resolve));
}
function show(id, text) {
  let line = document.getElementById(id);
  if (!line) {
    line = document.createElement("p");
    line.id = id;
    document.getElementById("out").appendChild(line);
  }
  line.textContent = text;
}
const initialized = (async () => {
  const init = await request("ui/initialize", {
    appInfo: {name: "NAME", version: "1"}, appCapabilities: {}, protocolVersion: "2026-01-26"});
  window.parent.postMessage({jsonrpc: "2.0", method: "ui/notifications/initialized"}, "*");
  show("init", init.result.hostInfo.name);
  return init.result;
})();
</script>
<script>
PAGE
</script>
</body></html>
"""


def build(name: str, script: str, ui: dict[str, Any]) -> MCPServer:
    app = MCPServer(name)

    @app.resource(PAGE_URI, mime_type="text/html;profile=mcp-app", meta={"ui": ui})
    def page() -> str:
        return PRELUDE.replace("NAME", name).replace("PAGE", script)

    @app.tool(
        annotations=ToolAnnotations(read_only_hint=True), meta={"ui": {"resourceUri": PAGE_URI}}
    )
    def show(note: str = "") -> str:
        """Show the page."""
        return f"{name} says {note}"

    @app.tool(meta={"ui": {"resourceUri": PAGE_URI, "visibility": ["app"]}})
    def tick(n: int = 0) -> str:
        """For the page only, and unannotated (so asked), as most apps' own tools are."""
        return f"{name} tick {n}"

    return app


if __name__ == "__main__":
    script = Path(sys.argv[2]).read_text(encoding="utf-8")
    build(sys.argv[1], script, json.loads(Path(sys.argv[3]).read_text(encoding="utf-8"))).run()
