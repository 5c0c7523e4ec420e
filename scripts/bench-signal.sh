#!/usr/bin/env bash
# The change signal's figures (issue 23) with the release binary, one JSON
# object on stdout (progress on stderr):
#
# - notifications: N recorded by another process (SQLite: `cairn notify test`,
#   which hands them to the running daemon; PostgreSQL: psql writing the row
#   and its NOTIFY in one transaction, as cairn does), each timed from its `created_at` in
#   the store to its arrival at a webhook receiver on 127.0.0.1: p50/p99/max.
#   SQLite with one daemon; PostgreSQL with two daemons on one database
#   (either may deliver): every id must arrive exactly once.
# - routines: R created, then changed, then deleted by another process
#   (`cairn routine apply` / `delete`), each timed from the routine's write
#   (`updated_at`; for deletes the DELETE statement, from the command's
#   sqlx log; also from the command's start, which adds starting the
#   process and connecting) to the daemon's log line saying the engine
#   reloaded (it is live); and R one-shots applied
#   "in 2s": their run's start minus their slot.
#
# Targets and the latest figures: docs/performance.md.
#
#   scripts/bench-signal.sh            # BENCH_N=100 BENCH_ROUTINES=20
#
# Environment: CAIRN_BIN (else the release build), CAIRN_TEST_POSTGRES_URL
# (the PostgreSQL half is skipped without it), PYTHON (python3).
set -euo pipefail
cd "$(dirname "$0")/.."

N="${BENCH_N:-100}"
R="${BENCH_ROUTINES:-20}"
PY="${PYTHON:-python3}"
BIN="${CAIRN_BIN:-}"
if [ -z "$BIN" ]; then
  cargo build -q --release -p cairn >&2
  BIN="${CARGO_TARGET_DIR:-target}/release/cairn"
fi
BIN="$(realpath "$BIN")"
WORK="$(mktemp -d /tmp/cairn-bench-signal.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

"$PY" scripts/bench_signal_receiver.py "$WORK/received" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/received.port" ] && break; sleep 0.05; done
HOOK="http://127.0.0.1:$(cat "$WORK/received.port")/hook"
touch "$WORK/received"

# home NAME DATABASE_URL: a CAIRN_HOME with the hook channel.
home() {
  mkdir -p "$WORK/$1"
  {
    printf '[channels.hook]\ntype = "webhook"\nurl = "%s"\n' "$HOOK"
    printf '[database]\nurl = "%s"\n' "$2"
    printf '[heartbeat]\nenabled = false\n'
  } >"$WORK/$1/config.toml"
}

cairn() { CAIRN_HOME="$WORK/$1" CAIRN_TIMEZONE=UTC CAIRN_GATEWAY_PORT=0 "$BIN" "${@:2}"; }

start_daemon() {
  CAIRN_HOME="$WORK/$1" CAIRN_TIMEZONE=UTC CAIRN_GATEWAY_PORT=0 CAIRN_LOG="warn,cairn_automation=debug" \
    "$BIN" --log-format json daemon >"$WORK/$1.out" 2>"$WORK/$1.log" &
  PIDS+=($!)
  for _ in $(seq 300); do
    cairn "$1" status >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "daemon $1 did not start" >&2
  cat "$WORK/$1.log" >&2
  exit 1
}

stop_daemons() {
  for p in "${PIDS[@]:1}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:1}"; do wait "$p" 2>/dev/null || true; done
  PIDS=("${PIDS[0]}")
}

