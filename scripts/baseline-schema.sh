#!/usr/bin/env bash
# Regenerates the baseline schema a fresh database is created from
# (crates/cairn-store/baseline/{sqlite,postgres}.sql): the migrations
# 0001..VERSION applied step by step to an empty database, then dumped
# (schema and seeded rows). VERSION must equal `BASELINE_VERSION` in
# crates/cairn-store/src/migrate.rs; the `baseline` conformance test checks
# that a baseline-made database equals a step-by-step one on both backends.
#
#   scripts/baseline-schema.sh VERSION
#
# Needs sqlite3, psql and pg_dump; the PostgreSQL server of `.ci/postgres.sh`
# (or CAIRN_TEST_POSTGRES_URL).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${1:?usage: scripts/baseline-schema.sh VERSION}
MIGRATIONS=crates/cairn-store/migrations
OUT=crates/cairn-store/baseline
URL=${CAIRN_TEST_POSTGRES_URL:-$(.ci/postgres.sh 2>/dev/null | tail -n1)}
WORK=$(mktemp -d)
SCHEMA=cairn_baseline_gen
trap 'rm -rf "$WORK"; psql -q "$URL" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1 || true' EXIT
mkdir -p "$OUT"

# The migration files of versions 1..VERSION for one backend, in order.
files() {
  local pg=$1 v
  for v in $(seq -f '%04g' 1 "$VERSION"); do
    if [[ $pg == 1 ]] && compgen -G "$MIGRATIONS/${v}_*.pg.sql" >/dev/null; then
      ls "$MIGRATIONS/${v}"_*.pg.sql
    else
      ls "$MIGRATIONS/${v}"_*.sql | grep -v '\.pg\.sql$'
    fi
  done
}

header() {
  printf -- '-- Baseline schema: migrations 0001..%04d applied to an empty %s database,\n' "$VERSION" "$1"
  printf -- '-- dumped by scripts/baseline-schema.sh. Generated: do not edit by hand.\n\n'
}

# SQLite: the schema in creation order (without FTS5's shadow tables, which
# their virtual table creates), then the rows the migrations seeded.
db="$WORK/steps.db"
for f in $(files 0); do sqlite3 -bail "$db" <"$f"; done
{
  header SQLite
  sqlite3 "$db" "SELECT m.sql || ';' FROM sqlite_master m
    LEFT JOIN pragma_table_list tl ON tl.schema = 'main' AND tl.name = m.name
    WHERE m.sql IS NOT NULL AND coalesce(tl.type, '') <> 'shadow' ORDER BY m.rowid"
  for t in $(sqlite3 "$db" "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"); do
    sqlite3 "$db" ".mode insert $t" "SELECT * FROM \"$t\""
  done
} >"$OUT/sqlite.sql"

# PostgreSQL: pg_dump of a scratch schema, its name and session settings removed.
psql -q -v ON_ERROR_STOP=1 "$URL" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" -c "CREATE SCHEMA $SCHEMA"
for f in $(files 1); do
  { echo "SET search_path TO $SCHEMA;"; cat "$f"; } | psql -q -v ON_ERROR_STOP=1 "$URL" >/dev/null
done
{
  header PostgreSQL
  pg_dump --schema-only --no-owner --no-privileges --no-comments -n "$SCHEMA" "$URL" \
    | grep -v -E '^(SET |SELECT pg_catalog\.set_config|CREATE SCHEMA|--|\\)' \
    | sed -e "s/\b$SCHEMA\.//g" | cat -s
  pg_dump --data-only --inserts --no-owner -n "$SCHEMA" "$URL" \
    | grep -E '^INSERT ' | sed -e "s/\b$SCHEMA\.//g"
} >"$OUT/postgres.sql"
echo "wrote $OUT/sqlite.sql and $OUT/postgres.sql (migrations 0001..$(printf '%04d' "$VERSION"))"
