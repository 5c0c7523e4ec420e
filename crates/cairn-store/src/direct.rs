//! The writers' own SQLite connection, whose statements run on the thread
//! that asks for them.
//!
//! sqlx runs each SQLite connection on a thread of its own: every
//! statement is a hand-off to that thread and a wake-up back, which cost
//! about a third of a write transaction's time (a batch of 256 run ends:
//! 5 ms, of which its statements took 3.4). The writers' transactions are
//! short, one at a time under their lock, and mostly on the store's own
//! thread (the group commits), so their statements run where they are
//! built. Rows and results come back as sqlx's `Any` types, so the store's
//! code reads them as it reads any other connection's (see `exec.rs`).
//!
//! SQLite's busy handler would sleep on the caller's thread while another
//! process holds the write lock, so this connection has none: `BEGIN
//! IMMEDIATE`, the one statement that waits for the lock, is retried with
//! async sleeps for as long as the busy timeout allows. Once begun, the
//! transaction holds the lock, and in WAL mode its statements and its
//! commit do not wait for anyone.

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fallible_iterator::FallibleIterator;
use futures::future::BoxFuture;
use futures::stream::{self, StreamExt};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags, ffi};
use sqlx::error::{DatabaseError, ErrorKind};
use sqlx::{Either, SqlStr};
use sqlx_core::any::{
    AnyArguments, AnyColumn, AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo, AnyTypeInfoKind,
    AnyValue, AnyValueKind,
};
use sqlx_core::ext::ustr::UStr;

use crate::connect::{SQLITE_BUSY_TIMEOUT_MS, SQLITE_SET_UP};
use crate::exec::{Exec, Steps};

/// Statements kept prepared, as sqlx keeps them (a batch's multi-row
/// statements come in a few sizes each).
const CACHED_STATEMENTS: usize = 100;

/// The first and the longest pause between tries to begin while another
/// process writes.
const BUSY_FIRST_PAUSE: Duration = Duration::from_micros(500);
const BUSY_LONGEST_PAUSE: Duration = Duration::from_millis(50);

/// What a statement yields, in order: its rows, then its count of changes.
type Step = Either<AnyQueryResult, AnyRow>;

/// A SQLite connection whose statements run on the calling thread.
pub(crate) struct Direct {
    conn: Connection,
}

impl std::fmt::Debug for Direct {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Direct")
            .field("path", &self.conn.path())
            .finish()
    }
}

impl Direct {
    /// Opens the database file at `path` (which exists: the pool opened it
    /// first), set up as every SQLite connection of the store.
    pub(crate) fn open(path: &Path) -> Result<Direct, sqlx::Error> {
        // A plain path, never a `file:` URI; one thread at a time (`&mut`).
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(error)?;
        for pragma in SQLITE_SET_UP {
            conn.execute_batch(pragma).map_err(error)?;
        }
        conn.busy_timeout(Duration::ZERO).map_err(error)?;
        conn.set_prepared_statement_cache_capacity(CACHED_STATEMENTS);
        Ok(Direct { conn })
    }

