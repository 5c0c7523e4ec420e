#!/usr/bin/env bash
# Chaos test: three daemons (distinct CAIRN_HOMEs, gateway on port 0) on one
# fresh PostgreSQL database, 50 routines due every second (a notification
# each, delivered by a `log` channel), and every few seconds one daemon is
# SIGKILLed and restarted: the restarted daemon reaps at once what its
# killed predecessor left (same home), and each interrupted slot (a
# notification, safe to repeat) is re-run once as its attempt 2. Then every
# daemon is stopped cleanly, a last one reaps what is left and delivers what
# is pending, and scripts/chaos_check.sql judges the database: no slot with
# two runs or two completed runs, every slot of the window run (first or
# second attempt) or recorded with its reason, none skipped by the failure
# backoff, no run left `running`, every notification delivered or in the
# inbox; it counts the slots each guardrail skipped and those re-run after
# an interruption. Prints the counts as JSON; exits 1 when a check fails.
#
#   scripts/chaos.sh [DURATION_SECS]     # default 45 (.ci/run); 600 for the long form
#
# Environment: CAIRN_BIN (a built cairn; else `cargo build -p cairn`),
# CAIRN_TEST_POSTGRES_URL (else .ci/postgres.sh starts one), CHAOS_ROUTINES
# (50), CHAOS_KILL_EVERY (seconds, 3), CHAOS_KEEP=1 keeps the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${1:-45}"
ROUTINES="${CHAOS_ROUTINES:-50}"
KILL_EVERY="${CHAOS_KILL_EVERY:-3}"
LEASE=6

log() { echo "[chaos] $*" >&2; }

BIN="${CAIRN_BIN:-}"
if [ -z "$BIN" ]; then
  cargo build -q -p cairn >&2
  BIN="${CARGO_TARGET_DIR:-target}/debug/cairn"
fi
BIN="$(realpath "$BIN")"

PSQL="$(command -v psql || ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1)"
BASE_URL="${CAIRN_TEST_POSTGRES_URL:-$(.ci/postgres.sh)}"
DB="cairn_chaos_$(date +%s)_$$"
URL="${BASE_URL%/*}/$DB"
"$PSQL" "$BASE_URL" -qXc "CREATE DATABASE $DB" >&2
sql() { "$PSQL" "$URL" -qXtAc "$1"; }

WORK="$(mktemp -d /tmp/cairn-chaos.XXXXXX)"
declare -a PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  if [ "${CHAOS_KEEP:-0}" = 1 ]; then
    log "kept $WORK and database $DB"
  else
    rm -rf "$WORK"
    "$PSQL" "$BASE_URL" -qXc "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

export CAIRN_DATABASE_URL="$URL"
export CAIRN_GATEWAY_PORT=0
export CAIRN_USER=chaos
export CAIRN_TIMEZONE=UTC
export CAIRN_ROUTINES_LEASE_SECS=$LEASE
export CAIRN_NOTIFY_LEASE_SECS=5
export CAIRN_ROUTINES_MAX_CONCURRENT=1000
export CAIRN_NOTIFY_DEFAULT_CHANNEL=journal
export CAIRN_LOG="${CAIRN_LOG:-warn}"
unset CAIRN_LLM_PROVIDER CAIRN_HOME

for i in 0 1 2 3; do
  mkdir -p "$WORK/home$i"
  printf '[channels.journal]\ntype = "log"\n' >"$WORK/home$i/config.toml"
done

# 50 routines due every second; a notification each, so runs are cheap.
mkdir -p "$WORK/routines"
for n in $(seq -w 1 "$ROUTINES"); do
  cat >"$WORK/routines/chaos-$n.yaml" <<EOF
name: chaos-$n
trigger: {type: cron, schedule: "every 1s"}
action: {type: notification, message: "tick chaos-$n"}
guardrails: {max_concurrent: 100, catch_up: skip, retention: 100000}
EOF
done
CAIRN_HOME="$WORK/home3" "$BIN" routine apply -f "$WORK/routines" >/dev/null

start() {
  local i=$1
  CAIRN_HOME="$WORK/home$i" "$BIN" daemon >>"$WORK/daemon$i.log" 2>&1 &
  PIDS[i]=$!
}
now_us() { echo $(( $(date +%s%N) / 1000 )); }

W0=$(now_us)
for i in 0 1 2; do start "$i"; done
log "3 daemons on $DB, $ROUTINES routines every 1s, one SIGKILLed every ${KILL_EVERY}s for ${DURATION}s"
END=$(( $(date +%s) + DURATION ))
KILLS=0
victim=0
while [ "$(date +%s)" -lt "$END" ]; do
  sleep "$KILL_EVERY"
  kill -9 "${PIDS[victim]}" 2>/dev/null || true
  wait "${PIDS[victim]}" 2>/dev/null || true
  KILLS=$((KILLS + 1))
  start "$victim"
  victim=$(( (victim + 1) % 3 ))
done

# The window ends a little before the stop: the last second's slots may be
# claimed by nobody once every daemon is stopping.
STOP=$(now_us)
W1=$(( STOP - 2000000 ))
for i in 0 1 2; do kill -TERM "${PIDS[i]}" 2>/dev/null || true; done
for i in 0 1 2; do wait "${PIDS[i]}" 2>/dev/null || true; done
PIDS=()
log "stopped cleanly after $KILLS kills; reaping"

# The routines stop, the killed daemons' leases run out, and one daemon
# reaps their runs (interrupted) and delivers what is still pending.
sql "UPDATE routines SET enabled = 0 WHERE name LIKE 'chaos-%'; UPDATE engine_counters SET value = value + 1 WHERE key = 'routines.version'" >/dev/null
sleep $((LEASE + 1))
start 3
for _ in $(seq 1 60); do
  left=$(sql "SELECT (SELECT COUNT(*) FROM routine_runs WHERE status = 'running') + (SELECT COUNT(*) FROM notifications WHERE status = 'pending')")
  [ "$left" = 0 ] && break
  sleep 0.5
done
kill -TERM "${PIDS[3]}"
wait "${PIDS[3]}" 2>/dev/null || true
PIDS=()

RESULT="$("$PSQL" "$URL" -qXtA -v ON_ERROR_STOP=1 -v w0="$W0" -v w1="$W1" -f scripts/chaos_check.sql)"
RESULT="$(echo "$RESULT" | sed "s/^{/{\"duration_secs\": $DURATION, \"kills\": $KILLS, /")"
echo "$RESULT"
if echo "$RESULT" | grep -q '"ok" : true'; then
  exit 0
fi
log "FAILED; daemon logs in $WORK (kept)"
CHAOS_KEEP=1
exit 1
