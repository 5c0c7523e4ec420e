//! config.toml watched with file events (inotify on Linux), not polled.
//!
//! The inotify descriptor sits in the daemon's own reactor (no thread of
//! its own), and asks only for events that can change the file: its
//! directory's creations, renames, closes after writing and deletions
//! (filtered to the file's name), and, while it exists, the file itself
//! (which follows a symlink). The daemon's own writes in the home (the
//! state file's heartbeat) are read by the worker that made them, in the
//! same wake. After each change the file's watch is set up again, since
//! editors save by renaming a new file over the old one. Where file events
//! are unavailable it checks every [`FALLBACK_CHECK`] and says so in the log.

use std::path::PathBuf;
use std::time::Duration;

/// How often config.toml is looked at when file events are unavailable.
pub const FALLBACK_CHECK: Duration = Duration::from_secs(5);

/// Events closer together than this are one change (an editor's save is several).
const SETTLE: Duration = Duration::from_millis(100);

/// A watch on config.toml.
pub struct ConfigWatch {
    path: PathBuf,
    #[cfg(target_os = "linux")]
    events: Option<linux::Events>,
    /// Whether the fallback was already reported.
    warned: bool,
}

impl ConfigWatch {
    /// Starts watching `path`.
    pub async fn start(path: PathBuf) -> ConfigWatch {
        let mut watch = ConfigWatch {
            path,
            #[cfg(target_os = "linux")]
            events: None,
            warned: false,
        };
        watch.arm().await;
        watch
    }

    /// Whether file events are in use.
    pub fn has_events(&self) -> bool {
        #[cfg(target_os = "linux")]
        let has = self.events.is_some();
        #[cfg(not(target_os = "linux"))]
        let has = false;
        has
    }

    /// Completes when config.toml may have changed (its content decides).
    pub async fn changed(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(events) = self.events.as_mut() {
            if events.next_change().await {
                tokio::time::sleep(SETTLE).await;
                if let Some(events) = self.events.as_mut() {
                    events.drain();
                }
            } else {
                // The descriptor failed: rebuilt below, or the timer.
                self.events = None;
            }
            self.arm().await;
            return;
        }
        tokio::time::sleep(FALLBACK_CHECK).await;
        // Events may have become available (the directory appeared).
        self.arm().await;
    }

    /// Sets up (or renews) the watches.
    async fn arm(&mut self) {
        #[cfg(target_os = "linux")]
        {
            let exists = tokio::fs::try_exists(&self.path).await.unwrap_or(false);
            let armed = match self.events.as_mut() {
                Some(events) => events.watch_file(exists),
                None => linux::Events::start(&self.path, exists).map(|e| {
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
        #[cfg(not(target_os = "linux"))]
        self.fallback("file events are used on Linux only");
    }

    fn fallback(&mut self, reason: &str) {
        if !self.warned {
            self.warned = true;
            tracing::warn!(path = %self.path.display(), error = %reason, every_secs = FALLBACK_CHECK.as_secs(),
                "cannot watch config.toml for changes; checking it on a timer instead");
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use futures::{FutureExt, StreamExt};
    use inotify::{EventMask, EventStream, Inotify, WatchDescriptor, WatchMask};

    /// What a change of the directory's entries looks like (creation, a
    /// rename in or out, a close after writing, a deletion).
    fn in_directory() -> WatchMask {
        WatchMask::CREATE
            | WatchMask::CLOSE_WRITE
            | WatchMask::MOVED_TO
            | WatchMask::MOVED_FROM
            | WatchMask::DELETE
            | WatchMask::ONLYDIR
    }

    /// What a change of the file itself looks like (through a symlink too).
    fn on_file() -> WatchMask {
        WatchMask::MODIFY
            | WatchMask::CLOSE_WRITE
            | WatchMask::ATTRIB
            | WatchMask::DELETE_SELF
            | WatchMask::MOVE_SELF
    }

    /// One inotify descriptor on the daemon's reactor.
    pub(super) struct Events {
        stream: EventStream<[u8; 4096]>,
        file: PathBuf,
        name: Option<OsString>,
        file_watch: Option<WatchDescriptor>,
    }

    impl Events {
        /// Watches `file`'s directory (and `file` if it `exists`).
        pub(super) fn start(file: &Path, exists: bool) -> std::io::Result<Events> {
            let dir = match file.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            let inotify = Inotify::init()?;
            let stream = inotify.into_event_stream([0u8; 4096])?;
            stream.watches().add(&dir, in_directory())?;
            let mut events = Events {
                stream,
                file: file.to_path_buf(),
                name: file.file_name().map(|n| n.to_os_string()),
                file_watch: None,
            };
            events.watch_file(exists)?;
            Ok(events)
        }

        /// (Re)watches the file itself when it exists: a file renamed over
        /// the old one is a new inode.
        pub(super) fn watch_file(&mut self, exists: bool) -> std::io::Result<()> {
            if let Some(old) = self.file_watch.take() {
                // Already gone when the old inode was replaced or deleted.
                let _ = self.stream.watches().remove(old);
            }
            if exists {
                match self.stream.watches().add(&self.file, on_file()) {
                    Ok(wd) => self.file_watch = Some(wd),
                    // Gone between the look and the watch: the directory's watch sees it come back.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }

        /// Waits for an event that may change the file; `false` when the
        /// descriptor failed.
        pub(super) async fn next_change(&mut self) -> bool {
            loop {
                match self.stream.next().await {
                    Some(Ok(event)) if self.concerns(&event.mask, event.name.as_deref()) => {
                        return true;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "config.toml watch failed");
                        return false;
                    }
                    None => return false,
                }
            }
        }

        /// Takes the events already queued (part of the change just seen).
        pub(super) fn drain(&mut self) {
            while let Some(Some(Ok(_))) = self.stream.next().now_or_never() {}
        }

        /// Events on the file itself have no name; the directory's name theirs.
        fn concerns(&self, mask: &EventMask, name: Option<&std::ffi::OsStr>) -> bool {
            if mask.contains(EventMask::Q_OVERFLOW) {
                return true;
            }
            match name {
                Some(n) => Some(n) == self.name.as_deref(),
                // The watch on the old file going away after a rename is
                // no change by itself: the rename's MOVED_TO is.
                None => !mask.contains(EventMask::IGNORED),
            }
        }
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
