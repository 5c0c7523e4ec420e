#!/usr/bin/env bash
# Memory and lateness of a burst, black box: a release daemon on SQLite with
# N routines due in the same second (`once` triggers, a notification each,
# no global run limit to speak of). Prints one JSON object: RSS idle before
# the slot, at the slot + 5/30/60 s, and the runs' recorded ends after their
# slot (done p50/p99/max, completed_at - scheduled_for). Targets and the
# latest figures: docs/performance.md.
#
#   scripts/bench-burst.sh            # 10,000 routines
#   BURST_N=2000 scripts/bench-burst.sh
#   BURST_ENV="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" scripts/bench-burst.sh
#   BURST_N=2000 BURST_HISTORY=200 scripts/bench-burst.sh   # each with 200 past runs
#
# Environment: CAIRN_BIN (a built cairn; else `cargo build --release -p cairn`),
# BURST_N (10000), BURST_LEAD (seconds from the daemon's start to the slot, 20),
# BURST_ENV (extra environment for the daemon only, e.g. another allocator),
# BURST_HISTORY (0: ended runs each routine already has, as after months of
# use; 200, the default retention, makes every run's end prune one),
# BURST_KEEP (a path to keep the daemon's log at, e.g. with
# CAIRN_LOG=warn,sqlx::query=debug to see the slot's statements).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${BURST_N:-10000}
LEAD=${BURST_LEAD:-20}
HISTORY=${BURST_HISTORY:-0}
BIN=${CAIRN_BIN:-}
if [[ -z $BIN ]]; then
  cargo build -q --release -p cairn >&2
  BIN=${CARGO_TARGET_DIR:-target}/release/cairn
fi
BIN=$(realpath "$BIN")
command -v sqlite3 >/dev/null || { echo "bench-burst: needs sqlite3" >&2; exit 2; }

WORK=$(mktemp -d /tmp/cairn-burst.XXXXXX)
PID=
cleanup() {
  [[ -n $PID ]] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  if [[ -n ${BURST_KEEP:-} ]]; then cp "$WORK/daemon.log" "$BURST_KEEP"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

export CAIRN_HOME=$WORK/home CAIRN_GATEWAY_PORT=0 CAIRN_TIMEZONE=UTC
export CAIRN_LOG=${CAIRN_LOG:-warn} CAIRN_ROUTINES_MAX_CONCURRENT=100000
unset CAIRN_DATABASE_URL DATABASE_URL CAIRN_LLM_PROVIDER
mkdir -p "$CAIRN_HOME" "$WORK/routines"

# The slot: far enough ahead for applying the routines and the daemon's start.
apply_estimate=$(( N / 1000 + N * HISTORY / 200000 + 5 ))
slot_epoch=$(( $(date +%s) + apply_estimate + LEAD ))
slot=$(date -u -d "@$slot_epoch" +%Y-%m-%dT%H:%M:%SZ)
for i in $(seq -w 1 "$N"); do
  printf 'name: burst-%s\ntrigger: {type: once, at: "%s"}\naction: {type: notification, message: "burst %s"}\n' \
    "$i" "$slot" "$i" >"$WORK/routines/burst-$i.yaml"
done
"$BIN" routine apply -f "$WORK/routines" >/dev/null
if (( HISTORY > 0 )); then
  # Ended runs a day before the slot, one a second per routine, with ids in
  # the store's form (a UUID's text).
  sqlite3 "$CAIRN_HOME/cairn.db" "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < $HISTORY)
    INSERT INTO routine_runs (id, routine_id, trigger_type, started_at, completed_at, status, attempt)
    SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
             || '-8' || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
           r.id, 'once', ($slot_epoch - 86400 + k.n) * 1000000, ($slot_epoch - 86400 + k.n) * 1000000 + 1000, 'ok', 1
    FROM routines AS r, k"
fi
left=$(( slot_epoch - $(date +%s) ))
(( left > 8 )) || { echo "bench-burst: applying took too long; raise BURST_LEAD" >&2; exit 1; }

env ${BURST_ENV:-} "$BIN" daemon >"$WORK/daemon.log" 2>&1 &
PID=$!
rss() { awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/$PID/status"; }
wait_until() { local t=$1; while (( $(date +%s%N) < t * 1000000000 )); do sleep 0.2; done; }

wait_until $(( slot_epoch - 2 ))
idle=$(rss)
wait_until $(( slot_epoch + 5 )); at5=$(rss)
wait_until $(( slot_epoch + 30 )); at30=$(rss)
wait_until $(( slot_epoch + 60 )); at60=$(rss)

db=$CAIRN_HOME/cairn.db
done_ms=$(sqlite3 "$db" "SELECT (completed_at - scheduled_for) / 1000.0 FROM routine_runs
  WHERE scheduled_for IS NOT NULL AND completed_at IS NOT NULL ORDER BY 1")
count=$(printf '%s\n' "$done_ms" | grep -c . || true)
# Retention holds after the burst: the most runs a routine keeps.
kept=$(sqlite3 "$db" "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM routine_runs GROUP BY routine_id)")
rank() { printf '%s\n' "$done_ms" | awk -v p="$1" -v n="$count" 'NR == (int(p * n) == p * n ? p * n : int(p * n) + 1) {print; exit}'; }
printf '{"routines": %s, "history": %s, "done": %s, "done_p50_ms": %s, "done_p99_ms": %s, "done_max_ms": %s, "rss_mb_idle": %s, "rss_mb_slot_5s": %s, "rss_mb_slot_30s": %s, "rss_mb_slot_60s": %s, "runs_kept_max": %s, "env": "%s"}\n' \
  "$N" "$HISTORY" "$count" "$(rank 0.5)" "$(rank 0.99)" "$(rank 1)" "$idle" "$at5" "$at30" "$at60" "$kept" "${BURST_ENV:-}"
