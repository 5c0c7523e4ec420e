//! [`Exec`]: the one interface the store's statements run through, so that
//! a write transaction runs them on whichever connection it holds: a sqlx
//! connection (PostgreSQL, a pooled or in-memory SQLite one), or the
//! writers' own SQLite connection, which runs them on the calling thread
//! (see `writer/own.rs`).
//!
//! `&mut dyn Exec` is a sqlx [`Executor`], so a statement is written as
//! anywhere else: `sqlx::query(..).bind(..).execute(&mut *conn)`.

use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt};
use sqlx::any::{AnyArguments, AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::{Any, AnyConnection, Either, Execute, Executor, SqlStr};

/// What a statement yields: its results and its rows, in order.
pub(crate) type Steps<'e> = BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>;

/// A connection the store's statements run on, as the store's functions
/// take it (`&mut Conn`).
pub(crate) type Conn = dyn Exec;

/// What a connection the store's statements run on does.
pub(crate) trait Exec: Send + std::fmt::Debug {
    /// sqlx's name of the database (`PostgreSQL`, `SQLite`).
    fn backend_name(&self) -> &str;

    /// Runs `sql` with `args`.
    fn run_many<'e>(&'e mut self, sql: SqlStr, args: Option<AnyArguments>) -> Steps<'e>;

    /// Runs `sql` with `args`, for its first row.
    fn run_optional<'e>(
        &'e mut self,
        sql: SqlStr,
        args: Option<AnyArguments>,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>;

    /// Prepares `sql` (sqlx's `prepare`; the writers' own connection keeps
    /// it for its later runs, see `Store::prepare_run_ends`).
    fn prepare_sql<'e>(
        &'e mut self,
        sql: SqlStr,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>>;
}

impl Exec for AnyConnection {
    fn backend_name(&self) -> &str {
        AnyConnection::backend_name(self)
    }

    fn run_many<'e>(&'e mut self, sql: SqlStr, args: Option<AnyArguments>) -> Steps<'e> {
        Executor::fetch_many(self, (sql, args))
    }

    fn run_optional<'e>(
        &'e mut self,
        sql: SqlStr,
        args: Option<AnyArguments>,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>> {
        Executor::fetch_optional(self, (sql, args))
    }

    fn prepare_sql<'e>(
        &'e mut self,
        sql: SqlStr,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>> {
        Executor::prepare_with(self, sql, parameters)
    }
}

/// A query's text and arguments, or the error of encoding them.
fn parts<'q, E: Execute<'q, Any>>(
    mut query: E,
) -> Result<(SqlStr, Option<AnyArguments>), sqlx::Error> {
    let args = query.take_arguments().map_err(sqlx::Error::Encode)?;
    Ok((query.sql(), args))
}

impl<'c> Executor<'c> for &'c mut Conn {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> Steps<'e>
    where
        'c: 'e,
        E: 'q + Execute<'q, Any>,
    {
        match parts(query) {
            Ok((sql, args)) => self.run_many(sql, args),
            Err(e) => stream::once(async move { Err(e) }).boxed(),
        }
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Any>,
    {
        match parts(query) {
            Ok((sql, args)) => self.run_optional(sql, args),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        self.prepare_sql(sql, parameters)
    }
}
