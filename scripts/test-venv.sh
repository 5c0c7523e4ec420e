#!/usr/bin/env bash
# Creates (or reuses) the virtualenv .venv/test holding every Python tool the
# tests use, pinned, and prints the path of its python interpreter:
#
#   - cronsim: reference Debian cron semantics (schedule differential test)
#   - aiosmtpd: a local SMTP server (email channel test)
#   - openapi-spec-validator: checks the gateway's OpenAPI document
#   - schemathesis: property-based fuzzing of the gateway's API from that document
#   - openai, langchain-openai: the official client and LangChain's, against
#     the gateway's OpenAI-compatible API
#   - openapi-python-client: generates a client from the gateway's OpenAPI
#     document, which the gateway's tests then drive
#   - mcp: the official MCP SDK: a test server cairn connects to (stdio and
#     streamable HTTP, with uvicorn), and the client that drives `cairn mcp serve`
#   - selenium: drives Debian's chromium (chromium-driver) through the
#     dashboard in the gateway's browser test
#
#   export CAIRN_TEST_PYTHON=$(scripts/test-venv.sh)
#   export CAIRN_CRONSIM_PYTHON=$CAIRN_TEST_PYTHON
#   cargo test -p cairn-core --test schedule_cronsim
#   cargo test -p cairn-automation --test channels
#   cargo test -p cairn-gateway --test openapi
#   cargo test -p cairn-gateway --test openai_clients
#   cargo test -p cairn-mcp; cargo test -p cairn --test mcp_cli
#   cargo test -p cairn-gateway --test dashboard_browser
set -euo pipefail

# name==version, one per package; the venv is topped up when one differs.
PACKAGES=(
  "cronsim==2.8"
  "aiosmtpd==1.4.6"
  "openapi-spec-validator==0.9.0"
  "schemathesis==4.32.5"
  "openai==3.51.0"
  "langchain-openai==1.7.4"
  "openapi-python-client==0.29.1"
  "mcp==2.3.0"
  "selenium==4.50.0"
)

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${CAIRN_TEST_VENV:-$root/.venv/test}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2
fi

missing=()
for spec in "${PACKAGES[@]}"; do
  name="${spec%%==*}"
  want="${spec##*==}"
  have="$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$name'))" 2>/dev/null || true)"
  if [ "$have" != "$want" ]; then
    missing+=("$spec")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${missing[@]}" >&2
fi

echo "$venv/bin/python"
