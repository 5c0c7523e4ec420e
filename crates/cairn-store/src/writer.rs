//! Write transactions: this process's writers take turns, and on a SQLite
//! file they all write on one connection of their own.
//!
//! SQLite has one writer at a time. Our writers queue on a lock first:
//! SQLite's busy handler waits by sleeping (growing to 100 ms), so two of
//! our own transactions contending for the file lock would idle the loser
//! far longer than the winner holds it. Other processes' writers queue on
//! the busy timeout (`BEGIN IMMEDIATE` takes the lock up front, so that
//! none fails when a read transaction tries to upgrade).
//!
//! On a SQLite file the lock is on the connection every write transaction
//! runs on, not a pooled one: sqlx pings a pooled connection as it comes
//! back (a round trip to its thread, from a task of its own), and each
//! pooled connection lost its page cache to the others' commits and
//! prepared a batch's statements again. It is opened at the first write,
//! and closed once idle ([`SQLITE_IDLE`]: its page cache and prepared
//! statements go with it) or when a transaction on it was dropped
//! unfinished: closing it rolls back and frees SQLite's lock at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use sqlx::AnyPool;

use crate::connect::{Backend, SQLITE_IDLE};
use crate::direct::Direct;
use crate::exec::Conn;
use crate::runtime;
use crate::signal::{self, Hub, Topic};

/// Where this process's write transactions run.
#[derive(Debug, Clone)]
pub(crate) enum Writer {
    /// A SQLite file: a connection of their own, under its lock.
    Own(Arc<tokio::sync::Mutex<OwnWriter>>),
    /// The pool's connections: an in-memory SQLite database (one
    /// connection, under the lock), or PostgreSQL (no lock).
    Pooled(Option<Arc<tokio::sync::Mutex<()>>>),
}

impl Writer {
    /// Whether write transactions run on a connection of their own.
    pub(crate) fn is_own(&self) -> bool {
        matches!(self, Writer::Own(_))
    }

    /// A writer's turn: the lock, then the transaction begun on `backend`.
    pub(crate) async fn begin(
        &self,
        pool: &AnyPool,
        backend: Backend,
        hub: Arc<Hub>,
    ) -> Result<WriteTx, sqlx::Error> {
        let conn = match self {
            Writer::Own(writer) => {
                let mut own = Arc::clone(writer).lock_owned().await;
                let conn = own.begin().await?;
                if !own.close_due
                    && let Ok(handle) = runtime::handle()
                {
                    own.close_due = true;
                    handle.spawn(close_when_idle(Arc::clone(writer)));
                }
                TxConn::Own(OwnTx { conn, own })
            }
            Writer::Pooled(Some(lock)) => {
                let guard = Arc::clone(lock).lock_owned().await;
                TxConn::Pooled(pool.begin_with("BEGIN IMMEDIATE").await?, Some(guard))
            }
            Writer::Pooled(None) => TxConn::Pooled(pool.begin().await?, None),
        };
        // Counted once begun: while it is open, no other process commits.
        let own_write = match backend {
            Backend::Sqlite => Some(hub.own_writes().open()),
            Backend::Postgres => None,
        };
        Ok(WriteTx {
            conn,
            _own_write: own_write,
            backend,
            hub,
            published: Vec::new(),
        })
    }

    /// No transaction begins after this on the writers' own connection,
    /// which closes.
    pub(crate) async fn close(&self) {
        if let Writer::Own(writer) = self {
            let mut own = writer.lock().await;
            own.closed = true;
            own.close_connection().await;
        }
    }
}

/// The writers' own connection, when open.
#[derive(Debug)]
pub(crate) struct OwnWriter {
    /// Taken by the transaction in progress, given back when it ends.
    conn: Option<Direct>,
    /// The database file.
    path: PathBuf,
    /// The store was closed: no transaction begins.
    closed: bool,
    /// When the last transaction began.
    used_at: Instant,
    /// A task waits to close the connection once it has been idle.
    close_due: bool,
}

impl OwnWriter {
    pub(crate) fn new(path: PathBuf) -> OwnWriter {
        OwnWriter {
            conn: None,
            path,
            closed: false,
            used_at: Instant::now(),
            close_due: false,
        }
    }

    /// The connection with `BEGIN IMMEDIATE` run on it (opened if need be).
    async fn begin(&mut self) -> Result<Direct, sqlx::Error> {
        if self.closed {
            return Err(sqlx::Error::PoolClosed);
        }
        self.used_at = Instant::now();
        let mut conn = match self.conn.take() {
            Some(conn) => conn,
            None => Direct::open(&self.path)?,
        };
        match conn.begin_immediate().await {
            Ok(_) => Ok(conn),
            Err(e) => {
                // Nothing began (busy, say): the connection is as it was.
                self.conn = Some(conn);
                Err(e)
            }
        }
    }

    async fn close_connection(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.close();
        }
    }
}

/// Closes the writers' connection once no transaction has begun on it for
/// [`SQLITE_IDLE`]; a later transaction starts another such task.
async fn close_when_idle(writer: Arc<tokio::sync::Mutex<OwnWriter>>) {
    loop {
        let due = writer.lock().await.used_at + SQLITE_IDLE;
        tokio::time::sleep_until(due.into()).await;
        let mut own = writer.lock().await;
        if own.used_at + SQLITE_IDLE <= Instant::now() {
            own.close_connection().await;
            own.close_due = false;
            return;
        }
    }
}

