//! Moving a whole database: every table in dependency order, its rows as
//! portable cells (integer, text, bytes), read from one consistent snapshot
//! ([`Snapshot`]) and written into another database of either backend in
//! one transaction with the row counts verified ([`Import`]); and the
//! JSON-lines form of the same rows ([`jsonl`]), which `cairn backup` keeps
//! for PostgreSQL and `cairn restore` reads back.
//!
//! The tables are listed here, not discovered, because order and a few rules
//! (rows a migration seeds, self-references) must be known; a test compares
//! the list with the schema the migrations build, so a new table fails it
//! until it is listed. Columns are discovered from both databases at copy
//! time and must agree, apart from the backend-only ones named here.

pub mod jsonl;
mod read;
mod schema;
mod write;

pub use read::Snapshot;
pub use write::Import;

use serde::{Deserialize, Serialize};

use crate::migrate::MIGRATIONS;

/// One table the copier moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    /// The table's name.
    pub name: &'static str,
    /// Rows a migration inserts (counters): replaced by the source's rows
    /// rather than counted as data in the target.
    pub seeded: bool,
    /// Columns referring to a row of the same table: written after every
    /// row of the table is in, so the order of rows does not matter.
    pub self_refs: &'static [&'static str],
}

const fn table(name: &'static str) -> TableSpec {
    TableSpec {
        name,
        seeded: false,
        self_refs: &[],
    }
}

const fn seeded(name: &'static str) -> TableSpec {
    TableSpec {
        name,
        seeded: true,
        self_refs: &[],
    }
}

/// Every table that holds cairn's data, each after the tables it refers to.
pub static TABLES: &[TableSpec] = &[
    table("settings"),
    table("routines"),
    table("routine_runs"),
    table("routine_run_tries"),
    seeded("engine_counters"),
    table("sessions"),
    table("threads"),
    table("thread_checkpoints"),
    table("thread_turns"),
    table("thread_messages"),
    TableSpec {
        name: "jobs",
        seeded: false,
        self_refs: &["parent_id"],
    },
    table("notifications"),
    table("notification_attempts"),
    table("api_tokens"),
    table("pairing_codes"),
    table("idempotency_keys"),
    table("background_tasks"),
    table("memory_docs"),
    table("memory_embedding_cache"),
    seeded("memory_generation"),
    table("cost_days"),
    table("cost_models"),
    table("cost_agents"),
    table("llm_calls"),
    table("tool_health"),
    table("channel_cursors"),
    table("channel_users"),
    table("channel_strangers"),
    table("channel_messages"),
    table("channel_deliveries"),
    table("vault_secrets"),
    table("secret_leaks"),
];

/// Tables the copier leaves alone: the migration history (each database
/// keeps its own, written by its own migrations), the daemons running on the
/// source (live processes, not data: each records itself at start), the
/// claims of slots about to come (an engine's moment: begun or gone within
/// a second), and SQLite's full-text index of memories with its shadow
/// tables (rebuilt by triggers as the rows of `memory_docs` arrive).
pub static NOT_COPIED: &[&str] = &[
    "schema_migrations",
    "daemons",
    "run_claims",
    "memory_fts",
    "memory_fts_config",
    "memory_fts_data",
    "memory_fts_docsize",
    "memory_fts_idx",
];

/// Columns only one backend has (generated columns are never copied):
/// SQLite's integer row key for the full-text index, assigned on insert.
const BACKEND_ONLY: &[(&str, &str)] = &[("memory_docs", "seq")];

/// The schema version this binary builds: the last migration's.
pub fn schema_version() -> i64 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// How a column's values are kept (the store's portable types).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnKind {
    /// BIGINT (instants in microseconds, counts, 0/1 booleans).
    Int,
    /// TEXT (ids, names, JSON).
    Text,
    /// BLOB / BYTEA (embeddings).
    Bytes,
}

/// A column of a copied table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: ColumnKind,
}

/// A table as one side of a copy has it: its name and columns in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableHeader {
    /// The table's name.
    pub table: String,
    /// Its copied columns, in the order of each row's cells.
    pub columns: Vec<Column>,
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
    /// Bytes.
    Bytes(Vec<u8>),
}

/// Rows of one table, in the order of its header's columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The table's name.
    pub table: String,
    /// The rows.
    pub rows: Vec<Vec<Cell>>,
}

/// How many rows a table holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableCount {
    /// The table's name.
    pub table: String,
    /// Its rows.
    pub rows: u64,
}

/// The spec of a table the copier knows.
pub(crate) fn spec(name: &str) -> Option<&'static TableSpec> {
    TABLES.iter().find(|t| t.name == name)
}

fn backend_only(table: &str, column: &str) -> bool {
    BACKEND_ONLY.contains(&(table, column))
}

/// Double-quoted SQL identifier (names come from the schema, never from input).
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_do_not_overlap_or_repeat() {
        let mut names: Vec<&str> = TABLES.iter().map(|t| t.name).collect();
        names.extend(NOT_COPIED);
        let total = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), total);
    }

    #[test]
    fn the_schema_version_is_the_last_migration() {
        assert_eq!(schema_version(), MIGRATIONS.len() as i64);
    }
}
