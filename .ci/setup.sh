#!/usr/bin/env bash
# The outside parts the tests need, installed and started while .ci/run
# checks and builds the Rust code (both are mostly waiting on the network
# and the disk, the build on the CPU). Writes the variables the tests read
# to the file named by its one argument, as `export` lines; its own
# output goes to .ci/run's log once the tests' build is done.
set -euo pipefail
cd "$(dirname "$0")/.."
env_file="$1"
: >"$env_file"

step() { echo; echo "=== $* === (${SECONDS} s into the set-up)"; }
# `keep NAME [VALUE]`: exported here for the commands below, and written for
# .ci/run. A value from a command is assigned first (`NAME="$(cmd)"`), so
# that the command's failure stops the set-up.
keep() {
  [ $# -eq 2 ] && printf -v "$1" '%s' "$2"
  export "${1?}"
  printf 'export %s=%q\n' "$1" "${!1}" >>"$env_file"
}

# `packages "CMD ..." PKG ...`: Debian's packages PKG unless every command
# CMD is already on the machine.
packages() {
  local cmd missing=0
  for cmd in $1; do command -v "$cmd" >/dev/null || missing=1; done
  [ "$missing" -eq 0 ] && return 0
  shift
  local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

step "postgresql"
CAIRN_TEST_POSTGRES_URL="$(.ci/postgres.sh)"
keep CAIRN_TEST_POSTGRES_URL
keep CAIRN_REQUIRE_POSTGRES 1
echo "CAIRN_TEST_POSTGRES_URL=$CAIRN_TEST_POSTGRES_URL"

step "python test venv (cronsim, aiosmtpd, mcp, and for the gateway: openai, langchain-openai, openapi-python-client, openapi-spec-validator, schemathesis, selenium)"
CAIRN_TEST_PYTHON="$(scripts/test-venv.sh)"
keep CAIRN_TEST_PYTHON
keep CAIRN_REQUIRE_PYTHON 1
keep CAIRN_CRONSIM_PYTHON "$CAIRN_TEST_PYTHON"
keep CAIRN_REQUIRE_DIFFERENTIAL 1
echo "CAIRN_TEST_PYTHON=$CAIRN_TEST_PYTHON"

step "shells the completion tests parse with (zsh, fish; bash is there)"
packages "zsh fish" zsh fish
keep CAIRN_REQUIRE_SHELLS 1

step "node and npm, the MCP servers from npm the tests start (server-everything), the openai npm client and axe-core (pinned; cached outside the clone)"
packages "node npm" nodejs npm
node --version
CAIRN_TEST_MCP_EVERYTHING="$(scripts/test-npm.sh)"
keep CAIRN_TEST_MCP_EVERYTHING
CAIRN_TEST_NODE_PATH="$(scripts/test-npm.sh gateway)"
keep CAIRN_TEST_NODE_PATH
keep CAIRN_REQUIRE_NPM 1
echo "CAIRN_TEST_MCP_EVERYTHING=$CAIRN_TEST_MCP_EVERYTHING"
echo "CAIRN_TEST_NODE_PATH=$CAIRN_TEST_NODE_PATH"

step "dashboard JS: biome ci (format and lint; pinned in scripts/biome, biome.json; cached outside the clone)"
biome="$(scripts/test-npm.sh biome)"
"$biome" ci

step "chromium and chromedriver for the dashboard's browser test (Debian packages)"
packages "chromium chromedriver" chromium chromium-driver
chromium --version 2>/dev/null || true
keep CAIRN_REQUIRE_BROWSER 1

step "a Secret Service for the OS keyring test (dbus, gnome-keyring, libsecret-tools; Debian packages)"
packages "dbus-daemon gnome-keyring-daemon secret-tool" dbus gnome-keyring libsecret-tools
keep CAIRN_REQUIRE_KEYRING 1
