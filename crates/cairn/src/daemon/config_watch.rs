//! config.toml watched with file events (`notify`: inotify on Linux), not
//! polled.
//!
//! Two watches: the file's directory, for creations, renames and deletions
//! (an editor's save renames a new file over the old one), and, while it
//! exists, the file itself (which follows a symlink to a file elsewhere).
//! notify's thread hears every event in the directory, the state file's
//! heartbeat and the database's WAL included, wakes the daemon only for
//! those naming config.toml, and rests after a run of the same other
//! event ([`REST`]). After each change the file's watch is set up again,
//! since a file renamed over the old one is a new inode. Where file events
//! are unavailable it checks every [`FALLBACK_CHECK`] and says so in the
//! log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecursiveMode, Watcher};
use tokio::sync::Notify;

/// How often config.toml is looked at when file events are unavailable.
pub const FALLBACK_CHECK: Duration = Duration::from_secs(5);

/// Events closer together than this are one change (an editor's save is several).
const SETTLE: Duration = Duration::from_millis(100);

/// How long notify's thread for these watches rests after an event that is
/// not about config.toml and is the same (kind and file) as the one read
/// before it. The directory is usually the home, where the database writes
/// its WAL at every commit: while the thread rests, the kernel folds those
/// writes' events into the one still unread instead of waking the thread
/// (and charging the writer a wake-up) at each page.
///
/// Only such an event: the kernel folds an event into the same one still
/// unread, so an event the same as the one read before it came after that
/// read, and nothing different waits before it. Different events (a file
/// opened and written in turn, two files written in turn) are not folded
/// and wait in the queue, which notify's thread must empty before it takes
/// up a watch being set up (`arm`): resting at them would let the queue
/// grow faster than it is read, and hold `arm` and the next change to
/// config.toml behind it without end. They are read without a rest, as is
/// the event after a rest, so the queue does empty under writes without
/// pause. A change to config.toml waits at most a few rests.
const REST: Duration = Duration::from_millis(25);

/// A watch on config.toml.
pub struct ConfigWatch {
    path: PathBuf,
    events: Option<Events>,
    /// Whether the fallback was already reported.
    warned: bool,
}

impl ConfigWatch {
    /// Starts watching `path`.
    pub async fn start(path: PathBuf) -> ConfigWatch {
        let mut watch = ConfigWatch {
            path,
            events: None,
            warned: false,
        };
        watch.arm().await;
        watch
    }

    /// Whether file events are in use.
    pub fn has_events(&self) -> bool {
        self.events.is_some()
    }

    /// Completes when config.toml may have changed (its content decides).
    pub async fn changed(&mut self) {
        if let Some(events) = self.events.as_ref() {
            events.changed.notified().await;
            tokio::time::sleep(SETTLE).await;
            // What came during the settle is part of the change just seen.
            let _ = events.changed.notified().now_or_never();
            self.arm().await;
            return;
        }
        tokio::time::sleep(FALLBACK_CHECK).await;
        // Events may have become available (the directory appeared).
        self.arm().await;
    }

    /// Sets up (or renews) the watches.
    async fn arm(&mut self) {
        let exists = tokio::fs::try_exists(&self.path).await.unwrap_or(false);
        let armed = match self.events.as_mut() {
            Some(events) => events.watch(exists),
            None => Events::start(&self.path, exists).map(|e| {
                self.events = Some(e);
            }),
        };
        match armed {
            Ok(()) => self.warned = false,
            Err(e) => {
                self.events = None;
                self.fallback(&e.to_string());
            }
        }
    }

    fn fallback(&mut self, reason: &str) {
        if !self.warned {
            self.warned = true;
            tracing::warn!(path = %self.path.display(), error = %reason, every_secs = FALLBACK_CHECK.as_secs(),
                "cannot watch config.toml for changes; checking it on a timer instead");
        }
    }
}

/// notify's watcher on the file and its directory.
struct Events {
    watcher: notify::RecommendedWatcher,
    /// Woken (a permit kept) by each event that names the file.
    changed: Arc<Notify>,
    dir: PathBuf,
    /// Absolute, as notify names the paths of its events.
    file: PathBuf,
    file_watched: bool,
}

