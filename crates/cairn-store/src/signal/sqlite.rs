//! SQLite: a watch on the WAL file, confirmed with `PRAGMA data_version`
//! on a dedicated connection; a slow poll where file events are unavailable.
//!
//! A file event can come before the commit it belongs to is visible: the
//! writer appends its frames (the events) and only then publishes the new
//! end of the log in the shared memory index, which makes no event. So
//! after events the connection looks again a little later
//! ([`RECHECKS`]) before going back to sleep; a later commit always makes
//! new events.
//!
//! The listener also keeps checkpoints off the writers' commits: SQLite
//! runs one inside the commit that takes the WAL past 1,000 pages, with
//! its fsyncs (9-27 ms here, in the middle of a burst's admission). Our
//! connections raise that bound to a fallback (`connect.rs`), and the
//! listener, seeing a commit leave the WAL at [`CHECKPOINT_AT`] or more
//! (see [`wants_checkpoint`]), asks a task of its own for a `PASSIVE`
//! checkpoint, which neither waits for nor blocks anyone.
//!
//! While a write transaction of this process is open, the WAL's events are
//! its own: the watch reads on when it closes ([`OWN_WRITE_WAIT`]).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection, Row};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::{FALLBACK_POLL, Hub, OwnWrites, SignalMode, Topic};

/// Looks after file events, from the first: a commit still being published
/// when the first look ran is seen by one of these. The last is for a
/// writer preempted between its frames and their publication on a loaded
/// machine (a create was once seen only 936 ms later, with the next write).
const RECHECKS: [Duration; 3] = [
    Duration::from_millis(10),
    Duration::from_millis(100),
    Duration::from_millis(400),
];

/// How long the WAL's watch waits, after an event, for this process's open
/// write transaction to close before it reads the next events. While one
/// is open the WAL's writes are its own (SQLite has one writer at a time):
/// they wait in the kernel's queue, merged there, and are read together
/// when it closes. A busy daemon writes the WAL thousands of times a
/// second, and each event read was a wake of the watch's thread and of the
/// listener, and a look at the database (signed webhooks: about 7,900 acks
/// a second against 7,500). Another process commits only while no
/// transaction of ours is open, so its events wait at most this long, and
/// only when one of ours began in between.
const OWN_WRITE_WAIT: Duration = Duration::from_millis(4);

/// How long to wait before trying to open the dedicated connection again.
const RETRY: Duration = Duration::from_secs(5);

/// The WAL length ([`WalFile::length`]) from which the listener has it
/// checkpointed: SQLite's own 1,000 pages of 4 KiB. After a complete
/// checkpoint the next writer starts the WAL over, so the length of its
/// frames since measures what is left to checkpoint.
///
/// The WAL-index header in the `-shm` file would say it exactly, but this
/// process must not open that file: closing any descriptor of a file drops
/// every POSIX lock the process holds on it, SQLite's included, and another
/// process then takes the index for unused and rebuilds it under our
/// mapping (SIGBUS).
pub(crate) const CHECKPOINT_AT: u64 = 4 * 1024 * 1024;

