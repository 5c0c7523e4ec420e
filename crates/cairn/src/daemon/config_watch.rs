//! config.toml watched with file events (the `notify` crate: inotify on
//! Linux), not polled. The file itself is watched while it exists, so the
//! daemon's own writes beside it (the state file) wake nothing; a missing
//! file is waited for through its directory. After each event the watch is
//! set up again, since editors save by renaming a new file over the old one.
//! Where file events are unavailable it checks every
//! [`FALLBACK_CHECK`] and says so in the log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::Notify;

/// How often config.toml is looked at when file events are unavailable.
pub const FALLBACK_CHECK: Duration = Duration::from_secs(5);

/// Events closer together than this are one change (an editor's save is several).
const SETTLE: Duration = Duration::from_millis(100);

/// A watch on config.toml.
pub struct ConfigWatch {
    path: PathBuf,
    events: Arc<Notify>,
    watcher: Option<notify::RecommendedWatcher>,
    /// Whether the fallback was already reported.
    warned: bool,
}

impl ConfigWatch {
    /// Starts watching `path`.
    pub async fn start(path: PathBuf) -> ConfigWatch {
        let mut watch = ConfigWatch {
            path,
            events: Arc::new(Notify::new()),
            watcher: None,
            warned: false,
        };
        watch.arm().await;
        watch
    }

    /// Whether file events are in use.
    pub fn has_events(&self) -> bool {
        self.watcher.is_some()
    }

    /// Completes when config.toml may have changed (its content decides).
    pub async fn changed(&mut self) {
        if self.watcher.is_none() {
            tokio::time::sleep(FALLBACK_CHECK).await;
            // Events may have become available (the directory appeared).
            self.arm().await;
            return;
        }
        self.events.notified().await;
        tokio::time::sleep(SETTLE).await;
        self.arm().await;
    }

    /// Watches the file if it exists, else its directory.
    async fn arm(&mut self) {
        let exists = tokio::fs::try_exists(&self.path).await.unwrap_or(false);
        let target = if exists {
            self.path.clone()
        } else {
            self.path
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."))
        };
        // The old watch goes first: its events are no longer wanted.
        self.watcher = None;
        match watch(&target, &self.path, Arc::clone(&self.events)) {
            Ok(w) => {
                self.watcher = Some(w);
                self.warned = false;
            }
            Err(e) if !self.warned => {
                self.warned = true;
                tracing::warn!(path = %target.display(), error = %e, every_secs = FALLBACK_CHECK.as_secs(),
                    "cannot watch config.toml for changes; checking it on a timer instead");
            }
            Err(_) => {}
        }
    }
}

fn watch(
    target: &Path,
    file: &Path,
    events: Arc<Notify>,
) -> Result<notify::RecommendedWatcher, notify::Error> {
    let name = file.file_name().map(|n| n.to_os_string());
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(e) if e.kind.is_access() => {}
            Ok(e) => {
                if e.paths
                    .iter()
                    .any(|p| p.file_name().map(|n| n.to_os_string()) == name)
                {
                    events.notify_one();
                }
            }
            Err(_) => events.notify_one(),
        })?;
    watcher.watch(target, RecursiveMode::NonRecursive)?;
    Ok(watcher)
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

    #[tokio::test]
    async fn the_state_files_writes_beside_a_missing_config_wake_nothing() {
        use crate::daemon::state_file::{self, StateHeader};
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("config.toml");
        // No config.toml: its directory (the home) is watched.
        let mut watch = ConfigWatch::start(path.clone()).await;
        assert!(watch.has_events());
        let header = StateHeader {
            home: home.path().to_path_buf(),
            started_at: chrono::Utc::now(),
            gateway: None,
            database: "sqlite:///x.db".into(),
        };
        let components = cairn_gateway::Components::new();
        for _ in 0..5 {
            let state = header.snapshot(&components, chrono::Utc::now());
            state_file::write(home.path(), &state).await.unwrap();
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(300), watch.changed())
                .await
                .is_err(),
            "the state file's writes woke the config watch"
        );
        // A real config.toml appearing is seen.
        tokio::fs::write(&path, "[user]\n").await.unwrap();
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
}