# notifications LABEL HOME EXPECTED_DAEMONS: N notify tests, then the figures.
notifications() {
  : >"$WORK/received"
  echo "[$1] $N notifications from another process" >&2
  for i in $(seq "$N"); do
    if [ -n "${PGURL:-}" ]; then
      # Another process writing as cairn does: the row and its NOTIFY in one transaction.
      psql -q "$PGURL" >/dev/null <<SQL
BEGIN;
INSERT INTO notifications (id, user_id, channel, title, body, priority, tags, source, created_at, status, attempts, next_attempt_at, in_inbox)
VALUES (gen_random_uuid()::text, 'default', 'hook', 'cairn test notification', 'bench $i', 'normal', '[]', 'bench',
        (extract(epoch from clock_timestamp()) * 1000000)::bigint, 'pending', 0,
        (extract(epoch from clock_timestamp()) * 1000000)::bigint, 0);
-- The channel of the store's schema (crates/cairn-store/src/signal/mod.rs).
SELECT pg_notify(CASE WHEN current_schema() IS NULL OR current_schema() = 'public'
                      THEN 'cairn_changes'
                      ELSE 'cairn_changes_' || left(md5(current_schema()), 16) END,
                 'bench notifications');
COMMIT;
SQL
    else
      cairn "$2" notify test hook --message "bench $i" >/dev/null
    fi
  done
  for _ in $(seq 600); do
    [ "$(wc -l <"$WORK/received")" -ge "$N" ] && break
    sleep 0.05
  done
  sleep 0.5 # duplicates, if any, arrive now
  cairn "$2" --json notify list --limit $((N + 50)) >"$WORK/$1.list.json"
  "$PY" - "$WORK/$1.list.json" "$WORK/received" "$N" <<'EOF'
import json, sys, datetime
listed = json.load(open(sys.argv[1]))
created = {n["id"]: datetime.datetime.fromisoformat(n["created_at"].replace("Z", "+00:00")).timestamp()
           for n in listed if n["title"] == "cairn test notification"}
arrivals = {}
for line in open(sys.argv[2]):
    ident, at = line.split()
    arrivals.setdefault(ident, []).append(float(at))
lat = sorted((min(arrivals[i]) - created[i]) * 1000 for i in created if i in arrivals)
dupes = sum(len(v) - 1 for v in arrivals.values())
def pct(p):
    return round(lat[min(len(lat) - 1, int(len(lat) * p / 100))], 1) if lat else None
print(json.dumps({"count": len(created), "delivered": len(lat), "duplicates": dupes,
                  "p50_ms": pct(50), "p99_ms": pct(99), "max_ms": round(lat[-1], 1) if lat else None,
                  "within_1s": sum(1 for x in lat if x <= 1000)}))
EOF
}

