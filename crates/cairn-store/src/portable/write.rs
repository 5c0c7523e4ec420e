//! Writing copied rows into a database: one transaction for the whole copy,
//! an empty target unless told to replace it, counts checked before commit.

use std::collections::BTreeMap;

use super::read::bind;
use super::schema::{self, count, primary_key};
use super::{Batch, Cell, Column, TABLES, TableCount, TableHeader, backend_only, quoted, spec};
use crate::connect::WriteTx;
use crate::{Store, StoreError};

/// Bound parameters per INSERT (well under SQLite's and PostgreSQL's limits).
const PARAMS_PER_STATEMENT: usize = 1_000;

/// How one table's incoming rows land in the target.
struct Plan {
    /// The incoming table's columns.
    source: TableHeader,
    /// Positions in an incoming row of the columns written, and those columns.
    written: Vec<(usize, Column)>,
    /// Positions (in `written`) of the self-referencing columns, set after the rows are in.
    deferred: Vec<usize>,
    /// Positions (in an incoming row) of the target's primary key, for those updates.
    key: Vec<(usize, Column)>,
    rows: u64,
}

/// A self-reference to set once its table is complete.
struct Deferred {
    table: String,
    /// The row's primary key cells.
    key: Vec<Cell>,
    /// Column names and the values they take.
    sets: Vec<(String, Cell)>,
}

/// A copy being written into this store (see [`Store::begin_import`]).
pub struct Import {
    tx: Option<WriteTx>,
    plans: BTreeMap<String, Plan>,
    /// Self-references to set once every row is in.
    pending: Vec<Deferred>,
}

impl std::fmt::Debug for Import {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Import")
            .field("tables", &self.plans.len())
            .finish()
    }
}

fn problem(table: &str, message: impl Into<String>) -> StoreError {
    StoreError::Copy {
        table: table.to_string(),
        message: message.into(),
    }
}

/// Matches the incoming columns with the target's: the same names and kinds,
/// apart from columns only one backend has.
fn plan(source: &TableHeader, target: &[Column], key: &[String]) -> Result<Plan, StoreError> {
    let table = source.table.as_str();
    let mut written = Vec::new();
    for (i, column) in source.columns.iter().enumerate() {
        match target.iter().find(|t| t.name == column.name) {
            Some(t) if t.kind == column.kind => written.push((i, column.clone())),
            Some(t) => {
                return Err(problem(
                    table,
                    format!(
                        "column {} is {:?} here but {:?} in the source",
                        column.name, t.kind, column.kind
                    ),
                ));
            }
            None if backend_only(table, &column.name) => {}
            None => {
                return Err(problem(
                    table,
                    format!(
                        "column {} of the source is not in this database; is its schema older?",
                        column.name
                    ),
                ));
            }
        }
    }
    if let Some(missing) = target
        .iter()
        .find(|t| !backend_only(table, &t.name) && !source.columns.iter().any(|c| c.name == t.name))
    {
        return Err(problem(
            table,
            format!(
                "column {} of this database is not in the source; is the source's schema older?",
                missing.name
            ),
        ));
    }
    let self_refs = spec(table).map_or(&[][..], |s| s.self_refs);
    let deferred = written
        .iter()
        .enumerate()
        .filter(|(_, (_, c))| self_refs.contains(&c.name.as_str()))
        .map(|(i, _)| i)
        .collect();
    let key = key
        .iter()
        .filter_map(|name| {
            source
                .columns
                .iter()
                .position(|c| &c.name == name)
                .map(|i| (i, source.columns[i].clone()))
        })
        .collect::<Vec<_>>();
    if !self_refs.is_empty() && key.is_empty() {
        return Err(problem(table, "has self-references but no primary key"));
    }
    Ok(Plan {
        source: source.clone(),
        written,
        deferred,
        key,
        rows: 0,
    })
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Starts writing a copy whose tables are `headers` into this database,
    /// in one transaction. Refuses a target holding data (rows a migration
    /// seeds aside) unless `replace`, which empties every copied table first.
    pub async fn begin_import(
        &self,
        headers: &[TableHeader],
        replace: bool,
    ) -> Result<Import, StoreError> {
        let backend = self.backend();
        let mut tx = self.begin_write().await?;
        let mut plans = BTreeMap::new();
        for header in headers {
            if spec(&header.table).is_none() {
                return Err(problem(&header.table, "is not a table cairn copies"));
            }
            let target = schema::columns(&mut *tx, backend, &header.table).await?;
            let key = primary_key(&mut *tx, backend, &header.table).await?;
            plans.insert(header.table.clone(), plan(header, &target, &key)?);
        }
        for spec in TABLES.iter().rev() {
            if replace || (spec.seeded && plans.contains_key(spec.name)) {
                let sql = format!("DELETE FROM {}", quoted(spec.name));
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(&mut *tx)
                    .await?;
                continue;
            }
            let n = count(&mut *tx, spec.name).await?;
            if n > 0 {
                return Err(StoreError::Conflict(format!(
                    "the target database is not empty: table {} holds {n} row(s); \
                         use --force to replace its contents",
                    spec.name
                )));
            }
        }
        Ok(Import {
            tx: Some(tx),
            plans,
            pending: Vec::new(),
        })
    }
}