    /// `BEGIN IMMEDIATE`, waiting (without holding the thread) while
    /// another process holds the write lock, up to the busy timeout.
    pub(crate) async fn begin_immediate(&mut self) -> Result<(), sqlx::Error> {
        let deadline = Instant::now() + Duration::from_millis(SQLITE_BUSY_TIMEOUT_MS.into());
        let mut pause = BUSY_FIRST_PAUSE;
        loop {
            match self.run("BEGIN IMMEDIATE", None) {
                Ok(_) => return Ok(()),
                Err(e) if is_busy(&e) && Instant::now() + pause < deadline => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(BUSY_LONGEST_PAUSE);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs a statement without parameters or rows (`COMMIT`, `ROLLBACK`).
    pub(crate) fn run_plain(&mut self, sql: &str) -> Result<(), sqlx::Error> {
        self.run(sql, None).map(drop)
    }

    /// Prepares `sql` into the connection's statement cache, where its
    /// later runs find it (`Store::prepare_run_ends`). What it returns
    /// knows its parameters' count, not its columns: nothing reads those.
    fn prepare(&mut self, sql: SqlStr) -> Result<AnyStatement, sqlx::Error> {
        let parameters = self
            .conn
            .prepare_cached(sql.as_str())
            .map_err(error)?
            .parameter_count();
        Ok(AnyStatement {
            sql,
            parameters: Some(Either::Right(parameters)),
            column_names: Arc::default(),
            columns: Vec::new(),
        })
    }

    /// Closes the connection (rolling back a transaction left open).
    pub(crate) fn close(self) {
        if let Err((_, e)) = self.conn.close() {
            tracing::debug!(error = %e, "closing the writers' connection");
        }
    }

    /// Runs `sql` with `args`: each statement's rows, then how many rows
    /// it changed, as sqlx's driver yields them. Logged as sqlx logs its
    /// connections' statements (`sqlx::query` at debug), so that one
    /// filter shows every statement.
    fn run(&mut self, sql: &str, args: Option<AnyArguments>) -> Result<Vec<Step>, sqlx::Error> {
        if !tracing::enabled!(target: "sqlx::query", tracing::Level::DEBUG) {
            return self.run_unlogged(sql, args);
        }
        let started = Instant::now();
        let ran = self.run_unlogged(sql, args);
        let elapsed = started.elapsed();
        let (mut rows_affected, mut rows_returned) = (0, 0);
        for step in ran.iter().flatten() {
            match step {
                Either::Left(done) => rows_affected += done.rows_affected,
                Either::Right(_) => rows_returned += 1,
            }
        }
        let summary: String = sql.split_whitespace().take(4).collect::<Vec<_>>().join(" ");
        tracing::debug!(
            target: "sqlx::query",
            summary,
            db.statement = sql,
            rows_affected,
            rows_returned,
            ?elapsed,
            elapsed_secs = elapsed.as_secs_f64(),
        );
        ran
    }

    fn run_unlogged(
        &mut self,
        sql: &str,
        args: Option<AnyArguments>,
    ) -> Result<Vec<Step>, sqlx::Error> {
        let values = args.map(|a| a.values.0).unwrap_or_default();
        let mut steps = Vec::new();
        match self.conn.prepare_cached(sql) {
            Ok(mut stmt) => run_statement(&self.conn, &mut stmt, &values, &mut steps)?,
            // Several statements in one text (a migration's), run one after
            // the other as sqlx's own SQLite driver runs them: each is
            // prepared once the one before ran (it may create a table the
            // next one names). Only without parameters here.
            Err(_) if values.is_empty() => {
                let mut batch = rusqlite::Batch::new(&self.conn, sql);
                while let Some(mut stmt) = batch.next().map_err(error)? {
                    run_statement(&self.conn, &mut stmt, &[], &mut steps)?;
                }
            }
            Err(e) => return Err(error(e)),
        }
        Ok(steps)
    }
}

/// Runs a prepared statement with `values`: its rows, then how many rows
/// it changed, onto `steps`.
fn run_statement(
    conn: &Connection,
    stmt: &mut rusqlite::Statement<'_>,
    values: &[AnyValueKind],
    steps: &mut Vec<Step>,
) -> Result<(), sqlx::Error> {
    bind_all(stmt, values)?;
    let columns = stmt.column_count();
    if columns == 0 {
        let changed = stmt.raw_execute().map_err(error)?;
        steps.push(Either::Left(result(changed as u64)));
        return Ok(());
    }
    let readonly = stmt.readonly();
    let names: Vec<UStr> = stmt.column_names().into_iter().map(UStr::new).collect();
    let index: Arc<sqlx_core::HashMap<UStr, usize>> = Arc::new(
        names
            .iter()
            .enumerate()
            .map(|(i, name)| (name.clone(), i))
            .collect(),
    );
    let any_columns: Vec<AnyColumn> = names
        .into_iter()
        .enumerate()
        .map(|(ordinal, name)| AnyColumn {
            ordinal,
            name,
            type_info: AnyTypeInfo {
                kind: AnyTypeInfoKind::Null,
            },
        })
        .collect();
    let mut rows = stmt.raw_query();
    while let Some(row) = rows.next().map_err(error)? {
        let mut values = Vec::with_capacity(columns);
        for (i, column) in any_columns.iter().enumerate() {
            values.push(AnyValue {
                kind: value(row.get_ref(i).map_err(error)?, &column.name)?,
            });
        }
        steps.push(Either::Right(AnyRow {
            column_names: Arc::clone(&index),
            columns: any_columns.clone(),
            values,
        }));
    }
    let changed = if readonly {
        0
    } else {
        // Counted once its last row was read, as sqlx's driver reports it.
        drop(rows);
        conn.changes()
    };
    steps.push(Either::Left(result(changed)));
    Ok(())
}

fn result(rows_affected: u64) -> AnyQueryResult {
    AnyQueryResult {
        rows_affected,
        last_insert_id: None,
    }
}

/// Binds `values` as sqlx's SQLite driver does: `$N` and `?N` take value
/// N (however often and in whatever order they appear), a bare `?` the
/// next in turn; a parameter past the values stays NULL.
fn bind_all(
    stmt: &mut rusqlite::Statement<'_>,
    values: &[AnyValueKind],
) -> Result<(), sqlx::Error> {
    let mut in_turn = 0;
    for at in 1..=stmt.parameter_count() {
        let n = match stmt.parameter_name(at) {
            None => {
                in_turn += 1;
                in_turn
            }
            Some(name) => name
                .strip_prefix(['$', '?'])
                .and_then(|digits| digits.parse::<usize>().ok())
                .ok_or_else(|| {
                    sqlx::Error::InvalidArgument(format!(
                        "parameter {name}: only $N, ?N and ? are bound"
                    ))
                })?,
        };
        let Some(value) = n.checked_sub(1).and_then(|i| values.get(i)) else {
            break;
        };
        bind(stmt, at, value)?;
    }
    Ok(())
}

/// Binds parameter `at` (from 1) as sqlx's SQLite driver would.
fn bind(
    stmt: &mut rusqlite::Statement<'_>,
    at: usize,
    value: &AnyValueKind,
) -> Result<(), sqlx::Error> {
    let bound = match value {
        AnyValueKind::Null(_) => stmt.raw_bind_parameter(at, rusqlite::types::Null),
        AnyValueKind::Bool(b) => stmt.raw_bind_parameter(at, i64::from(*b)),
        AnyValueKind::SmallInt(n) => stmt.raw_bind_parameter(at, i64::from(*n)),
        AnyValueKind::Integer(n) => stmt.raw_bind_parameter(at, i64::from(*n)),
        AnyValueKind::BigInt(n) => stmt.raw_bind_parameter(at, *n),
        AnyValueKind::Real(x) => stmt.raw_bind_parameter(at, f64::from(*x)),
        AnyValueKind::Double(x) => stmt.raw_bind_parameter(at, *x),
        AnyValueKind::Text(s) => stmt.raw_bind_parameter(at, s.as_str()),
        AnyValueKind::TextSlice(s) => stmt.raw_bind_parameter(at, &**s),
        AnyValueKind::Blob(b) => stmt.raw_bind_parameter(at, b.as_slice()),
        other => {
            return Err(sqlx::Error::InvalidArgument(format!(
                "parameter {at}: no SQLite form for {other:?}"
            )));
        }
    };
    bound.map_err(error)
}

/// A value read, in the kind sqlx's SQLite driver gives it (by its storage class).
fn value(v: ValueRef<'_>, column: &str) -> Result<AnyValueKind, sqlx::Error> {
    Ok(match v {
        ValueRef::Null => AnyValueKind::Null(AnyTypeInfoKind::Null),
        ValueRef::Integer(n) => AnyValueKind::BigInt(n),
        ValueRef::Real(x) => AnyValueKind::Double(x),
        ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
            Ok(s) => AnyValueKind::Text(Arc::new(s.to_string())),
            Err(e) => {
                return Err(sqlx::Error::ColumnDecode {
                    index: format!("{column:?}"),
                    source: Box::new(e),
                });
            }
        },
        ValueRef::Blob(bytes) => AnyValueKind::Blob(Arc::new(bytes.to_vec())),
    })
}

/// Another connection holds the lock (`SQLITE_BUSY` or `SQLITE_LOCKED`,
/// whatever the extended code).
fn is_busy(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<SqliteFailure>()
            .is_some_and(|f| matches!(f.code & 0xff, ffi::SQLITE_BUSY | ffi::SQLITE_LOCKED)),
        _ => false,
    }
}

/// sqlx's form of a SQLite error: a database error for SQLite's own
/// failures (so that a unique violation is told apart as on sqlx's
/// connections), a driver error for the rest.
fn error(e: rusqlite::Error) -> sqlx::Error {
    match e {
        rusqlite::Error::SqliteFailure(failure, message) => {
            let message = message.unwrap_or_else(|| failure.to_string());
            sqlx::Error::Database(Box::new(SqliteFailure {
                code: failure.extended_code,
                message,
            }))
        }
        other => sqlx::Error::AnyDriverError(Box::new(other)),
    }
}

/// A failure SQLite reported: its extended result code and message.
#[derive(Debug)]
struct SqliteFailure {
    code: i32,
    message: String,
}

impl std::fmt::Display for SqliteFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(code: {}) {}", self.code, self.message)
    }
}

