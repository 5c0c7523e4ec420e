//! The change signal: what one process records, the others hear at once
//! (guide invariant 13), and nothing polls a table on a timer.
//!
//! A write that others must see publishes a [`Topic`] inside its own
//! transaction ([`WriteTx::publish`](crate::connect::WriteTx)); any part of
//! any process waits on the topics it cares about with [`Store::watch`].
//!
//! - **This process**: a committed write wakes this store's waiters
//!   directly (no round-trip through the database).
//! - **PostgreSQL**: `pg_notify('cairn_changes', '<store id> <topic>')` in
//!   the writing transaction (delivered at commit, never for a rollback; a
//!   store outside the `public` schema has a channel of its own);
//!   one dedicated connection per store `LISTEN`s ([`postgres`]). A lost
//!   connection is re-established and every waiter is woken once (a full
//!   resync), since notifications sent meanwhile are gone.
//! - **SQLite**: writers bump a per-topic counter in `engine_counters` in
//!   the same transaction; a watch on the database's WAL file (the `notify`
//!   crate: inotify on Linux) wakes a dedicated connection that confirms
//!   with `PRAGMA data_version`, then reads the counters and wakes the
//!   waiters of the topics that moved ([`sqlite`]). Where file events are
//!   unavailable it polls `data_version` every [`FALLBACK_POLL`] and says
//!   so in the log and in [`Store::signal_mode`] (`cairn doctor`).
//!
//! The listener starts with the first [`Store::watch`] (a CLI command that
//! only writes never starts one) and wakes every waiter once it listens,
//! so a change made between a waiter's first read and the listener's start
//! is not missed. Waiters re-read the store when woken: a wake means "look
//! again", never "this changed in that way".

mod postgres;
mod sqlite;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Row;
use tokio::sync::watch;

use crate::connect::Backend;
use crate::exec::Conn;
use crate::{Store, StoreError};

/// The PostgreSQL channel the processes of one store listen on, as SQL
/// evaluated on their own connection: `cairn_changes` in the `public`
/// schema, else a name of the schema's own. Notifications go to the whole
/// database, so stores in two schemas of one database must not share a
/// channel: each would wake the other's waiters for changes it does not
/// hold.
macro_rules! pg_channel_sql {
    () => {
        "CASE WHEN current_schema() IS NULL OR current_schema() = 'public' \
         THEN 'cairn_changes' \
         ELSE 'cairn_changes_' || left(md5(current_schema()), 16) END"
    };
}
pub(crate) use pg_channel_sql;

/// How often SQLite's `data_version` is read when file events are unavailable.
pub const FALLBACK_POLL: Duration = Duration::from_secs(2);

/// What changed, as far as waiters care.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topic {
    /// A routine was created, changed, enabled, disabled or deleted.
    Routines,
    /// A routine run was admitted (it holds a lease a reaper may need to watch).
    Runs,
    /// A notification was recorded for delivery.
    Notifications,
    /// A job was asked to stop or restart from another process.
    Jobs,
    /// The recallable memory vectors changed.
    Memory,
    /// A stored setting changed.
    Settings,
    /// An API token was revoked (its open streams must end).
    Tokens,
    /// A secret of the vault was stored, replaced or removed.
    Vault,
}

impl Topic {
    /// Every topic.
    pub const ALL: [Topic; 8] = [
        Topic::Routines,
        Topic::Runs,
        Topic::Notifications,
        Topic::Jobs,
        Topic::Memory,
        Topic::Settings,
        Topic::Tokens,
        Topic::Vault,
    ];

    /// Its name in notifications and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::Routines => "routines",
            Topic::Runs => "runs",
            Topic::Notifications => "notifications",
            Topic::Jobs => "jobs",
            Topic::Memory => "memory",
            Topic::Settings => "settings",
            Topic::Tokens => "tokens",
            Topic::Vault => "vault",
        }
    }

    /// The topic called `name`.
    pub fn parse(name: &str) -> Option<Topic> {
        Topic::ALL.into_iter().find(|t| t.as_str() == name)
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Its counter in `engine_counters` (routines keep their older name,
    /// which `Store::routines_version` reads on both backends).
    pub(crate) fn counter_key(self) -> &'static str {
        match self {
            Topic::Routines => "routines.version",
            Topic::Runs => "signal.runs",
            Topic::Notifications => "signal.notifications",
            Topic::Jobs => "signal.jobs",
            Topic::Memory => "signal.memory",
            Topic::Settings => "signal.settings",
            Topic::Tokens => "signal.tokens",
            Topic::Vault => "signal.vault",
        }
    }
}

