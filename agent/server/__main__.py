"""`python -m agent.server [--transport stdio|sse|http] [--host H] [--port N] [--root DIR]`.

The agent itself runs this file as `python -P <path of this file>`
(see config_build.bundled_server).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as a file (`python -P .../agent/server/__main__.py`): the agent's
    # own children import this checkout's `agent`, never one from the working directory.
    _ROOT = str(Path(__file__).resolve().parents[2])
    if _ROOT not in sys.path:
        sys.path.insert(0, _ROOT)

from agent.common.sandbox import Policy, placeholders, remove_placeholders
from agent.server.app import build_server

TRANSPORTS = ("http", "sse", "stdio")  # http is the SDK's "streamable-http"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agent.server",
        description="The bundled MCP server: bash, file tools confined to a root, time.",
    )
    parser.add_argument("--transport", choices=TRANSPORTS, default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="sse/http bind address")
    parser.add_argument("--port", type=int, default=8000, help="sse/http port")
    parser.add_argument("--root", default=".", help="workspace root for the file tools and bash")
    parser.add_argument(
        "--sandbox",
        metavar="JSON",
        help="what bash runs under (bubblewrap): the policy the agent passes, see docs/sandbox.md",
    )
    args = parser.parse_args(argv)
    try:
        sandbox = Policy.from_json(args.sandbox) if args.sandbox else None
        server = build_server(args.root, sandbox)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    made = placeholders(sandbox) if sandbox is not None else ()  # missing now: see bwrap_argv
    try:
        if args.transport == "sse":
            server.run("sse", host=args.host, port=args.port)
        elif args.transport == "http":
            server.run("streamable-http", host=args.host, port=args.port)
        else:
            server.run("stdio")
    except KeyboardInterrupt:
        return 130
    finally:
        remove_placeholders(made)
    return 0


if __name__ == "__main__":
    sys.exit(main())
