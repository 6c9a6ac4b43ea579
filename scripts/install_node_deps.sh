#!/usr/bin/env bash
# Install the pinned npm test servers into <repo>/.cache/npm (or $MCP_AGENT_NPM_PREFIX).
# Idempotent and quiet on success: CI calls it every run, and tests/servers.py calls it
# (under a file lock) when a developer runs pytest without having installed anything.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${MCP_AGENT_NPM_PREFIX:-$ROOT/.cache/npm}"
PKG="@modelcontextprotocol/server-everything"
VERSION="2026.8.31"
PKG_JSON="$PREFIX/node_modules/$PKG/package.json"

installed_version() {
    # Plain sed instead of node/jq: works before node is confirmed usable.
    [[ -f "$PKG_JSON" ]] || return 0
    sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$PKG_JSON" | head -n 1
}

if [[ "$(installed_version)" == "$VERSION" && -f "$PREFIX/node_modules/$PKG/dist/index.js" ]]; then
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "install_node_deps: npm not found on PATH; install Node.js >= 20 to run the real-server tests" >&2
    exit 1
fi

mkdir -p "$PREFIX"
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
if ! npm install --no-audit --no-fund --no-progress --save-exact --loglevel=error \
        --prefix "$PREFIX" "$PKG@$VERSION" </dev/null >"$LOG" 2>&1; then
    echo "install_node_deps: npm install $PKG@$VERSION into $PREFIX failed:" >&2
    cat "$LOG" >&2
    exit 1
fi

if [[ "$(installed_version)" != "$VERSION" ]]; then
    echo "install_node_deps: $PKG is '$(installed_version)' after install, expected $VERSION" >&2
    exit 1
fi
