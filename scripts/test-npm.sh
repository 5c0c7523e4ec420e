#!/usr/bin/env bash
# Installs (or reuses) the MCP servers from npm that cairn-mcp's tests start,
# pinned by crates/cairn-mcp/tests/npm/package-lock.json, into that folder's
# node_modules (test-local, git-ignored), and prints the path of
# @modelcontextprotocol/server-everything's program:
#
#   export CAIRN_TEST_MCP_EVERYTHING=$(scripts/test-npm.sh)
#
# The tests call it themselves when CAIRN_TEST_MCP_EVERYTHING is not set.
# Concurrent callers wait for one another (flock). Exits 3 when npm is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/crates/cairn-mcp/tests/npm"
want="$(sed -n 's/.*"@modelcontextprotocol\/server-everything": "\(.*\)".*/\1/p' "$dir/package.json" | head -1)"
program="$dir/node_modules/.bin/mcp-server-everything"
installed="$dir/node_modules/@modelcontextprotocol/server-everything/package.json"

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "npm and node are needed for the MCP server tests (Debian: apt-get install -y nodejs npm)" >&2
  exit 3
fi

have() {
  [ -x "$program" ] && [ -f "$installed" ] &&
    [ "$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$installed" | head -1)" = "$want" ]
}

exec 9>"$dir/.install.lock"
flock 9
if ! have; then
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
have || { echo "server-everything $want did not install in $dir" >&2; exit 1; }
echo "$program"
