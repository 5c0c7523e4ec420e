#!/usr/bin/env bash
# Soak figure: `cairn daemon` idle for N minutes with 1,000 routines stored
# (none due: a yearly cron each), on its default SQLite database. Prints one
# JSON object: RSS at start and end (VmRSS), CPU seconds used while idle
# (utime + stime of /proc/PID/stat), and wake-ups (voluntary context switches
# summed over its threads), with per-minute rates. Targets: RSS < 30 MB and
# under 0.1 CPU-second per idle minute.
#
#   scripts/soak.sh [MINUTES]      # default 10
#
# Environment: CAIRN_BIN (a built cairn; else `cargo build --release -p cairn`),
# SOAK_ROUTINES (1000), SOAK_WARMUP (seconds before the first sample, 10).
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES="${1:-10}"
ROUTINES="${SOAK_ROUTINES:-1000}"
WARMUP="${SOAK_WARMUP:-10}"

BIN="${CAIRN_BIN:-}"
if [ -z "$BIN" ]; then
  cargo build -q --release -p cairn >&2
  BIN="${CARGO_TARGET_DIR:-target}/release/cairn"
fi
BIN="$(realpath "$BIN")"

WORK="$(mktemp -d /tmp/cairn-soak.XXXXXX)"
PID=""
cleanup() {
  [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

export CAIRN_HOME="$WORK/home"
export CAIRN_GATEWAY_PORT=0
export CAIRN_LOG="${CAIRN_LOG:-warn}"
unset CAIRN_DATABASE_URL DATABASE_URL CAIRN_LLM_PROVIDER
mkdir -p "$CAIRN_HOME" "$WORK/routines"

for n in $(seq -w 1 "$ROUTINES"); do
  cat >"$WORK/routines/soak-$n.yaml" <<EOF
name: soak-$n
trigger: {type: cron, schedule: "0 0 1 1 *"}
action: {type: notification, message: "happy new year from soak-$n"}
EOF
done
"$BIN" routine apply -f "$WORK/routines" >/dev/null

"$BIN" daemon >"$WORK/daemon.log" 2>&1 &
PID=$!
sleep "$WARMUP"

TICKS="$(getconf CLK_TCK)"
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$PID/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
wakeups() { cat /proc/"$PID"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches:/ {s += $2} END {print s}'; }
threads() { ls "/proc/$PID/task" | wc -l; }

RSS0=$(rss_kb); CPU0=$(cpu_ticks); WAKE0=$(wakeups)
echo "[soak] daemon $PID idle with $ROUTINES routines for $MINUTES min (RSS ${RSS0} kB at start)" >&2
sleep $((MINUTES * 60))
RSS1=$(rss_kb); CPU1=$(cpu_ticks); WAKE1=$(wakeups); THREADS=$(threads)

awk -v m="$MINUTES" -v r0="$RSS0" -v r1="$RSS1" -v c0="$CPU0" -v c1="$CPU1" -v t="$TICKS" \
    -v w0="$WAKE0" -v w1="$WAKE1" -v n="$ROUTINES" -v th="$THREADS" 'BEGIN {
  cpu = (c1 - c0) / t
  printf "{\"minutes\": %d, \"routines\": %d, \"threads\": %d, \"rss_start_mb\": %.1f, \"rss_end_mb\": %.1f, ", m, n, th, r0 / 1024, r1 / 1024
  printf "\"cpu_seconds\": %.2f, \"cpu_seconds_per_minute\": %.3f, \"wakeups\": %d, \"wakeups_per_minute\": %.1f, ", cpu, cpu / m, w1 - w0, (w1 - w0) / m
  printf "\"rss_ok\": %s, \"cpu_ok\": %s}\n", (r1 / 1024 < 30 ? "true" : "false"), (cpu / m < 0.1 ? "true" : "false")
}'