impl std::error::Error for SqliteFailure {}

impl DatabaseError for SqliteFailure {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Owned(self.code.to_string()))
    }

    fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
        self
    }

    fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self
    }

    fn kind(&self) -> ErrorKind {
        match self.code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                ErrorKind::UniqueViolation
            }
            ffi::SQLITE_CONSTRAINT_FOREIGNKEY => ErrorKind::ForeignKeyViolation,
            ffi::SQLITE_CONSTRAINT_NOTNULL => ErrorKind::NotNullViolation,
            ffi::SQLITE_CONSTRAINT_CHECK => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}

impl Exec for Direct {
    fn backend_name(&self) -> &str {
        <sqlx::Sqlite as sqlx::Database>::NAME
    }

    fn run_many<'e>(&'e mut self, sql: SqlStr, args: Option<AnyArguments>) -> Steps<'e> {
        // Run when first polled, as sqlx's connections do.
        stream::once(async move { self.run(sql.as_str(), args) })
            .flat_map(|ran| {
                let steps: Vec<Result<Step, sqlx::Error>> = match ran {
                    Ok(steps) => steps.into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                };
                stream::iter(steps)
            })
            .boxed()
    }

    fn run_optional<'e>(
        &'e mut self,
        sql: SqlStr,
        args: Option<AnyArguments>,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>> {
        Box::pin(async move {
            let steps = self.run(sql.as_str(), args)?;
            Ok(steps.into_iter().find_map(|step| step.right()))
        })
    }

    fn prepare_sql<'e>(
        &'e mut self,
        sql: SqlStr,
        _parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>> {
        Box::pin(async move { self.prepare(sql) })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use sqlx::{Connection, Executor, SqlSafeStr};

    use super::*;
    use crate::exec::Conn;

    /// A fresh database file set up as the store's, and a sqlx connection to it.
    async fn files(dir: &Path, name: &str) -> (PathBuf, sqlx::AnyConnection) {
        sqlx::any::install_default_drivers();
        let path = dir.join(name);
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
        crate::connect::set_up_sqlite(&mut conn).await.unwrap();
        (path, conn)
    }

    /// What a statement gave, written out to compare two connections' answers.
    async fn answer(conn: &mut Conn, sql: &'static str, args: &[AnyValueKind]) -> String {
        let mut query = sqlx::query(sql);
        for arg in args {
            query = match arg.clone() {
                AnyValueKind::BigInt(n) => query.bind(n),
                AnyValueKind::Double(x) => query.bind(x),
                AnyValueKind::Text(s) => query.bind(s.to_string()),
                AnyValueKind::Blob(b) => query.bind(b.to_vec()),
                _ => query.bind(Option::<i64>::None),
            };
        }
        let mut out = String::new();
        let mut steps = conn.fetch_many(query);
        while let Some(step) = futures::StreamExt::next(&mut steps).await {
            match step {
                // sqlx's driver gives a read the count of the change
                // before it; the store reads counts of changes only.
                Ok(Either::Left(done)) if !sql.starts_with("SELECT") => {
                    out.push_str(&format!("changed {}; ", done.rows_affected()))
                }
                Ok(Either::Left(_)) => {}
                Ok(Either::Right(row)) => {
                    for (i, column) in row.columns.iter().enumerate() {
                        // A NULL's kind is its column's declared type on
                        // sqlx's driver; nothing reads it (a NULL decodes
                        // as `None` whatever its kind).
                        let v = match &row.values[i].kind {
                            AnyValueKind::Null(_) => "NULL".to_string(),
                            v => format!("{v:?}"),
                        };
                        out.push_str(&format!("{}={v} ", column.name));
                    }
                    out.push_str("; ");
                }
                Err(sqlx::Error::Database(e)) => {
                    out.push_str(&format!(
                        "unique {} {}; ",
                        e.is_unique_violation(),
                        e.message()
                    ));
                }
                Err(e) => out.push_str(&format!("error {e}; ")),
            }
        }
        out
    }

    /// Statements give on the writers' own connection what they give on
    /// sqlx's: parameters bound by number, repeated, out of order and in
    /// turn; every kind of value read back; the rows a change touched,
    /// with and without `RETURNING`; a unique violation told apart.
    #[tokio::test]
    async fn statements_answer_as_on_sqlx_connections() {
        let dir = tempfile::tempdir().unwrap();
        let (_, mut theirs) = files(dir.path(), "sqlx.db").await;
        let (path, _opened) = files(dir.path(), "direct.db").await;
        let mut ours = Direct::open(&path).unwrap();
        let text = |s: &str| AnyValueKind::Text(Arc::new(s.to_string()));
        let script: Vec<(&'static str, Vec<AnyValueKind>)> = vec![
            (
                "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, r REAL, s TEXT UNIQUE, b BLOB)",
                vec![],
            ),
            (
                "INSERT INTO t (id, n, r, s, b) VALUES ($1, $3, $2, $4, $5), ($6, $1, NULL, $7, NULL)",
                vec![
                    AnyValueKind::BigInt(1),
                    AnyValueKind::Double(2.5),
                    AnyValueKind::BigInt(-7),
                    text("one"),
                    AnyValueKind::Blob(Arc::new(vec![0, 159, 255])),
                    AnyValueKind::BigInt(2),
                    text("two"),
                ],
            ),
            (
                "INSERT INTO t (id, s) VALUES (?, ?), (?, ?)",
                vec![
                    AnyValueKind::BigInt(3),
                    text("three"),
                    AnyValueKind::BigInt(4),
                    text("four"),
                ],
            ),
            ("SELECT id, n, r, s, b FROM t ORDER BY id", vec![]),
            (
                "SELECT $2 AS second, $1 AS first, $1 AS again, ? AS in_turn",
                vec![text("a"), AnyValueKind::BigInt(9)],
            ),
            (
                "UPDATE t SET n = COALESCE(n, 0) + $1 WHERE id >= $2",
                vec![AnyValueKind::BigInt(10), AnyValueKind::BigInt(2)],
            ),
            (
                "UPDATE t SET n = n * 2 WHERE id > $1 RETURNING id, n",
                vec![AnyValueKind::BigInt(2)],
            ),
            (
                "INSERT INTO t (id, s) VALUES ($1, $2)",
                vec![AnyValueKind::BigInt(5), text("one")],
            ),
            ("DELETE FROM t WHERE id = $1", vec![AnyValueKind::BigInt(4)]),
            (
                "SELECT COUNT(*) AS n, MAX(r) AS most, NULL AS nothing FROM t",
                vec![],
            ),
            (
                "CREATE TABLE u (x INTEGER); CREATE INDEX u_x ON u (x); INSERT INTO u (x) VALUES (1), (2)",
                vec![],
            ),
            ("SELECT x FROM u ORDER BY x", vec![]),
        ];
        for (sql, args) in script {
            let expected = answer(&mut theirs, sql, &args).await;
            let got = answer(&mut ours, sql, &args).await;
            assert_eq!(got, expected, "{sql}");
        }
        // The texts differ: sqlx's says where its code was; the counts agree.
        ours.close();
    }

    /// A statement prepared ahead knows its parameters and runs later as
    /// if prepared then; a statement that cannot be prepared is an error.
    #[tokio::test]
    async fn a_statement_prepared_ahead_runs_later() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _opened) = files(dir.path(), "direct.db").await;
        let mut ours = Direct::open(&path).unwrap();
        let conn: &mut Conn = &mut ours;
        sqlx::query("CREATE TABLE t (a INTEGER, b TEXT)")
            .execute(&mut *conn)
            .await
            .unwrap();
        let insert = "INSERT INTO t (a, b) VALUES (?, ?), (?, ?)";
        let prepared = conn.prepare(insert.into_sql_str()).await.unwrap();
        assert_eq!(
            sqlx::Statement::parameters(&prepared),
            Some(Either::Right(4))
        );
        let done = sqlx::query(insert)
            .bind(1_i64)
            .bind("one")
            .bind(2_i64)
            .bind("two")
            .execute(&mut *conn)
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 2);
        assert_eq!(
            answer(conn, "SELECT a, b FROM t ORDER BY a", &[]).await,
            "a=BigInt(1) b=Text(\"one\") ; a=BigInt(2) b=Text(\"two\") ; "
        );
        let bad = conn
            .prepare("INSERT INTO nowhere VALUES (?)".into_sql_str())
            .await;
        assert!(
            bad.is_err_and(|e| e.to_string().contains("no such table: nowhere")),
            "a statement naming no table cannot be prepared"
        );
    }

    /// Both kinds of connection are set up alike, with statement journals
    /// in memory (none written under /var/tmp).
    #[tokio::test]
    async fn both_connections_keep_statement_journals_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut theirs) = files(dir.path(), "m.db").await;
        let mut ours = Direct::open(&path).unwrap();
        for conn in [&mut theirs as &mut Conn, &mut ours] {
            let row = conn.fetch_one("PRAGMA temp_store").await.unwrap();
            assert_eq!(sqlx::Row::get::<i64, _>(&row, 0), 2, "MEMORY");
            let row = conn.fetch_one("PRAGMA journal_mode").await.unwrap();
            assert_eq!(sqlx::Row::get::<String, _>(&row, 0), "wal");
        }
        ours.close();
    }

    /// While another connection holds the write lock, beginning waits
    /// without holding its thread (the other task on it goes on), and
    /// begins once the lock is free.
    #[tokio::test]
    async fn beginning_waits_for_the_lock_without_holding_the_thread() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _opened) = files(dir.path(), "w.db").await;
        let mut first = Direct::open(&path).unwrap();
        let mut second = Direct::open(&path).unwrap();
        first.begin_immediate().await.unwrap();
        let ticks = std::sync::atomic::AtomicU32::new(0);
        let holder = async {
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            let at_commit = ticks.load(std::sync::atomic::Ordering::SeqCst);
            first.run_plain("COMMIT").unwrap();
            at_commit
        };
        let waiter = async {
            second.begin_immediate().await.unwrap();
            ticks.load(std::sync::atomic::Ordering::SeqCst)
        };
        let (at_commit, at_begin) = tokio::join!(holder, waiter);
        assert_eq!(at_commit, 20);
        assert_eq!(
            at_begin, 20,
            "began before the lock was free, or held the thread"
        );
        second.run_plain("COMMIT").unwrap();
    }
}