# routines LABEL HOME LOGS...: create / change / delete, and one-shots.
routines() {
  echo "[$1] $R routines created, changed and deleted from another process" >&2
  local h="$2"; shift 2
  mkdir -p "$WORK/r"
  : >"$WORK/r/marks"
  updated() { cairn "$h" --json routine show "$1" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["routine"]["updated_at"])'; }
  for i in $(seq "$R"); do
    f="$WORK/r/b$i.yaml"
    printf 'name: bench-%s\ntrigger: {type: cron, schedule: "0 0 1 1 *"}\naction: {type: notification, message: x}\n' "$i" >"$f"
    cairn "$h" routine apply -f "$f" >/dev/null
    echo "create $(updated "bench-$i")" >>"$WORK/r/marks"
    sleep 0.2
    printf 'name: bench-%s\ntrigger: {type: cron, schedule: "0 0 2 1 *"}\naction: {type: notification, message: y}\n' "$i" >"$f"
    cairn "$h" routine apply -f "$f" >/dev/null
    echo "change $(updated "bench-$i")" >>"$WORK/r/marks"
    sleep 0.2
    # The write: when its DELETE statement returned (sqlx's statement log,
    # just before the commit). The command's start is kept as a second
    # figure: it adds starting the process and connecting.
    local started
    started="$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"
    CAIRN_LOG="warn,sqlx::query=debug" cairn "$h" --log-format json routine delete "bench-$i" --yes \
      >/dev/null 2>"$WORK/r/delete.log"
    echo "delete $("$PY" -c 'import json,sys
for line in open(sys.argv[1]):
    try:
        v = json.loads(line)
    except ValueError:
        continue
    if v.get("fields", {}).get("summary", "").startswith("DELETE FROM routines"):
        print(v["timestamp"])' "$WORK/r/delete.log" | tail -1) $started" >>"$WORK/r/marks"
    sleep 0.2
  done
  for i in $(seq "$R"); do
    f="$WORK/r/o$i.yaml"
    printf 'name: once-%s\ntrigger: {type: once, at: "in 2s"}\naction: {type: notification, message: z}\n' "$i" >"$f"
    cairn "$h" routine apply -f "$f" >/dev/null
    sleep 0.1
  done
  sleep 3
  for i in $(seq "$R"); do
    cairn "$h" --json routine runs "once-$i" >"$WORK/r/once-$i.json"
  done
  "$PY" - "$WORK/r" "$R" "$@" <<'EOF'
import json, sys, datetime
d, r, logs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def ts(text):
    text = text.replace("Z", "+00:00")
    # Python wants at most 6 decimals.
    if "." in text:
        head, tail = text.split(".", 1)
        frac, zone = tail[:tail.index("+")], tail[tail.index("+"):]
        text = f"{head}.{frac[:6]}{zone}"
    return datetime.datetime.fromisoformat(text).timestamp()
marks, started = [], []
for fields in (l.split() for l in open(f"{d}/marks")):
    marks.append((fields[0], ts(fields[1])))
    started.append(ts(fields[2]) if len(fields) > 2 else None)
live = {"create": [], "change": [], "delete": [], "delete_start": []}
for path in logs:
    lines = []
    for line in open(path):
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if "routines changed; live" in json.dumps(v):
            lines.append(ts(v["timestamp"]))
    lines.sort()
    for k, (kind, at) in enumerate(marks):
        until = marks[k + 1][1] if k + 1 < len(marks) else float("inf")
        seen = [t for t in lines if at <= t < until]
        live[kind].append((seen[0] - at) * 1000 if seen else None)
        if started[k] is not None:
            live["delete_start"].append((seen[0] - started[k]) * 1000 if seen else None)
once = []
for i in range(1, r + 1):
    for run in json.load(open(f"{d}/once-{i}.json")):
        if run.get("scheduled_for"):
            once.append((ts(run["started_at"]) - ts(run["scheduled_for"])) * 1000)
def stats(xs):
    missed = sum(1 for x in xs if x is None)
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return {"count": 0, "missed": missed}
    return {"count": len(xs), "missed": missed, "p50_ms": round(xs[len(xs) // 2], 1),
            "p99_ms": round(xs[min(len(xs) - 1, int(len(xs) * 0.99))], 1), "max_ms": round(xs[-1], 1)}
print(json.dumps({"live_after_create": stats(live["create"]), "live_after_change": stats(live["change"]),
                  "live_after_delete": stats(live["delete"]),
                  "live_after_delete_command_start": stats(live["delete_start"]),
                  "one_shot_start_after_slot": stats(once)}))
EOF
}

echo "{\"bench\": \"signal\", \"n\": $N, \"routines\": $R," >"$WORK/out"

# SQLite: one daemon; the commands are other processes on its home.
home s1 "sqlite://$WORK/s1/cairn.db"
cairn s1 routine list >/dev/null
start_daemon s1
SQ_NOTES=$(notifications sqlite s1)
SQ_ROUTINES=$(routines sqlite s1 "$WORK/s1.log")
stop_daemons
echo "\"sqlite\": {\"notifications\": $SQ_NOTES, \"routines\": $SQ_ROUTINES}" >>"$WORK/out"

if [ -n "${CAIRN_TEST_POSTGRES_URL:-}" ]; then
  SCHEMA="bench_$(date +%s)_$$"
  psql -q "$CAIRN_TEST_POSTGRES_URL" -c "CREATE SCHEMA $SCHEMA" >&2
  case "$CAIRN_TEST_POSTGRES_URL" in *\?*) SEP='&' ;; *) SEP='?' ;; esac
  PG="${CAIRN_TEST_POSTGRES_URL}${SEP}options=-csearch_path%3D$SCHEMA"
  home p1 "$PG"; home p2 "$PG"; home p0 "$PG"
  cairn p0 routine list >/dev/null
  start_daemon p1
  start_daemon p2
  PG_NOTES=$(PGURL="$PG" notifications postgres p0)
  PG_ROUTINES=$(routines postgres p0 "$WORK/p1.log" "$WORK/p2.log")
  stop_daemons
  psql -q "$CAIRN_TEST_POSTGRES_URL" -c "DROP SCHEMA $SCHEMA CASCADE" >&2
  echo ", \"postgres\": {\"notifications\": $PG_NOTES, \"routines\": $PG_ROUTINES}" >>"$WORK/out"
fi
echo "}" >>"$WORK/out"
"$PY" -c 'import json,sys; print(json.dumps(json.loads(open(sys.argv[1]).read())))' "$WORK/out"