pub(super) async fn listen(
    hub: Weak<Hub>,
    url: String,
    wal: PathBuf,
    own: Arc<OwnWrites>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(mut conn) = open(&url, &mut stop).await else {
        return;
    };
    // The WAL exists once a connection has read the database.
    let mut version = data_version(&mut conn).await.ok();
    let events = Arc::new(Notify::new());
    let watcher = watch_file(&wal, Arc::clone(&events), own);
    // The first reading of the counters, then every waiter looks once:
    // a change made before we listened is not lost. The mode is set after,
    // so whoever waits for it (`signal_ready`) has had that wake.
    if !first_read(&mut conn, &hub).await {
        return;
    }
    let polling = announce_mode(&hub, &wal, watcher.as_ref().err());
    let checkpoint = Arc::new(Notify::new());
    let checkpointer = tokio::spawn(checkpointer(
        url.clone(),
        Arc::clone(&checkpoint),
        stop.clone(),
    ));
    let mut rechecks: Vec<Instant> = Vec::new();
    let mut asked_at: Option<u64> = None;
    let mut wal_file = WalFile::new(wal);
    loop {
        let next_recheck = rechecks.first().copied();
        let poll = async {
            if polling {
                tokio::time::sleep(FALLBACK_POLL).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let recheck = async {
            match next_recheck {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.changed() => {
                // Closed, not dropped: the close finishes before the store's.
                let _ = conn.close().await;
                let _ = checkpointer.await;
                return;
            }
            () = events.notified() => {
                let now = Instant::now();
                rechecks = RECHECKS.iter().map(|d| now + *d).collect();
            }
            () = recheck => { rechecks.remove(0); }
            () = poll => {}
        }
        let Some(hub) = hub.upgrade() else { return };
        match data_version(&mut conn).await {
            Ok(now) if Some(now) == version => {}
            Ok(now) => {
                version = Some(now);
                if wants_checkpoint(wal_file.length(), &mut asked_at) {
                    checkpoint.notify_one();
                }
                match read_counters(&mut conn).await {
                    Ok(counters) => hub.counters_read(&counters),
                    Err(e) => {
                        tracing::warn!(error = %e, "change signal: cannot read the change counters");
                        hub.wake_all();
                    }
                }
            }
            Err(e) => {
                // Look again soon; meanwhile waiters re-read what they need.
                tracing::warn!(error = %e, "change signal: cannot read PRAGMA data_version");
                hub.wake_all();
                rechecks.push(Instant::now() + RETRY);
            }
        }
    }
}

/// Opens the listener's own connection, retrying until it opens; `None`
/// when the store stops first.
async fn open(url: &str, stop: &mut watch::Receiver<bool>) -> Option<SqliteConnection> {
    loop {
        match connect(url).await {
            Ok(conn) => return Some(conn),
            Err(e) => {
                tracing::warn!(error = %e, "change signal: cannot open a connection to watch the database; retrying");
                tokio::select! {
                    _ = stop.changed() => return None,
                    () = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    }
}

/// The first reading of the counters, after which every waiter looks once;
/// false when the store is gone.
async fn first_read(conn: &mut SqliteConnection, hub: &Weak<Hub>) -> bool {
    match read_counters(conn).await {
        Ok(counters) => match hub.upgrade() {
            Some(hub) => {
                hub.counters_read(&counters);
                hub.wake_all();
            }
            None => return false,
        },
        Err(e) => tracing::warn!(error = %e, "change signal: cannot read the change counters"),
    }
    true
}

/// Sets the signal's mode, watching the WAL or, when file events are
/// unavailable (`failed`), polling; whether it polls.
fn announce_mode(hub: &Weak<Hub>, wal: &Path, failed: Option<&notify::Error>) -> bool {
    match failed {
        None => {
            tracing::debug!(wal = %wal.display(), "change signal: watching the WAL");
            set_mode(
                hub,
                SignalMode::WatchingWal {
                    path: wal.to_path_buf(),
                },
            );
            false
        }
        Some(e) => {
            let reason = e.to_string();
            tracing::warn!(wal = %wal.display(), error = %reason, every_secs = FALLBACK_POLL.as_secs(),
                "change signal: file events unavailable; polling the database instead");
            set_mode(
                hub,
                SignalMode::Polling {
                    every: FALLBACK_POLL,
                    reason,
                },
            );
            true
        }
    }
}

/// Whether a WAL of `size` bytes ([`WalFile::length`]) calls for a checkpoint,
/// given its size when one was last asked for (updated here). It asks once the WAL
/// reaches [`CHECKPOINT_AT`], then again only after it grew as much more:
/// a reader in the middle of its read when a writer begins keeps the WAL
/// from starting over, and a WAL kept long that way would otherwise ask at
/// every commit (1,494 times in one run of the 2,000-routine bench, for
/// nothing each time). A WAL that shrank has started over.
pub(super) fn wants_checkpoint(size: u64, asked_at: &mut Option<u64>) -> bool {
    if asked_at.is_some_and(|at| size < at) {
        *asked_at = None;
    }
    if size < asked_at.unwrap_or(0) + CHECKPOINT_AT {
        return false;
    }
    *asked_at = Some(size);
    true
}

/// The WAL, as the listener measures it: opened once, at the first look,
/// and kept. Each open is an event in the home directory, where
/// config.toml's watch hears every event (`cairn`'s `config_watch.rs`);
/// reads are not.
pub(super) struct WalFile {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl WalFile {
    pub(super) fn new(path: PathBuf) -> WalFile {
        WalFile { path, file: None }
    }

    /// The length in bytes of the WAL's frames since it last started over
    /// (0 when it cannot be read): what is left to checkpoint, at most.
    ///
    /// A WAL started over is written again from its start and is not cut
    /// (`journal_size_limit`, `connect.rs`), so its file keeps its largest
    /// size; the frames of this round are those from the first whose
    /// salts (frame header bytes 8-16) are the WAL header's (bytes 16-24):
    /// SQLite writes them in order from the start and changes the salts at
    /// each start over, so they are a prefix, found by halving. Holding the
    /// WAL open is harmless, unlike the `-shm` file: SQLite holds no POSIX
    /// lock on it.
    #[expect(
        clippy::disallowed_methods,
        reason = "a few reads of a local file; through tokio's blocking pool each look under load was a hand-off to another thread and back"
    )]
    pub(super) fn length(&mut self) -> u64 {
        use std::os::unix::fs::{FileExt, MetadataExt};
        if self.file.is_none() {
            self.file = std::fs::File::open(&self.path).ok();
        }
        let Some(file) = self.file.as_ref() else {
            return 0;
        };
        let Ok(meta) = file.metadata() else {
            return 0;
        };
        if meta.nlink() == 0 {
            // Deleted (the last connection closed it): the next look opens
            // the WAL made since, if any.
            self.file = None;
            return 0;
        }
        let mut header = [0u8; WAL_HEADER];
        if file.read_exact_at(&mut header, 0).is_err() {
            return 0;
        }
        let page = u64::from(u32::from_be_bytes([
            header[8], header[9], header[10], header[11],
        ]));
        // A page size is a power of two from 512 to 65536 (stored as 1).
        let page = if page == 1 { 65_536 } else { page };
        if !(512..=65_536).contains(&page) || !page.is_power_of_two() {
            return 0;
        }
        let frame = WAL_FRAME_HEADER + page;
        let salts = &header[16..24];
        let ours = |index: u64| {
            let mut frame_salts = [0u8; 8];
            file.read_exact_at(&mut frame_salts, WAL_HEADER as u64 + index * frame + 8)
                .is_ok_and(|()| frame_salts == salts)
        };
        // Frames `..low` are this round's; frames `high..` are not.
        let (mut low, mut high) = (0, meta.len().saturating_sub(WAL_HEADER as u64) / frame);
        while low < high {
            let mid = low + (high - low) / 2;
            if ours(mid) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        WAL_HEADER as u64 + low * frame
    }
}

/// The WAL file's header and each frame's header, in bytes (SQLite's file
/// format, "The Write-Ahead Log File Format").
const WAL_HEADER: usize = 32;
const WAL_FRAME_HEADER: u64 = 24;

/// Checkpoints the WAL each time it is asked, on a connection of its own
/// (opened at the first request), until `stop`.
async fn checkpointer(url: String, asked: Arc<Notify>, mut stop: watch::Receiver<bool>) {
    let mut conn: Option<SqliteConnection> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            () = asked.notified() => {}
        }
        if conn.is_none() {
            match connect(&url).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot open a connection to checkpoint the WAL");
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&mut *c)
            .await
        {
            Ok(row) => tracing::debug!(
                wal_frames = row.try_get::<i64, _>(1).unwrap_or(-1),
                checkpointed = row.try_get::<i64, _>(2).unwrap_or(-1),
                "checkpointed the WAL"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "cannot checkpoint the WAL");
                conn = None;
            }
        }
    }
    if let Some(c) = conn {
        let _ = c.close().await;
    }
}

fn set_mode(hub: &Weak<Hub>, mode: SignalMode) {
    if let Some(hub) = hub.upgrade() {
        hub.set_mode(mode);
    }
}

async fn connect(url: &str) -> Result<SqliteConnection, sqlx::Error> {
    SqliteConnectOptions::from_str(url)?
        .busy_timeout(Duration::from_secs(10))
        .connect()
        .await
}

/// Changes whenever another connection (in any process) committed.
async fn data_version(conn: &mut SqliteConnection) -> Result<i64, sqlx::Error> {
    let row = sqlx::query("PRAGMA data_version").fetch_one(conn).await?;
    row.try_get::<i64, _>(0)
}

async fn read_counters(conn: &mut SqliteConnection) -> Result<Vec<(Topic, i64)>, sqlx::Error> {
    let rows = sqlx::query("SELECT key, value FROM engine_counters")
        .fetch_all(conn)
        .await?;
    let mut out = Vec::new();
    for row in &rows {
        let key: String = row.try_get("key")?;
        if let Some(topic) = Topic::ALL.into_iter().find(|t| t.counter_key() == key) {
            out.push((topic, row.try_get::<i64, _>("value")?));
        }
    }
    Ok(out)
}

/// Watches `wal` for writes; each event wakes `events`. The watch lives as
/// long as the returned watcher.
pub(super) fn watch_file(
    wal: &Path,
    events: Arc<Notify>,
    own: Arc<OwnWrites>,
) -> Result<notify::RecommendedWatcher, notify::Error> {
    use notify::event::{AccessKind, AccessMode, EventKind};
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        match event {
            // A writer closing the WAL (a CLI command exiting after its
            // commit) comes after the commit is published: worth a look.
            Ok(e) if e.kind == EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
            Ok(e) if e.kind.is_access() => return,
            // An error is a reason to look too.
            _ => {}
        }
        events.notify_one();
        // notify's own thread for this watch: holding it back leaves the
        // next events in the kernel's queue (see `OWN_WRITE_WAIT`).
        own.wait_closed(OWN_WRITE_WAIT);
    })?;
    watcher.watch(wal, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}