#[cairn_store_macros::on_store_runtime]
impl Import {
    /// Writes one batch of rows (tables in dependency order, as a snapshot gives them).
    pub async fn write(&mut self, batch: Batch) -> Result<(), StoreError> {
        let Some(plan) = self.plans.get_mut(&batch.table) else {
            return Err(problem(
                &batch.table,
                "was not announced when the copy began",
            ));
        };
        let Some(tx) = self.tx.as_mut() else {
            return Err(problem(&batch.table, "the copy has already ended"));
        };
        let width = plan.source.columns.len();
        if let Some(bad) = batch.rows.iter().find(|r| r.len() != width) {
            return Err(problem(
                &batch.table,
                format!("a row has {} values for {width} columns", bad.len()),
            ));
        }
        let per_statement = (PARAMS_PER_STATEMENT / plan.written.len().max(1)).max(1);
        for chunk in batch.rows.chunks(per_statement) {
            let names: Vec<String> = plan.written.iter().map(|(_, c)| quoted(&c.name)).collect();
            let mut groups = Vec::with_capacity(chunk.len());
            let mut n = 0;
            for _ in chunk {
                let params: Vec<String> = plan
                    .written
                    .iter()
                    .map(|_| {
                        n += 1;
                        format!("${n}")
                    })
                    .collect();
                groups.push(format!("({})", params.join(", ")));
            }
            let sql = format!(
                "INSERT INTO {} ({}) VALUES {}",
                quoted(&batch.table),
                names.join(", "),
                groups.join(", ")
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for row in chunk {
                let mut later = Vec::new();
                for (k, (i, column)) in plan.written.iter().enumerate() {
                    let cell = &row[*i];
                    if plan.deferred.contains(&k) && *cell != Cell::Null {
                        later.push((column.name.clone(), cell.clone()));
                        query = bind(query, &Cell::Null, column.kind);
                    } else {
                        query = bind(query, cell, column.kind);
                    }
                }
                if !later.is_empty() {
                    let key = plan.key.iter().map(|(i, _)| row[*i].clone()).collect();
                    self.pending.push(Deferred {
                        table: batch.table.clone(),
                        key,
                        sets: later,
                    });
                }
            }
            query.execute(&mut **tx).await?;
        }
        plan.rows += batch.rows.len() as u64;
        Ok(())
    }

    /// Sets the deferred self-references, checks every table holds
    /// `expected` rows (and as many as were written), and commits. Returns
    /// the tables' row counts; on any mismatch nothing is kept.
    pub async fn finish(mut self, expected: &[TableCount]) -> Result<Vec<TableCount>, StoreError> {
        let Some(mut tx) = self.tx.take() else {
            return Err(problem("*", "the copy has already ended"));
        };
        for Deferred { table, key, sets } in std::mem::take(&mut self.pending) {
            let Some(plan) = self.plans.get(&table) else {
                continue;
            };
            let mut n = 0;
            let mut assign = Vec::new();
            for (name, _) in &sets {
                n += 1;
                assign.push(format!("{} = ${n}", quoted(name)));
            }
            let mut filter = Vec::new();
            for (_, column) in &plan.key {
                n += 1;
                filter.push(format!("{} = ${n}", quoted(&column.name)));
            }
            let sql = format!(
                "UPDATE {} SET {} WHERE {}",
                quoted(&table),
                assign.join(", "),
                filter.join(" AND ")
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (name, cell) in &sets {
                let kind = plan
                    .written
                    .iter()
                    .find(|(_, c)| &c.name == name)
                    .map_or(super::ColumnKind::Text, |(_, c)| c.kind);
                query = bind(query, cell, kind);
            }
            for ((_, column), cell) in plan.key.iter().zip(&key) {
                query = bind(query, cell, column.kind);
            }
            query.execute(&mut *tx).await?;
        }
        let mut counts = Vec::with_capacity(self.plans.len());
        for spec in TABLES {
            let Some(plan) = self.plans.get(spec.name) else {
                continue;
            };
            let rows = count(&mut *tx, spec.name).await?;
            let want = expected
                .iter()
                .find(|c| c.table == spec.name)
                .map_or(plan.rows, |c| c.rows);
            if rows != want || rows != plan.rows {
                return Err(problem(
                    spec.name,
                    format!(
                        "holds {rows} row(s) after the copy; the source has {want} and {} were written; nothing was kept",
                        plan.rows
                    ),
                ));
            }
            counts.push(TableCount {
                table: spec.name.to_string(),
                rows,
            });
        }
        tx.commit().await?;
        Ok(counts)
    }
}
