#!/usr/bin/env bash
# Third-party Python MCP servers whose dependencies clash with ours, each in its own venv
# under <repo>/.cache (shared between worktrees: idempotent, serialised by a lock):
# mcp-server-sqlite is built on the 1.x SDK (it has resources, but no resource templates).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.cache/sqlite-venv"
mkdir -p "$ROOT/.cache"
exec 9>"$ROOT/.cache/sqlite-venv.lock"
flock 9
if [[ -f "$VENV/.installed" ]]; then
    exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "mcp-server-sqlite==2025.4.25" "mcp<2" </dev/null
touch "$VENV/.installed"
