#!/usr/bin/env bash
# Installs (or reuses) the npm packages the tests use, pinned by a
# package-lock.json, and prints what the tests run:
#
#   scripts/test-npm.sh [mcp]   the MCP servers cairn-mcp's tests start
#                               (crates/cairn-mcp/tests/npm); prints
#                               @modelcontextprotocol/server-everything's program
#   scripts/test-npm.sh gateway the official `openai` client the gateway's
#                               tests drive, and axe-core, which the
#                               dashboard's browser test injects into each page
#                               (crates/cairn-gateway/tests/npm); prints its
#                               node_modules folder (NODE_PATH)
#   scripts/test-npm.sh biome   Biome, the dashboard JS's formatter and
#                               linter CI runs (scripts/biome; biome.json at
#                               the root); prints its program
#
#   export CAIRN_TEST_MCP_EVERYTHING=$(scripts/test-npm.sh)
#   export CAIRN_TEST_NODE_PATH=$(scripts/test-npm.sh gateway)
#   "$(scripts/test-npm.sh biome)" ci
#
# The install lives outside the work tree, in a folder named by the lock
# file's hash under ${CAIRN_TEST_CACHE:-~/.cache/cairn-test}/npm, so a fresh
# clone (CI) reuses it and a changed lock gets a folder of its own; npm's
# own cache makes a reinstall an offline copy. The tests call this script
# themselves when their variable is not set. Concurrent callers wait for
# one another (flock). Exits 3 when npm or node is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${1:-mcp}" in
  mcp) pinned="$root/crates/cairn-mcp/tests/npm"; entry="node_modules/.bin/mcp-server-everything"; print="$entry" ;;
  gateway) pinned="$root/crates/cairn-gateway/tests/npm"; entry="node_modules/openai/package.json"; print="node_modules" ;;
  biome) pinned="$root/scripts/biome"; entry="node_modules/.bin/biome"; print="$entry" ;;
  *) echo "unknown package set \"$1\" (mcp, gateway, biome)" >&2; exit 2 ;;
esac

if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "npm and node are needed for the MCP server and gateway client tests and Biome (Debian: apt-get install -y nodejs npm)" >&2
  exit 3
fi

hash="$(cat "$pinned/package.json" "$pinned/package-lock.json" | sha256sum | cut -c1-16)"
cache="${CAIRN_TEST_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/cairn-test}/npm"
dir="$cache/$hash"
mkdir -p "$cache"

exec 9>"$cache/.install.lock"
flock 9
if [ ! -e "$dir/$entry" ] || [ ! -f "$dir/.installed" ]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$pinned/package.json" "$pinned/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >&2)
  [ -e "$dir/$entry" ] || { echo "$entry did not install in $dir" >&2; exit 1; }
  touch "$dir/.installed"
fi
echo "$dir/$print"