/// How this process hears other processes' changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignalMode {
    /// Nothing waits yet, so nothing listens.
    NotStarted,
    /// Starting to listen.
    Starting,
    /// An in-memory database: no other process can write to it.
    ThisProcessOnly,
    /// PostgreSQL `LISTEN` on a dedicated connection.
    Listening,
    /// PostgreSQL: the listening connection was lost; reconnecting (every
    /// waiter is woken once it is back).
    Reconnecting {
        /// Why the last attempt failed.
        error: String,
    },
    /// SQLite: file events on the WAL, confirmed with `PRAGMA data_version`.
    WatchingWal {
        /// The WAL file.
        path: PathBuf,
    },
    /// SQLite without file events: `PRAGMA data_version` read every `every`.
    Polling {
        /// How often.
        every: Duration,
        /// Why file events are not used.
        reason: String,
    },
}

impl SignalMode {
    /// Whether changes from other processes reach this one without polling.
    pub fn is_push(&self) -> bool {
        matches!(
            self,
            SignalMode::Listening | SignalMode::WatchingWal { .. } | SignalMode::ThisProcessOnly
        )
    }
}

impl std::fmt::Display for SignalMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SignalMode::NotStarted => write!(f, "not started (nothing waits for changes)"),
            SignalMode::Starting => write!(f, "starting"),
            SignalMode::ThisProcessOnly => write!(f, "in-memory database: this process only"),
            SignalMode::Listening => write!(f, "PostgreSQL LISTEN/NOTIFY"),
            SignalMode::Reconnecting { error } => {
                write!(f, "PostgreSQL listener reconnecting ({error})")
            }
            SignalMode::WatchingWal { path } => {
                write!(f, "file events on {} (PRAGMA data_version)", path.display())
            }
            SignalMode::Polling { every, reason } => write!(
                f,
                "polling PRAGMA data_version every {}s: file events unavailable ({reason})",
                every.as_secs()
            ),
        }
    }
}

/// A waiter on one topic (from [`Store::watch`]).
#[derive(Debug)]
pub struct Watch {
    rx: watch::Receiver<u64>,
}

impl Watch {
    /// Completes once the topic changed since this watch was made or last
    /// completed (a change in between is never lost). Cancel-safe.
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            // The store is gone: nothing will change any more.
            std::future::pending::<()>().await;
        }
    }

    /// Whether the topic changed since this watch last looked.
    pub fn has_changed(&self) -> bool {
        self.rx.has_changed().unwrap_or(false)
    }

    /// Takes note of every change so far (call before re-reading the store).
    pub fn mark_seen(&mut self) {
        self.rx.borrow_and_update();
    }
}

/// Where the listener hears other processes.
#[derive(Clone)]
pub(crate) enum Source {
    /// A SQLite file: its URL (as opened) and its WAL file.
    Sqlite { url: String, wal: PathBuf },
    /// A PostgreSQL server (the URL may hold a password: never shown).
    Postgres { url: String },
    /// An in-memory database.
    Memory,
}

/// The signal's state, shared by every clone of a [`Store`].
pub(crate) struct Hub {
    /// This store's id, in PostgreSQL payloads (its own are not re-delivered).
    id: String,
    topics: Vec<watch::Sender<u64>>,
    /// SQLite: the counters as last seen (by the listener or after our own commits).
    seen: Mutex<[i64; Topic::ALL.len()]>,
    mode: watch::Sender<SignalMode>,
    started: AtomicBool,
    source: Mutex<Source>,
    /// PostgreSQL: the listening connection's `application_name`.
    label: Mutex<String>,
    /// Asks the PostgreSQL listener to reconnect (a new label).
    relabel: Arc<tokio::sync::Notify>,
    /// Dropped with the hub (or set by `close`): the listener stops.
    stop: watch::Sender<bool>,
    /// The listener's task, awaited by `close` so that its connection is
    /// closed before the process exits (SQLite checkpoints its WAL when
    /// the last connection closes).
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The store's runtime (see [`crate::runtime`]): the listener runs on real time.
    runtime: &'static tokio::runtime::Handle,
    /// This process's write transactions open now (SQLite's WAL watch
    /// waits for them, see `sqlite.rs`).
    own_writes: Arc<OwnWrites>,
}