/// A write transaction's connection.
enum TxConn {
    /// A pooled connection's transaction, with the writer lock on SQLite.
    Pooled(
        sqlx::Transaction<'static, sqlx::Any>,
        Option<tokio::sync::OwnedMutexGuard<()>>,
    ),
    /// The writers' own connection, and their lock. Dropped unfinished (an
    /// error, or its caller went away), the connection closes, which rolls
    /// back; the next transaction opens another.
    Own(OwnTx),
}

struct OwnTx {
    conn: Direct,
    own: tokio::sync::OwnedMutexGuard<OwnWriter>,
}

impl OwnTx {
    /// `COMMIT` or `ROLLBACK`, and the connection given back; after an
    /// error it closes instead (rolling back what may be left open).
    async fn end(self, sql: &'static str) -> Result<(), sqlx::Error> {
        let OwnTx { mut conn, mut own } = self;
        conn.run_plain(sql)?;
        own.conn = Some(conn);
        Ok(())
    }
}

/// A write transaction, holding this process's SQLite writer lock while it lasts.
pub(crate) struct WriteTx {
    conn: TxConn,
    /// This process's open writes, counted (SQLite) until after the commit
    /// or rollback (or the drop).
    _own_write: Option<signal::OpenWrite>,
    backend: Backend,
    hub: Arc<Hub>,
    /// Topics published in this transaction (with SQLite's new counter values).
    published: Vec<(Topic, Option<i64>)>,
}

impl WriteTx {
    /// Publishes `topic` with this transaction: other processes hear it
    /// when (and only if) it commits, this process's waiters right after.
    pub(crate) async fn publish(&mut self, topic: Topic) -> Result<(), sqlx::Error> {
        if self.published.iter().any(|(t, _)| *t == topic) {
            return Ok(());
        }
        let (backend, hub) = (self.backend, Arc::clone(&self.hub));
        let counted = signal::publish_in(&mut **self, backend, hub.id(), topic).await?;
        self.published.push((topic, counted));
        Ok(())
    }

    /// Commits, then wakes this process's waiters of the published topics.
    pub(crate) async fn commit(self) -> Result<(), sqlx::Error> {
        let WriteTx {
            conn,
            _own_write,
            hub,
            published,
            ..
        } = self;
        match conn {
            TxConn::Pooled(tx, lock) => {
                tx.commit().await?;
                drop(lock);
            }
            TxConn::Own(own) => own.end("COMMIT").await?,
        }
        drop(_own_write);
        hub.committed(&published);
        Ok(())
    }

    /// Rolls back.
    pub(crate) async fn rollback(self) -> Result<(), sqlx::Error> {
        match self.conn {
            TxConn::Pooled(tx, _lock) => tx.rollback().await,
            TxConn::Own(own) => own.end("ROLLBACK").await,
        }
    }
}

impl std::ops::Deref for WriteTx {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        match &self.conn {
            TxConn::Pooled(tx, _) => &**tx,
            TxConn::Own(own) => &own.conn,
        }
    }
}

impl std::ops::DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut Conn {
        match &mut self.conn {
            TxConn::Pooled(tx, _) => &mut **tx,
            TxConn::Own(own) => &mut own.conn,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Store;

    async fn count(store: &Store) -> i64 {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM t")
            .fetch_one(store.pool())
            .await
            .unwrap();
        sqlx::Row::try_get(&row, "n").unwrap()
    }

    async fn insert(tx: &mut WriteTx) {
        sqlx::query("INSERT INTO t (x) VALUES (1)")
            .execute(&mut **tx)
            .await
            .unwrap();
    }

    /// The writers' own connection: a transaction dropped unfinished is
    /// rolled back at once, so another process writes without waiting on
    /// SQLite's lock (10 s), and the next one of ours begins as usual.
    #[tokio::test]
    async fn a_write_dropped_unfinished_is_rolled_back_and_frees_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("w.db").display());
        let (ours, _) = Store::open(&url).await.unwrap();
        let theirs = Store::connect(&url).await.unwrap();
        assert!(ours.writer().is_own());
        runtime::hop(async {
            let mut tx = ours.begin_write().await.unwrap();
            sqlx::query("CREATE TABLE t (x INTEGER)")
                .execute(&mut *tx)
                .await
                .unwrap();
            tx.commit().await.unwrap();

            let mut dropped = ours.begin_write().await.unwrap();
            insert(&mut dropped).await;
            drop(dropped);
            let started = std::time::Instant::now();
            let mut tx = theirs.begin_write().await.unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the other writer waited for the dropped transaction's lock"
            );
            insert(&mut tx).await;
            tx.commit().await.unwrap();

            let mut tx = ours.begin_write().await.unwrap();
            insert(&mut tx).await;
            tx.commit().await.unwrap();
            // The dropped transaction's row is not there.
            assert_eq!(count(&ours).await, 2);

            let mut tx = ours.begin_write().await.unwrap();
            insert(&mut tx).await;
            tx.rollback().await.unwrap();
            assert_eq!(count(&ours).await, 2);
        })
        .await;
        ours.close().await;
        let closed = runtime::hop(async { ours.begin_write().await.err() }).await;
        assert!(closed.is_some(), "a closed store began a write");
        theirs.close().await;
    }
}
