//! What a database's schema says about a table: its columns (generated ones
//! left out) with their portable kinds, and its primary key.

use sqlx::Row;

use super::{Column, ColumnKind, quoted};
use crate::connect::Backend;
use crate::exec::Conn;
use crate::{Store, StoreError};

fn problem(table: &str, message: impl Into<String>) -> StoreError {
    StoreError::Copy {
        table: table.to_string(),
        message: message.into(),
    }
}

/// The kind of a declared column type, by SQLite's affinity rules or PostgreSQL's type names.
fn kind_of(backend: Backend, declared: &str) -> Option<ColumnKind> {
    let upper = declared.to_ascii_uppercase();
    match backend {
        Backend::Sqlite if upper.contains("INT") => Some(ColumnKind::Int),
        Backend::Sqlite if ["CHAR", "CLOB", "TEXT"].iter().any(|t| upper.contains(t)) => {
            Some(ColumnKind::Text)
        }
        Backend::Sqlite if upper.contains("BLOB") || upper.is_empty() => Some(ColumnKind::Bytes),
        Backend::Sqlite => None,
        Backend::Postgres => match upper.as_str() {
            "BIGINT" | "INTEGER" | "SMALLINT" => Some(ColumnKind::Int),
            "TEXT" | "CHARACTER VARYING" => Some(ColumnKind::Text),
            "BYTEA" => Some(ColumnKind::Bytes),
            _ => None,
        },
    }
}

/// Every base table of the database (on PostgreSQL, of the current schema).
pub(crate) async fn tables(conn: &mut Conn, backend: Backend) -> Result<Vec<String>, StoreError> {
    let sql = match backend {
        Backend::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        }
        Backend::Postgres => {
            "SELECT table_name::text AS name FROM information_schema.tables
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1"
        }
    };
    let rows = sqlx::query(sql).fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|r| Ok(r.try_get::<String, _>("name")?))
        .collect()
}

/// The copied columns of `table`, in the table's order; generated columns are left out.
pub(crate) async fn columns(
    conn: &mut Conn,
    backend: Backend,
    table: &str,
) -> Result<Vec<Column>, StoreError> {
    let sql = match backend {
        Backend::Sqlite => {
            "SELECT name, type AS declared, hidden AS generated FROM pragma_table_xinfo($1) ORDER BY cid"
        }
        Backend::Postgres => {
            "SELECT column_name::text AS name, data_type::text AS declared,
                    CASE WHEN is_generated::text = 'ALWAYS' THEN 1 ELSE 0 END AS generated
             FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position"
        }
    };
    let rows = sqlx::query(sql).bind(table).fetch_all(&mut *conn).await?;
    if rows.is_empty() {
        return Err(problem(table, "does not exist in this database"));
    }
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let name: String = row.try_get("name")?;
        let declared: String = row.try_get("declared")?;
        let generated: i64 = match backend {
            Backend::Sqlite => row.try_get::<i64, _>("generated")?,
            Backend::Postgres => i64::from(row.try_get::<i32, _>("generated")?),
        };
        if generated != 0 {
            continue;
        }
        let kind = kind_of(backend, &declared).ok_or_else(|| {
            problem(
                table,
                format!("column {name} has type {declared}, which is not one of the store's portable types"),
            )
        })?;
        out.push(Column { name, kind });
    }
    Ok(out)
}

/// The primary key's columns of `table`, in key order (empty if it has none).
pub(crate) async fn primary_key(
    conn: &mut Conn,
    backend: Backend,
    table: &str,
) -> Result<Vec<String>, StoreError> {
    let sql = match backend {
        Backend::Sqlite => "SELECT name FROM pragma_table_info($1) WHERE pk > 0 ORDER BY pk",
        Backend::Postgres => {
            "SELECT a.attname::text AS name FROM pg_index i
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
             WHERE i.indrelid = to_regclass($1) AND i.indisprimary
             ORDER BY array_position(i.indkey::int2[], a.attnum)"
        }
    };
    let rows = sqlx::query(sql).bind(table).fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|r| Ok(r.try_get::<String, _>("name")?))
        .collect()
}

/// The rows `table` holds.
pub(crate) async fn count(conn: &mut Conn, table: &str) -> Result<u64, StoreError> {
    let sql = format!("SELECT COUNT(*) AS n FROM {}", quoted(table));
    let n: i64 = sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_one(&mut *conn)
        .await?
        .try_get("n")?;
    u64::try_from(n).map_err(|_| problem(table, format!("negative row count {n}")))
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Every base table of the database, sorted by name (on PostgreSQL, of
    /// the current schema): what the copier's table list is checked against.
    pub async fn schema_tables(&self) -> Result<Vec<String>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        tables(&mut *conn, self.backend()).await
    }

    /// The highest migration applied to this database (0 for an empty one).
    pub async fn applied_schema_version(&self) -> Result<i64, StoreError> {
        let status = self.migration_status().await?;
        let known = status
            .iter()
            .filter(|m| m.applied_at.is_some())
            .map(|m| m.version)
            .max()
            .unwrap_or(0);
        Ok(known)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_map_to_portable_kinds() {
        assert_eq!(kind_of(Backend::Sqlite, "BIGINT"), Some(ColumnKind::Int));
        assert_eq!(kind_of(Backend::Sqlite, "INTEGER"), Some(ColumnKind::Int));
        assert_eq!(kind_of(Backend::Sqlite, "TEXT"), Some(ColumnKind::Text));
        assert_eq!(kind_of(Backend::Sqlite, "BLOB"), Some(ColumnKind::Bytes));
        assert_eq!(kind_of(Backend::Sqlite, "REAL"), None);
        assert_eq!(kind_of(Backend::Postgres, "bigint"), Some(ColumnKind::Int));
        assert_eq!(kind_of(Backend::Postgres, "bytea"), Some(ColumnKind::Bytes));
        assert_eq!(kind_of(Backend::Postgres, "tsvector"), None);
        assert_eq!(kind_of(Backend::Postgres, "jsonb"), None);
    }
}
