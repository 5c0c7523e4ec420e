//! Reading every copied table from one consistent snapshot, batch by batch.

use sqlx::Row;
use sqlx::any::AnyRow;

use super::schema::{self, count, primary_key};
use super::{Batch, Cell, ColumnKind, NOT_COPIED, TABLES, TableCount, TableHeader, quoted};
use crate::connect::Backend;
use crate::{Store, StoreError};

/// Rows read per query.
const BATCH_ROWS: usize = 500;

struct Table {
    header: TableHeader,
    rows: u64,
    /// Positions of the primary key's columns in the header (keyset paging).
    key: Vec<usize>,
}

/// A read-only view of the whole database as it was when it was taken (a
/// read transaction: `REPEATABLE READ` on PostgreSQL, a WAL snapshot on
/// SQLite), so a copy taken while a daemon writes is still consistent.
pub struct Snapshot {
    tx: Option<sqlx::Transaction<'static, sqlx::Any>>,
    tables: Vec<Table>,
    /// The table being read and the key of its last row read.
    at: usize,
    after: Option<Vec<Cell>>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("tables", &self.tables.len())
            .field("at", &self.at)
            .finish()
    }
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Writes a consistent copy of a SQLite database to `path` (which must
    /// not exist) with `VACUUM INTO`, while other connections and processes
    /// go on reading and writing. PostgreSQL has no file to copy: use
    /// [`Store::snapshot`].
    pub async fn vacuum_into(&self, path: &std::path::Path) -> Result<(), StoreError> {
        if self.backend() != Backend::Sqlite {
            return Err(StoreError::Copy {
                table: "*".to_string(),
                message: "VACUUM INTO is SQLite's; take a snapshot of PostgreSQL instead"
                    .to_string(),
            });
        }
        let target = path.to_string_lossy().into_owned();
        sqlx::query("VACUUM INTO $1")
            .bind(target)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Starts a snapshot of every copied table. Refuses a database holding
    /// a table the copier does not know (its rows would be left behind).
    pub async fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let backend = self.backend();
        let mut tx = match backend {
            Backend::Sqlite => self.pool().begin().await?,
            Backend::Postgres => {
                self.pool()
                    .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                    .await?
            }
        };
        for name in schema::tables(&mut *tx, backend).await? {
            if super::spec(&name).is_none() && !NOT_COPIED.contains(&name.as_str()) {
                return Err(StoreError::Copy {
                    table: name,
                    message: "is not known to this cairn's copier; nothing was copied".to_string(),
                });
            }
        }
        let mut tables = Vec::with_capacity(TABLES.len());
        for spec in TABLES {
            let columns = schema::columns(&mut *tx, backend, spec.name).await?;
            let key_names = primary_key(&mut *tx, backend, spec.name).await?;
            let mut key = Vec::with_capacity(key_names.len());
            for name in &key_names {
                key.extend(columns.iter().position(|c| &c.name == name));
            }
            if key.is_empty() || key.len() != key_names.len() {
                // Without a usable key every column orders the rows.
                key = (0..columns.len()).collect();
            }
            let rows = count(&mut *tx, spec.name).await?;
            tables.push(Table {
                header: TableHeader {
                    table: spec.name.to_string(),
                    columns,
                },
                rows,
                key,
            });
        }
        Ok(Snapshot {
            tx: Some(tx),
            tables,
            at: 0,
            after: None,
        })
    }
}

#[cairn_store_macros::on_store_runtime]
impl Snapshot {
    /// Every copied table's header, in dependency order.
    pub fn headers(&self) -> Vec<TableHeader> {
        self.tables.iter().map(|t| t.header.clone()).collect()
    }

    /// The rows of every copied table, as counted in the snapshot.
    pub fn counts(&self) -> Vec<TableCount> {
        self.tables
            .iter()
            .map(|t| TableCount {
                table: t.header.table.clone(),
                rows: t.rows,
            })
            .collect()
    }

    /// The next rows, table after table in dependency order; `None` at the end.
    pub async fn next_batch(&mut self) -> Result<Option<Batch>, StoreError> {
        loop {
            let Some(table) = self.tables.get(self.at) else {
                if let Some(tx) = self.tx.take() {
                    tx.rollback().await?;
                }
                return Ok(None);
            };
            let Some(tx) = self.tx.as_mut() else {
                return Ok(None);
            };
            let sql = page_query(table, self.after.is_some());
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            if let Some(after) = &self.after {
                for cell in after {
                    query = bind(query, cell, ColumnKind::Text);
                }
            }
            let rows = query.fetch_all(&mut **tx).await?;
            if rows.is_empty() {
                self.at += 1;
                self.after = None;
                continue;
            }
            let mut out = Vec::with_capacity(rows.len());
            for row in &rows {
                out.push(cells(&table.header, row)?);
            }
            self.after = out
                .last()
                .map(|last| table.key.iter().map(|&i| last[i].clone()).collect());
            return Ok(Some(Batch {
                table: table.header.table.clone(),
                rows: out,
            }));
        }
    }
}

/// `SELECT` of one page, after the last key read (`$1…`) when `after`.
fn page_query(table: &Table, after: bool) -> String {
    let cols: Vec<String> = table
        .header
        .columns
        .iter()
        .map(|c| quoted(&c.name))
        .collect();
    let key: Vec<String> = table
        .key
        .iter()
        .map(|&i| quoted(&table.header.columns[i].name))
        .collect();
    let filter = if after {
        let params: Vec<String> = (1..=key.len()).map(|i| format!("${i}")).collect();
        format!(" WHERE ({}) > ({})", key.join(", "), params.join(", "))
    } else {
        String::new()
    };
    format!(
        "SELECT {} FROM {}{filter} ORDER BY {} LIMIT {BATCH_ROWS}",
        cols.join(", "),
        quoted(&table.header.table),
        key.join(", ")
    )
}

/// Reads one row as cells, by the header's kinds.
fn cells(header: &TableHeader, row: &AnyRow) -> Result<Vec<Cell>, StoreError> {
    let corrupt = |column: &str, e: sqlx::Error| StoreError::Copy {
        table: header.table.clone(),
        message: format!("column {column}: {e}"),
    };
    let mut out = Vec::with_capacity(header.columns.len());
    for (i, column) in header.columns.iter().enumerate() {
        let cell = match column.kind {
            ColumnKind::Int => row
                .try_get::<Option<i64>, _>(i)
                .map(|v| v.map_or(Cell::Null, Cell::Int)),
            ColumnKind::Text => row
                .try_get::<Option<String>, _>(i)
                .map(|v| v.map_or(Cell::Null, Cell::Text)),
            ColumnKind::Bytes => row
                .try_get::<Option<Vec<u8>>, _>(i)
                .map(|v| v.map_or(Cell::Null, Cell::Bytes)),
        }
        .map_err(|e| corrupt(&column.name, e))?;
        out.push(cell);
    }
    Ok(out)
}

/// Binds a cell; a NULL is bound with the type of `null_kind`.
pub(super) fn bind<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    cell: &Cell,
    null_kind: ColumnKind,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    match cell {
        Cell::Int(n) => query.bind(*n),
        Cell::Text(s) => query.bind(s.clone()),
        Cell::Bytes(b) => query.bind(b.clone()),
        Cell::Null => match null_kind {
            ColumnKind::Int => query.bind(None::<i64>),
            ColumnKind::Text => query.bind(None::<String>),
            ColumnKind::Bytes => query.bind(None::<Vec<u8>>),
        },
    }
}