impl Events {
    /// Watches `file`'s directory (and `file` if it `exists`).
    fn start(file: &Path, exists: bool) -> notify::Result<Events> {
        let file = std::path::absolute(file).map_err(notify::Error::io)?;
        let dir = match file.parent() {
            Some(p) => p.to_path_buf(),
            None => PathBuf::from("/"),
        };
        let changed = Arc::new(Notify::new());
        let wake = Arc::clone(&changed);
        let name = file.clone();
        // The last event read that was not about config.toml.
        let mut last: Option<notify::Event> = None;
        let mut rested = false;
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if concerns(&event, &name) {
                wake.notify_one();
                (last, rested) = (None, false);
                return;
            }
            // Not about it, so an event (`concerns` takes errors for changes).
            let Ok(event) = event else { return };
            let again = last
                .as_ref()
                .is_some_and(|l| l.kind == event.kind && l.paths == event.paths);
            rested = again && !rested;
            if rested {
                // notify's own thread: the next events wait in the kernel.
                std::thread::sleep(REST);
            }
            last = Some(event);
        })?;
        let mut events = Events {
            watcher,
            changed,
            dir,
            file,
            file_watched: false,
        };
        events.watch(exists)?;
        Ok(events)
    }

    /// (Re)watches the directory, and the file itself when it `exists`: a
    /// file renamed over the old one is a new inode.
    fn watch(&mut self, exists: bool) -> notify::Result<()> {
        // Again each time: a no-op while the directory's watch lasts.
        self.watcher.watch(&self.dir, RecursiveMode::NonRecursive)?;
        if self.file_watched {
            // Already gone when the old inode was replaced or deleted.
            let _ = self.watcher.unwatch(&self.file);
            self.file_watched = false;
        }
        if exists {
            match self.watcher.watch(&self.file, RecursiveMode::NonRecursive) {
                Ok(()) => self.file_watched = true,
                // Gone between the look and the watch: the directory's watch sees it come back.
                Err(e) if matches!(e.kind, notify::ErrorKind::PathNotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Whether an event may change config.toml: one naming it (from either
/// watch) other than a mere open or read, a lost queue, or an error.
fn concerns(event: &notify::Result<notify::Event>, file: &Path) -> bool {
    let Ok(event) = event else { return true };
    if event.need_rescan() {
        return true;
    }
    if !event.paths.iter().any(|p| p == file) {
        return false;
    }
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        kind => !kind.is_access(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bounded waits only: a change not seen within 10 s fails.
    async fn sees(watch: &mut ConfigWatch) {
        tokio::time::timeout(Duration::from_secs(10), watch.changed())
            .await
            .expect("the change was seen");
    }

    /// Five heartbeats of the state file in `home`, then no change within 300 ms.
    async fn state_file_writes_wake_nothing(home: &std::path::Path, watch: &mut ConfigWatch) {
        use crate::daemon::state_file::{self, StateHeader};
        let header = StateHeader {
            home: home.to_path_buf(),
            started_at: chrono::Utc::now(),
            gateway: None,
            database: "sqlite:///x.db".into(),
        };
        let components = cairn_gateway::Components::new();
        for _ in 0..5 {
            let state = header.snapshot(&components, chrono::Utc::now());
            state_file::write(home, &state).await.unwrap();
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(300), watch.changed())
                .await
                .is_err(),
            "the state file's writes woke the config watch"
        );
    }

    #[tokio::test]
    async fn the_state_files_writes_beside_a_missing_config_wake_nothing() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("config.toml");
        // No config.toml: its directory (the home) is watched.
        let mut watch = ConfigWatch::start(path.clone()).await;
        assert!(watch.has_events());
        state_file_writes_wake_nothing(home.path(), &mut watch).await;
        // A real config.toml appearing is seen.
        tokio::fs::write(&path, "[user]\n").await.unwrap();
        sees(&mut watch).await;
    }

    #[tokio::test]
    async fn the_state_files_writes_beside_an_existing_config_wake_nothing() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("config.toml");
        tokio::fs::write(&path, "[user]\n").await.unwrap();
        let mut watch = ConfigWatch::start(path.clone()).await;
        assert!(watch.has_events());
        state_file_writes_wake_nothing(home.path(), &mut watch).await;
        // Deleting it is a change too (the defaults apply again).
        tokio::fs::remove_file(&path).await.unwrap();
        sees(&mut watch).await;
    }

    #[test]
    fn a_change_is_seen_while_another_file_beside_it_is_written_without_pause() {
        changes_seen_beside_a_busy_wal(false);
    }

    /// Opens and writes in turn make events the kernel cannot fold into
    /// the one still unread: all of them wait in the queue, which notify's
    /// thread must empty before it takes up `arm`.
    #[test]
    fn a_change_is_seen_while_another_file_beside_it_is_opened_and_written_in_turn() {
        changes_seen_beside_a_busy_wal(true);
    }

    /// Three changes to config.toml, each seen and the watch set up again,
    /// while a WAL beside it is written without pause ([`BusyWal`]).
    fn changes_seen_beside_a_busy_wal(reopened: bool) {
        // On a thread of its own: a re-arming held up by notify's thread
        // blocks its runtime, which a timeout inside it could not end.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(changes_beside_a_busy_wal(reopened));
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(60))
            .expect("every change was seen and the watch set up again meanwhile");
    }

    /// A WAL written 4 KiB at a time, without pause, until dropped: from its
    /// start again past 1 MiB (as a WAL started over, so a test that fails
    /// never fills the disk), opened again before each write when
    /// `reopened` (as a connection looking at it).
    struct BusyWal {
        stop: Arc<std::sync::atomic::AtomicBool>,
        writer: Option<std::thread::JoinHandle<()>>,
    }

    impl BusyWal {
        #[expect(
            clippy::disallowed_methods,
            reason = "a writer on a thread of its own, as SQLite's are"
        )]
        fn start(path: std::path::PathBuf, reopened: bool) -> BusyWal {
            use std::io::{Seek, Write};
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let mut wal = std::fs::File::create(&path).unwrap();
            let writer = std::thread::spawn({
                let stop = Arc::clone(&stop);
                move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        if reopened {
                            drop(std::fs::File::open(&path).unwrap());
                        }
                        if wal.stream_position().unwrap() >= 1024 * 1024 {
                            wal.rewind().unwrap();
                        }
                        wal.write_all(&[0; 4096]).unwrap();
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            });
            BusyWal {
                stop,
                writer: Some(writer),
            }
        }
    }

    impl Drop for BusyWal {
        fn drop(&mut self) {
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(writer) = self.writer.take() {
                let _ = writer.join();
            }
        }
    }

    async fn changes_beside_a_busy_wal(reopened: bool) {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("config.toml");
        tokio::fs::write(&path, "[user]\n").await.unwrap();
        let mut watch = ConfigWatch::start(path.clone()).await;
        assert!(watch.has_events());
        let _wal = BusyWal::start(home.path().join("cairn.db-wal"), reopened);
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Each change seen re-arms the watch (`changed` calls `arm`).
        for id in ["me", "you", "them"] {
            tokio::fs::write(&path, format!("[user]\nid = \"{id}\"\n"))
                .await
                .unwrap();
            sees(&mut watch).await;
        }
    }

    #[tokio::test]
    async fn creation_writes_and_a_rename_over_the_file_are_seen() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("config.toml");
        let mut watch = ConfigWatch::start(path.clone()).await;
        assert!(watch.has_events());
        tokio::fs::write(&path, "[user]\n").await.unwrap();
        sees(&mut watch).await;
        tokio::fs::write(&path, "[user]\nid = \"me\"\n")
            .await
            .unwrap();
        sees(&mut watch).await;
        // An editor's save: a new file renamed over the old one.
        let temp = home.path().join(".config.toml.swp");
        tokio::fs::write(&temp, "[user]\nid = \"you\"\n")
            .await
            .unwrap();
        tokio::fs::rename(&temp, &path).await.unwrap();
        sees(&mut watch).await;
        tokio::fs::write(&path, "[user]\nid = \"them\"\n")
            .await
            .unwrap();
        sees(&mut watch).await;
    }

    #[tokio::test]
    async fn a_symlinked_config_is_followed_to_its_target() {
        let home = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let target = elsewhere.path().join("cairn.toml");
        tokio::fs::write(&target, "[user]\n").await.unwrap();
        let path = home.path().join("config.toml");
        tokio::fs::symlink(&target, &path).await.unwrap();
        let mut watch = ConfigWatch::start(path.clone()).await;
        assert!(watch.has_events());
        tokio::fs::write(&target, "[user]\nid = \"me\"\n")
            .await
            .unwrap();
        sees(&mut watch).await;
    }
}
