"""A hand-written MCP stdio server with as many tools as asked, for tool search and scale.

`python many_tools_server.py COUNT [PAGE]`: COUNT tools, PAGE per tools/list page (default:
all in one page, the worst case for a client). Names come from verb x noun (`create_invoice`,
`archive_ticket`, ... numbered once the pairs run out), each with a description and a schema
like real servers'. The last tool is `translate_klingon`, whose words no other tool uses:
a search for "klingon" must find it among thousands. Written by hand (no SDK) so that
50,000 tools start in well under a second. tools/call answers `called NAME with ARGS by
pid PID`.
Each tools/list request is counted on stderr (`tools/list page N`).
"""

from __future__ import annotations

import json
import os
import sys

VERBS = ["get", "list", "create", "update", "delete", "search", "archive", "export", "sync", "tag"]
NOUNS = [
    "issue", "repo", "user", "file", "ticket", "page", "invoice", "order", "contact", "event",
    "branch", "commit", "comment", "label", "project", "sprint", "channel", "message", "team",
    "calendar", "document", "folder", "report", "dashboard", "alert", "metric", "deploy",
    "secret", "webhook", "customer",
]  # fmt: skip
DISTINCT = {
    "name": "translate_klingon",
    "title": "Klingon translator",
    "description": "Translate English text into Klingon.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "English text"}},
        "required": ["text"],
    },
}


def tool(i: int) -> dict:
    verb, noun = VERBS[i % len(VERBS)], NOUNS[(i // len(VERBS)) % len(NOUNS)]
    rounds = i // (len(VERBS) * len(NOUNS))
    name = f"{verb}_{noun}" + (f"_{rounds}" if rounds else "")
    return {
        "name": name,
        "description": f"{verb.title()} a {noun} in the service (variant {rounds}).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": f"The {noun} id"},
                "fields": {"type": "object", "description": "Extra fields"},
            },
            "required": ["id"],
        },
        "annotations": {"readOnlyHint": verb in ("get", "list", "search")},
    }


COUNT = int(sys.argv[1])
PAGE = int(sys.argv[2]) if len(sys.argv) > 2 else COUNT
TOOLS = [tool(i) for i in range(COUNT - 1)] + [DISTINCT]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


pages = 0
for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        info = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "many", "version": "1"},
        }
        send({"jsonrpc": "2.0", "id": request_id, "result": info})
    elif method == "tools/list":
        pages += 1
        print(f"tools/list page {pages}", file=sys.stderr, flush=True)
        start = int((message.get("params") or {}).get("cursor") or 0)
        listed: dict = {"tools": TOOLS[start : start + PAGE]}
        if start + PAGE < len(TOOLS):
            listed["nextCursor"] = str(start + PAGE)
        send({"jsonrpc": "2.0", "id": request_id, "result": listed})
    elif method == "tools/call":
        params = message["params"]
        arguments = json.dumps(params.get("arguments") or {})
        text = f"called {params['name']} with {arguments} by pid {os.getpid()}"
        result = {"content": [{"type": "text", "text": text}]}
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif request_id is not None:
        error = {"code": -32601, "message": f"no {method}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
