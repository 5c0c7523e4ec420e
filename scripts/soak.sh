#!/usr/bin/env bash
# Soak figure: `cairn daemon` idle for N minutes with 1,000 routines stored
# (none due: a yearly cron each), on its default SQLite database. Prints one
# JSON object: RSS at start and end (VmRSS), CPU seconds used while idle
# (utime + stime of /proc/PID/stat), and wake-ups: context switches
# (voluntary + involuntary) summed over its threads, sampled every
# SOAK_SAMPLE seconds per thread so that threads which end during the window
# (tokio's blocking pool) still count, with per-minute rates. Targets and
# the latest figures: docs/performance.md.
#
#   scripts/soak.sh [MINUTES]      # default 10
#
# Environment: CAIRN_BIN (a built cairn; else `cargo build --release -p cairn`),
# SOAK_ROUTINES (1000), SOAK_WARMUP (seconds before the first sample, 10),
# SOAK_SAMPLE (seconds between per-thread samples, 2), SOAK_DISABLE (routine
# names to disable once the daemon runs, for a diagnosis).
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES="${1:-10}"
ROUTINES="${SOAK_ROUTINES:-1000}"
WARMUP="${SOAK_WARMUP:-10}"
SAMPLE="${SOAK_SAMPLE:-2}"

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
# The start-up phases' line (daemon/phases.rs) is logged at info.
export CAIRN_LOG="${CAIRN_LOG:-warn,cairn::daemon::phases=info}"
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
# SOAK_DISABLE: routines to disable once the daemon runs (a diagnosis:
# "self-repair" shows what the built-in every-minute routine costs).
for name in ${SOAK_DISABLE:-}; do
  "$BIN" routine disable "$name" >/dev/null
done
[ -n "${SOAK_DISABLE:-}" ] && sleep 2

TICKS="$(getconf CLK_TCK)"
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$PID/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
# Per thread "tid switches name", voluntary + involuntary (a thread that ends
# between the listing and the read is skipped: the blocking pool's threads
# end 10 s after their last task, just when the warm-up does).
switches() {
  for f in /proc/"$PID"/task/*/status; do
    awk -v t="${f%/status}" '/^Name:/ {$1 = ""; name = substr($0, 2); gsub(/ /, "_", name)} /^voluntary_ctxt_switches:/ {v = $2} /^nonvoluntary_ctxt_switches:/ {n = $2} END {sub(/.*\//, "", t); if (v != "") print t, v + n, name}' "$f" 2>/dev/null || true
  done
}
threads() { ls "/proc/$PID/task" | wc -l; }

# Ready time (/healthz answers), started time (every part runs) and each
# start-up phase, as the daemon logged them.
START_LINE=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/daemon.log" | grep -m1 'daemon started: every part runs' || true)
field() { printf '%s' "$START_LINE" | sed -n "s/.*$1=\"\{0,1\}\([^\" ]*\)\"\{0,1\}\( \|$\).*/\1/p"; }
READY=$(field ready_ms); STARTED=$(field started_ms)
PHASES=$(printf '%s' "$START_LINE" | sed -n 's/.*phases="\([^"]*\)".*/\1/p')
echo "[soak] ready in ${READY} ms, every part started in ${STARTED} ms: ${PHASES}" >&2
RSS0=$(rss_kb); CPU0=$(cpu_ticks)
switches >"$WORK/first"
cp "$WORK/first" "$WORK/last"
echo "[soak] daemon $PID idle with $ROUTINES routines for $MINUTES min (RSS ${RSS0} kB at start)" >&2
END=$(( $(date +%s) + MINUTES * 60 ))
while [ "$(date +%s)" -lt "$END" ]; do
  sleep "$SAMPLE"
  # A thread's latest count wins; threads that ended keep their last one.
  switches | cat "$WORK/last" - | awk '{c[$1] = $2; m[$1] = $3} END {for (t in c) print t, c[t], m[t]}' >"$WORK/next"
  mv "$WORK/next" "$WORK/last"
done
RSS1=$(rss_kb); CPU1=$(cpu_ticks); THREADS=$(threads)
# Threads born during the window count from 0.
WAKE=$(awk 'NR == FNR {f[$1] = $2; next} {s += $2 - ($1 in f ? f[$1] : 0)} END {print s + 0}' "$WORK/first" "$WORK/last")
# Per thread name, to stderr: where the wake-ups come from.
awk 'NR == FNR {f[$1] = $2; next} {d[$3] += $2 - ($1 in f ? f[$1] : 0)} END {for (n in d) if (d[n] > 0) printf "[soak] %-28s %d\n", n, d[n]}' "$WORK/first" "$WORK/last" | sort -k3 -nr >&2
BORN=$(awk 'NR == FNR {f[$1] = 1; next} !($1 in f) {n++} END {print n + 0}' "$WORK/first" "$WORK/last")

# How much of the start-up layout (crates/cairn/build.rs) this binary has:
# few of the listed functions means startup.order wants regenerating.
ORDER_FOUND=$(CAIRN_BIN="$BIN" scripts/startup-order.sh --check 2>/dev/null | sed -n 's/.*"in_binary": \([0-9]*\).*/\1/p')
ORDER_LISTED=$(wc -l <crates/cairn/startup.order)
echo "[soak] start-up layout: ${ORDER_FOUND:-?} of $ORDER_LISTED functions of crates/cairn/startup.order are in this binary" >&2

awk -v m="$MINUTES" -v r0="$RSS0" -v r1="$RSS1" -v c0="$CPU0" -v c1="$CPU1" -v t="$TICKS" \
    -v w="$WAKE" -v born="$BORN" -v n="$ROUTINES" -v th="$THREADS" -v ready="$READY" -v started="$STARTED" -v phases="$PHASES" 'BEGIN {
  cpu = (c1 - c0) / t
  printf "{\"ready_ms\": %s, \"started_ms\": %s, \"phases\": \"%s\", ", (ready == "" ? "null" : ready), (started == "" ? "null" : started), phases
  printf "\"minutes\": %d, \"routines\": %d, \"threads\": %d, \"threads_started\": %d, \"rss_start_mb\": %.1f, \"rss_end_mb\": %.1f, ", m, n, th, born, r0 / 1024, r1 / 1024
  printf "\"cpu_seconds\": %.2f, \"cpu_seconds_per_minute\": %.4f, \"wakeups\": %d, \"wakeups_per_minute\": %.1f, ", cpu, cpu / m, w, w / m
  printf "\"rss_ok\": %s, \"cpu_ok\": %s, \"wakeups_ok\": %s}\n", (r1 / 1024 <= 22 ? "true" : "false"), (cpu / m <= 0.02 ? "true" : "false"), (w / m <= 12 ? "true" : "false")
}'
