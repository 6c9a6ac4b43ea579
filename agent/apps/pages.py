"""The two pages the host serves: the host page (one per app view) and the sandbox proxy.

The spec's web-host layout (SEP-1865, "Sandbox proxy"): the host page embeds a sandbox page
of another origin (here: a loopback port of the app's server's own), which loads the app's
HTML into an inner frame and forwards messages both ways. The app can reach neither the
host page nor the session's token. Both scripts only relay: the host page posts what the
frame says to the session (`send`) and long-polls what the session says back (`recv`);
every decision is made in Python (agent.apps.bridge).
"""

from __future__ import annotations

import html
import json

# The host page may run only its own script and talk only to its own origin.
HOST_PAGE_CSP = (
    "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
    "connect-src 'self'; frame-src {sandbox_origin}; img-src data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)

_HOST_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{title} · run_mcp</title>
<style>
body{{margin:0;font:14px system-ui,sans-serif;background:#f3f4f6;color:#111827}}
header{{padding:8px 14px;background:#111827;color:#f9fafb;display:flex;gap:12px;
  align-items:baseline}}
header b{{font-weight:600}} header span{{color:#9ca3af;font-size:12px}}
#status{{margin-left:auto}}
main{{padding:12px}}
iframe{{border:1px solid #d1d5db;border-radius:8px;background:#fff;width:100%;height:480px;
  display:block}}
</style></head>
<body>
<header><b>{title}</b><span>{uri}</span><span id="status">connecting…</span></header>
<main><iframe id="app" title="{title}" sandbox="allow-scripts allow-same-origin allow-forms"
 allow="{allow}" src="{sandbox_url}"></iframe></main>
<script nonce="{nonce}">
(() => {{
  const frame = document.getElementById("app");
  const status = document.getElementById("status");
  const sandboxOrigin = {sandbox_origin_js};
  const base = location.pathname.replace(/[^/]*$/, "");
  window.addEventListener("message", (event) => {{
    if (event.source !== frame.contentWindow || event.origin !== sandboxOrigin) return;
    const msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0") return;
    if (msg.method === "ui/notifications/size-changed" && msg.params) {{
      if (msg.params.height > 0) frame.style.height = Math.ceil(msg.params.height) + "px";
    }}
    fetch(base + "send", {{method: "POST", headers: {{"Content-Type": "application/json"}},
                          body: JSON.stringify(msg)}});
  }});
  (async () => {{
    let after = 0;
    for (;;) {{
      let reply;
      try {{
        reply = await fetch(base + "recv?after=" + after);
      }} catch (error) {{
        status.textContent = "session ended"; document.body.dataset.state = "ended"; return;
      }}
      if (reply.status !== 200) {{
        status.textContent = "session ended"; document.body.dataset.state = "ended"; return;
      }}
      const batch = await reply.json();
      status.textContent = "connected"; document.body.dataset.state = "connected";
      for (const msg of batch.messages) {{
        if (msg.method === "run_mcp/navigate") {{ location.replace(msg.params.url); return; }}
        frame.contentWindow.postMessage(msg, sandboxOrigin);
      }}
      after = batch.next;
    }}
  }})();
}})();
</script>
</body></html>
"""

_SANDBOX_PAGE = """<!doctype html>
<html><head><meta charset="utf-8">
<style>html,body{margin:0;height:100%;overflow:hidden}iframe{border:0;width:100%;height:100%}</style>
</head><body>
<script>
(() => {
  const hostOrigin = HOST_ORIGIN;
  let inner = null;
  window.addEventListener("message", (event) => {
    const msg = event.data;
    if (event.source === window.parent && event.origin === hostOrigin) {
      if (msg && msg.method === "ui/notifications/sandbox-resource-ready") {
        if (inner) return;
        inner = document.createElement("iframe");
        inner.setAttribute("sandbox", "allow-scripts allow-same-origin allow-forms");
        if (msg.params.allow) inner.setAttribute("allow", msg.params.allow);
        inner.srcdoc = msg.params.html;
        document.body.appendChild(inner);
      } else if (inner) {
        inner.contentWindow.postMessage(msg, location.origin);
      }
    } else if (inner && event.source === inner.contentWindow) {
      window.parent.postMessage(msg, hostOrigin);
    }
  });
  window.parent.postMessage(
    {jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {}}, hostOrigin);
})();
</script>
</body></html>
"""


def host_page(
    *, title: str, uri: str, sandbox_url: str, sandbox_origin: str, allow: str, nonce: str
) -> str:
    """The page the user opens: a header naming the app, the sandbox frame, the relay."""
    return _HOST_PAGE.format(
        title=html.escape(title),
        uri=html.escape(uri),
        allow=html.escape(allow),
        sandbox_url=html.escape(sandbox_url),
        sandbox_origin_js=json.dumps(sandbox_origin),
        nonce=nonce,
    )


def sandbox_page(host_origin: str) -> str:
    """The proxy between the host page and the app; served with the app's CSP."""
    return _SANDBOX_PAGE.replace("HOST_ORIGIN", json.dumps(host_origin))
