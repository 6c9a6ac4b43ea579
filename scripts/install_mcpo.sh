#!/usr/bin/env bash
# mcpo (MCP -> OpenAPI proxy) for the OpenAPI tests. It needs the 1.x mcp SDK, so it lives
# in its own venv at <repo>/.cache/mcpo-venv; the server it proxies runs from the main venv.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.cache/mcpo-venv"
if [[ -x "$VENV/bin/mcpo" ]]; then
    exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "mcpo==0.0.20" "mcp<2" "fastapi==0.128.0" </dev/null