/// This process's SQLite write transactions open now. SQLite lets one
/// writer at a time write the WAL, so the WAL's events while one is open
/// are its own: the WAL's watch waits for it to close before reading more
/// (see `sqlite.rs`).
#[derive(Debug, Default)]
pub(crate) struct OwnWrites {
    open: Mutex<u32>,
    closed: std::sync::Condvar,
}

impl OwnWrites {
    /// Counts a write transaction open until the returned guard drops.
    pub(crate) fn open(self: &Arc<Self>) -> OpenWrite {
        *lock(&self.open) += 1;
        OpenWrite(Arc::clone(self))
    }

    /// Waits until no write transaction of this process is open, at most
    /// `at_most`.
    pub(crate) fn wait_closed(&self, at_most: std::time::Duration) {
        let open = lock(&self.open);
        // Timed out or poisoned alike: the watch reads on.
        drop(self.closed.wait_timeout_while(open, at_most, |n| *n > 0));
    }
}

/// A write transaction of this process, open while it lives.
pub(crate) struct OpenWrite(Arc<OwnWrites>);

impl Drop for OpenWrite {
    fn drop(&mut self) {
        let mut open = lock(&self.0.open);
        *open = open.saturating_sub(1);
        if *open == 0 {
            self.0.closed.notify_all();
        }
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("id", &self.id)
            .field("mode", &*self.mode.borrow())
            .finish_non_exhaustive()
    }
}

