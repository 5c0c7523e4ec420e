#!/usr/bin/env bash
# Kept for habit and old notes: the schedule differential test's cronsim now
# lives in the one test virtualenv (.venv/test, see scripts/test-venv.sh).
# Prints the path of its python interpreter:
#
#   export CAIRN_CRONSIM_PYTHON=$(scripts/cronsim-venv.sh)
#   cargo test -p cairn-core --test schedule_cronsim
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/test-venv.sh"
