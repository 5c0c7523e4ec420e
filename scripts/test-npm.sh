#!/usr/bin/env bash
# Installs (or reuses) the MCP servers from npm that cairn-mcp's tests start,
# pinned by crates/cairn-mcp/tests/npm/package-lock.json, and prints the path
# of @modelcontextprotocol/server-everything's program:
#
#   export CAIRN_TEST_MCP_EVERYTHING=$(scripts/test-npm.sh)
#
# The install lives outside the work tree, in a folder named by the lock
# file's hash under ${CAIRN_TEST_CACHE:-~/.cache/cairn-test}/npm, so a fresh
# clone (CI) reuses it and a changed lock gets a folder of its own; npm's
# own cache makes a reinstall an offline copy. The tests call this script
# themselves when CAIRN_TEST_MCP_EVERYTHING is not set. Concurrent callers
# wait for one another (flock). Exits 3 when npm or node is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pinned="$root/crates/cairn-mcp/tests/npm"

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "npm and node are needed for the MCP server tests (Debian: apt-get install -y nodejs npm)" >&2
  exit 3
fi

hash="$(cat "$pinned/package.json" "$pinned/package-lock.json" | sha256sum | cut -c1-16)"
cache="${CAIRN_TEST_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/cairn-test}/npm"
dir="$cache/$hash"
program="$dir/node_modules/.bin/mcp-server-everything"
mkdir -p "$cache"

exec 9>"$cache/.install.lock"
flock 9
if [ ! -x "$program" ] || [ ! -f "$dir/.installed" ]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$pinned/package.json" "$pinned/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >&2)
  [ -x "$program" ] || { echo "server-everything did not install in $dir" >&2; exit 1; }
  touch "$dir/.installed"
fi
echo "$program"
