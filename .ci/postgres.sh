#!/usr/bin/env bash
# Starts (or reuses) a throwaway PostgreSQL cluster on 127.0.0.1 for the test suite
# and prints its URL on stdout. Installs Debian's server package when missing.
set -euo pipefail

PORT="${CAIRN_PG_PORT:-54329}"
DATA="${CAIRN_PG_DIR:-/tmp/cairn-ci-pg}"
DB=cairn_test

log() { echo "[postgres] $*" >&2; }

bin_dir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

if [ -z "$(bin_dir)" ] || [ ! -x "$(bin_dir)/pg_ctl" ]; then
  log "installing postgresql from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq postgresql >&2
fi
BIN="$(bin_dir)"

# initdb refuses to run as root; use the postgres account the package creates.
run_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql postgres
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

if ! run_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  if [ ! -f "$DATA/PG_VERSION" ]; then
    log "creating cluster in $DATA"
    mkdir -p "$DATA"
    [ "$(id -u)" -eq 0 ] && chown postgres "$DATA"
    run_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
  fi
  log "starting on 127.0.0.1:$PORT"
  run_pg "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w \
    -o "-p $PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
fi

if ! "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
  "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DB"
fi

echo "postgres://postgres@127.0.0.1:$PORT/$DB"
