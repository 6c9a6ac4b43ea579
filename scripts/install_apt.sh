#!/usr/bin/env bash
# Install Debian packages the tests need: `bash scripts/install_apt.sh PKG...`.
# Idempotent: packages already installed are skipped, `apt-get update` runs at most once per
# call and only when something is missing. Root or sudo is needed only then.
set -euo pipefail

missing=()
for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo_=""
[[ $(id -u) -eq 0 ]] || sudo_="sudo"
export DEBIAN_FRONTEND=noninteractive
# Two installs at once (worktrees, CI beside a developer) would fight over dpkg's lock.
exec 9>/tmp/mcp-agent-apt.lock
flock 9
$sudo_ apt-get update -qq
$sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install_apt: installed ${missing[*]}"
