"""A stdio MCP server whose one tool sends `n` log messages, then answers (the log flood).

Hand-written JSON-RPC, so the server itself costs next to nothing: what a flood costs is
then the client's handling of the messages, which is what the bench compares.
"""

import json
import sys

TOOL = {
    "name": "flood",
    "description": "Log n info messages during the call, then return.",
    "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "annotations": {"readOnlyHint": True},
}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")


for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        info = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}, "logging": {}},
            "serverInfo": {"name": "flood", "version": "1"},
        }
        send({"jsonrpc": "2.0", "id": request_id, "result": info})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [TOOL]}})
    elif method == "tools/call":
        n = int(message["params"].get("arguments", {}).get("n", 0))
        for i in range(n):
            data = f"log line {i} of {n}: the server is busy doing its work"
            params = {"level": "info", "logger": "flood", "data": data}
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        text = {"type": "text", "text": f"sent {n} log messages"}
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [text]}})
    elif request_id is not None:
        error = {"code": -32601, "message": f"no {method}"}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
    sys.stdout.flush()
