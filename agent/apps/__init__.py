"""A local host for MCP Apps (`io.modelcontextprotocol/ui`): a server's `ui://` page shown in
the user's browser, bridged to the terminal session.

    http.py    a tiny HTTP server on 127.0.0.1 only: a port for the host pages, one per
               server for its apps (an origin each), token paths
    policy.py  the page's Content-Security-Policy and iframe permissions, from its metadata
    pages.py   the host page and the sandbox proxy page (the only script we serve)
    bridge.py  one app view: the app protocol (ui/initialize, tools/call, ui/message, …)
    host.py    the views of a session, the browser, teardown

All protocol decisions are made here in Python; the two pages only relay JSON-RPC messages
between the app's frame and the session (the page's own script is a few dozen lines).

May import: loop (host.py only: a page's tool calls pass the loop's gate), tools, auth,
model, config, common. Never ui, session or cli.
"""