impl Hub {
    pub(crate) fn new(source: Source, runtime: &'static tokio::runtime::Handle) -> Hub {
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        Hub {
            label: Mutex::new(format!("cairn-signal {id}")),
            id,
            topics: Topic::ALL.iter().map(|_| watch::Sender::new(0)).collect(),
            seen: Mutex::new([i64::MIN; Topic::ALL.len()]),
            mode: watch::Sender::new(SignalMode::NotStarted),
            started: AtomicBool::new(false),
            source: Mutex::new(source),
            relabel: Arc::new(tokio::sync::Notify::new()),
            stop: watch::Sender::new(false),
            task: Mutex::new(None),
            runtime,
            own_writes: Arc::default(),
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn own_writes(&self) -> &Arc<OwnWrites> {
        &self.own_writes
    }

    /// Wakes the waiters of `topic`.
    pub(crate) fn wake(&self, topic: Topic) {
        self.topics[topic.index()].send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wakes every waiter (a resync).
    pub(crate) fn wake_all(&self) {
        for topic in Topic::ALL {
            self.wake(topic);
        }
    }

    /// After a commit that published `topics`: wakes this process's waiters
    /// and notes the SQLite counters written, so the listener does not wake
    /// them a second time for the same change.
    pub(crate) fn committed(&self, topics: &[(Topic, Option<i64>)]) {
        if topics.is_empty() {
            return;
        }
        {
            let mut seen = lock(&self.seen);
            for (topic, counted) in topics {
                if let Some(value) = counted {
                    let slot = &mut seen[topic.index()];
                    *slot = (*slot).max(*value);
                }
            }
        }
        for (topic, _) in topics {
            self.wake(*topic);
        }
    }

    /// Compares counters read from the database with those seen; wakes the
    /// topics that moved. The first reading only records them.
    pub(crate) fn counters_read(&self, counters: &[(Topic, i64)]) {
        let mut moved = Vec::new();
        {
            let mut seen = lock(&self.seen);
            for (topic, value) in counters {
                let slot = &mut seen[topic.index()];
                if *value > *slot {
                    if *slot != i64::MIN {
                        moved.push(*topic);
                    }
                    *slot = *value;
                }
            }
        }
        for topic in moved {
            self.wake(topic);
        }
    }

    fn set_mode(&self, mode: SignalMode) {
        self.mode.send_replace(mode);
    }

    fn label(&self) -> String {
        lock(&self.label).clone()
    }

    fn stopped(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Starts the listener once, on the store's runtime.
    fn ensure_started(self: &Arc<Self>) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let source = lock(&self.source).clone();
        let hub = Arc::downgrade(self);
        let stop = self.stopped();
        let task = match source {
            Source::Memory => {
                self.set_mode(SignalMode::ThisProcessOnly);
                return;
            }
            Source::Postgres { url } => {
                self.set_mode(SignalMode::Starting);
                self.runtime.spawn(postgres::listen(hub, url, stop))
            }
            Source::Sqlite { url, wal } => {
                self.set_mode(SignalMode::Starting);
                let own = Arc::clone(&self.own_writes);
                self.runtime.spawn(sqlite::listen(hub, url, wal, own, stop))
            }
        };
        *lock(&self.task) = Some(task);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock still holds valid counters and text.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Publishes `topic` inside the transaction on `conn`; returns the SQLite
/// counter's new value (the listener's seen mark).
pub(crate) async fn publish_in(
    conn: &mut Conn,
    backend: Backend,
    store_id: &str,
    topic: Topic,
) -> Result<Option<i64>, sqlx::Error> {
    let mut counted = None;
    // Routines keep their counter on PostgreSQL too: `routines_version` reads it.
    if backend == Backend::Sqlite || topic == Topic::Routines {
        let row = sqlx::query(
            "UPDATE engine_counters SET value = value + 1 WHERE key = $1 RETURNING value",
        )
        .bind(topic.counter_key())
        .fetch_optional(&mut *conn)
        .await?;
        counted = row.map(|r| r.try_get::<i64, _>("value")).transpose()?;
    }
    if backend == Backend::Postgres {
        sqlx::query(concat!("SELECT pg_notify(", pg_channel_sql!(), ", $1)"))
            .bind(format!("{store_id} {}", topic.as_str()))
            .execute(&mut *conn)
            .await?;
    }
    Ok(counted)
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// A waiter on `topic`: its [`Watch::changed`] completes when any
    /// process on this database publishes it. Starts this store's listener
    /// on first use.
    pub fn watch(&self, topic: Topic) -> Watch {
        let hub = self.hub();
        let mut rx = hub.topics[topic.index()].subscribe();
        rx.borrow_and_update();
        hub.ensure_started();
        Watch { rx }
    }

    /// How this process hears other processes' changes now.
    pub fn signal_mode(&self) -> SignalMode {
        self.hub().mode.borrow().clone()
    }

    /// Starts the listener if needed and waits (up to `within`, real time) until it
    /// listens, or knows it cannot; returns how it hears changes.
    pub async fn signal_ready(&self, within: Duration) -> SignalMode {
        let hub = self.hub();
        hub.ensure_started();
        let mut mode = hub.mode.subscribe();
        let settled = async {
            loop {
                let now = mode.borrow_and_update().clone();
                if !matches!(now, SignalMode::Starting | SignalMode::NotStarted) {
                    return now;
                }
                if mode.changed().await.is_err() {
                    return SignalMode::NotStarted;
                }
            }
        };
        // On the store's runtime, so `within` is real time whatever the caller's clock.
        match tokio::time::timeout(within, settled).await {
            Ok(mode) => mode,
            Err(_) => self.signal_mode(),
        }
    }

    /// This store's id in the change signal; its PostgreSQL listening
    /// connection is named `cairn-signal <id>` (or `cairn-daemon <id>`
    /// once it announced a daemon) in `pg_stat_activity`.
    pub fn signal_id(&self) -> &str {
        self.hub().id()
    }

    /// Publishes `topics` in a transaction of its own, for writes that were
    /// not made in one (others still hear them after the data is committed).
    pub async fn publish(&self, topics: &[Topic]) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        for topic in topics {
            tx.publish(*topic).await?;
        }
        Ok(tx.commit().await?)
    }

    /// Names the PostgreSQL listening connection after a daemon, so other
    /// processes can tell a daemon runs (`pg_stat_activity`), and starts it.
    pub(crate) fn label_listener(&self, label: String) {
        let hub = self.hub();
        *lock(&hub.label) = label;
        if hub.started.load(Ordering::SeqCst) {
            hub.relabel.notify_one();
        }
        hub.ensure_started();
    }

    /// Stops the listener (at close) and waits until its connection is closed.
    pub(crate) async fn stop_signal(&self) {
        self.hub().stop.send_replace(true);
        let task = lock(&self.hub().task).take();
        if let Some(task) = task {
            // An error here is the task's panic or cancellation: nothing left to close.
            let _ = task.await;
        }
    }

    /// Test hook: the WAL path the SQLite listener watches (before it starts).
    #[cfg(test)]
    pub(crate) fn set_signal_wal(&self, path: PathBuf) {
        if let Source::Sqlite { wal, .. } = &mut *lock(&self.hub().source) {
            *wal = path;
        }
    }
}

#[cfg(test)]
mod tests;
