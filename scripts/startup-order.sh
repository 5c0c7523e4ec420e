#!/usr/bin/env bash
# Writes crates/cairn/startup.order: the functions of the release `cairn`
# that `cairn daemon` runs from start-up until idle (1,000 routines stored,
# as in soak.sh), then those a burst of due routines adds, by their mangled
# names, for the release link to lay out together in that order (see
# crates/cairn/build.rs). Recorded with valgrind's callgrind, so every
# function run counts, however briefly.
#
#   scripts/startup-order.sh           # build (release) and write the file
#   scripts/startup-order.sh --check   # how many listed functions the built binary has
#
# The names carry their crates' hashes: run it again after a toolchain or
# dependency update (`--check` then finds few of them), and when start-up
# changes much. Environment: CAIRN_BIN (a built release cairn), ORDER_IDLE
# (seconds of idle recorded after start-up, 10), ORDER_BURST (routines due
# together, 200), ORDER_BURST_WAIT (seconds recorded for the burst, 60).
set -euo pipefail
cd "$(dirname "$0")/.."

ORDER=crates/cairn/startup.order
BIN="${CAIRN_BIN:-}"
if [ -z "$BIN" ]; then
  cargo build -q --release -p cairn >&2
  BIN="${CARGO_TARGET_DIR:-target}/release/cairn"
fi
BIN="$(realpath "$BIN")"

defined() {
  nm --defined-only "$BIN" | awk 'NF == 3 && $2 ~ /^[tTwW]$/ {print $3}' | sort -u
}

if [ "${1:-}" = "--check" ]; then
  listed=$(wc -l <"$ORDER")
  found=$(defined | comm -12 - <(sort -u "$ORDER") | wc -l)
  echo "{\"listed\": $listed, \"in_binary\": $found}"
  exit 0
fi

for tool in valgrind sqlite3; do
  command -v "$tool" >/dev/null || { echo "startup-order: needs $tool (apt-get install $tool)" >&2; exit 1; }
done
WORK="$(mktemp -d /tmp/cairn-order.XXXXXX)"
PID=""
cleanup() {
  [ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

export CAIRN_HOME="$WORK/home" CAIRN_GATEWAY_PORT=0 CAIRN_LOG=warn
unset CAIRN_DATABASE_URL DATABASE_URL CAIRN_LLM_PROVIDER
mkdir -p "$CAIRN_HOME" "$WORK/routines"
for n in $(seq -w 1 1000); do
  printf 'name: order-%s\ntrigger: {type: cron, schedule: "0 0 1 1 *"}\naction: {type: notification, message: "x"}\n' "$n" \
    >"$WORK/routines/order-$n.yaml"
done
"$BIN" routine apply -f "$WORK/routines" >/dev/null

valgrind --tool=callgrind --demangle=no --compress-strings=no --compress-pos=no \
  --callgrind-out-file="$WORK/callgrind.out" "$BIN" daemon >"$WORK/daemon.log" 2>&1 &
PID=$!
for _ in $(seq 1 120); do
  grep -q "cairn daemon running" "$WORK/daemon.log" && break
  sleep 1
done
grep -q "cairn daemon running" "$WORK/daemon.log" || { cat "$WORK/daemon.log" >&2; echo "startup-order: the daemon did not start" >&2; exit 1; }
sleep "${ORDER_IDLE:-10}"
callgrind_control --dump "$PID" >/dev/null   # callgrind.out.1: start-up and idle

# Then a burst: ORDER_BURST `once` routines due together, each a
# notification. Their code goes after the idle daemon's, so an idle daemon
# still maps only the first part, and a burst maps one more stretch instead
# of pages all over `.text` (which stayed resident after it).
mkdir -p "$WORK/burst"
at=$(date -u -d "@$(( $(date +%s) + 15 ))" +%Y-%m-%dT%H:%M:%SZ)
for n in $(seq -w 1 "${ORDER_BURST:-200}"); do
  printf 'name: burst-%s\ntrigger: {type: once, at: "%s"}\naction: {type: notification, message: "x"}\n' "$n" "$at" \
    >"$WORK/burst/burst-$n.yaml"
done
"$BIN" routine apply -f "$WORK/burst" >/dev/null
sleep "${ORDER_BURST_WAIT:-60}"
callgrind_control --dump "$PID" >/dev/null   # callgrind.out.2: the burst
sleep 2
kill -KILL "$PID"; wait "$PID" 2>/dev/null || true; PID=""
ran=$(sqlite3 "$CAIRN_HOME/cairn.db" "SELECT COUNT(*) FROM routine_runs WHERE completed_at IS NOT NULL")
echo "startup-order: $ran runs ended during the recording" >&2

# Functions run in the binary itself (not libc's), that it defines as code
# (callgrind names objects by their full path, whatever the binary's name):
# start-up's first, then the burst's that start-up did not run.
functions() {
  awk -v bin="$BIN" '/^ob=/ {ob = substr($0, 4)} /^fn=/ && ob == bin {print substr($0, 4)}' "$1" \
    | sort -u | comm -12 - <(defined)
}
functions "$WORK/callgrind.out.1" >"$WORK/idle"
functions "$WORK/callgrind.out.2" | comm -23 - "$WORK/idle" >"$WORK/burst.fns"
cat "$WORK/idle" "$WORK/burst.fns" >"$ORDER"
echo "startup-order: $(wc -l <"$WORK/idle") start-up and $(wc -l <"$WORK/burst.fns") burst functions written to $ORDER" >&2
