#!/usr/bin/env bash
# Creates (or reuses) the virtualenv .venv/cronsim with a pinned cronsim, the
# reference implementation of Debian cron semantics used by the schedule
# differential test, and prints the path of its python interpreter:
#
#   export CAIRN_CRONSIM_PYTHON=$(scripts/cronsim-venv.sh)
#   cargo test -p cairn-core --test schedule_cronsim
set -euo pipefail

CRONSIM_VERSION="2.8"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv/cronsim"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2
fi

installed="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("cronsim"))' 2>/dev/null || true)"
if [ "$installed" != "$CRONSIM_VERSION" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "cronsim==$CRONSIM_VERSION" >&2
fi

echo "$venv/bin/python"
