//! `daemon_state.json` in `CAIRN_HOME`: what the daemon is doing, rewritten
//! atomically (a temporary file renamed over it) on every component change,
//! so `cairn status` answers from the file even when the gateway is down or
//! wedged. The heartbeat every [`WRITE_EVERY`] only moves the file's
//! modification time, which readers take as `updated_at` when it is later:
//! no inode made and deleted, as a rewrite does. An idle
//! daemon does little else, and on a virtual machine every page a wake
//! touches after an idle spell is slow (about 15 ms for a rewrite).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn_core::clock::Clock;
use cairn_gateway::{ComponentHealth, Components};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// The file's name under `CAIRN_HOME`.
pub const STATE_FILE: &str = "daemon_state.json";

/// How often the file is touched when nothing changes (the heartbeat).
pub const WRITE_EVERY: Duration = Duration::from_secs(15);

/// Older than this (three heartbeats), the file no longer describes a live daemon.
pub const STALE_AFTER: Duration = Duration::from_secs(45);

/// What the file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonState {
    /// The daemon's process id.
    pub pid: u32,
    /// cairn's version.
    pub version: String,
    /// When the daemon started.
    pub started_at: DateTime<Utc>,
    /// When the daemon last said it is alive: the written time, or the
    /// file's modification time when that is later (the heartbeat).
    pub updated_at: DateTime<Utc>,
    /// The gateway's address, when it serves one.
    pub gateway: Option<String>,
    /// The database, its password redacted.
    pub database: String,
    /// Set once the daemon is stopping.
    #[serde(default)]
    pub stopping: bool,
    /// Every component's health, by name.
    pub components: BTreeMap<String, ComponentHealth>,
}

/// The file's path under `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join(STATE_FILE)
}

/// Writes `state` atomically: readers see the old file or the new one.
/// Written on the calling task, not the blocking pool: a few hundred bytes
/// into the page cache take microseconds, while each hand-off to a pool
/// thread (and that thread's start after its keep-alive) is several
/// wake-ups, and the heartbeat is most of what an idle daemon does. The
/// modification time is set to `updated_at`, so the daemon's clock is the
/// only one the file's age is read from.
pub async fn write(home: &Path, state: &DaemonState) -> anyhow::Result<Written> {
    let target = path(home);
    let temp = home.join(format!(".{STATE_FILE}.{}.tmp", std::process::id()));
    let text = serde_json::to_vec_pretty(state)?;
    write_now(&temp, &target, &text, state.updated_at.into())
}

#[expect(
    clippy::disallowed_methods,
    reason = "a small file in the home, written in microseconds (see `write`)"
)]
fn write_now(
    temp: &Path,
    target: &Path,
    text: &[u8],
    modified: std::time::SystemTime,
) -> anyhow::Result<Written> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, crate::home::FILE_MODE);
    let file = options
        .open(temp)
        .and_then(|mut file| {
            file.write_all(text)?;
            file.set_modified(modified)?;
            Ok(file)
        })
        .with_context(|| format!("cannot write {}", temp.display()))?;
    std::fs::rename(temp, target)
        .with_context(|| format!("cannot replace {}", target.display()))?;
    Ok(Written(file))
}

/// The file as written, kept open for the heartbeat: a touch through it
/// is one change of its times, where opening the file by name each beat
/// was a second event for the home's watch (config.toml's), and a second
/// wake of that watch's thread.
pub struct Written(std::fs::File);

impl Written {
    /// The heartbeat: sets the file's modification time to `at`, leaving
    /// its content. Fails once the file is no longer in the home (deleted
    /// or replaced: then it is written whole).
    pub fn touch(&self, at: DateTime<Utc>) -> std::io::Result<()> {
        #[cfg(unix)]
        if std::os::unix::fs::MetadataExt::nlink(&self.0.metadata()?) == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the state file is gone",
            ));
        }
        self.0.set_modified(at.into())
    }
}

/// Reads the file; `None` when there is none.
pub async fn read(home: &Path) -> anyhow::Result<Option<DaemonState>> {
    let file = path(home);
    match tokio::fs::read(&file).await {
        Ok(bytes) => {
            let mut state: DaemonState = serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not a daemon state file", file.display()))?;
            // The heartbeat moves only the modification time.
            if let Ok(modified) = tokio::fs::metadata(&file).await.and_then(|m| m.modified()) {
                state.updated_at = state.updated_at.max(modified.into());
            }
            Ok(Some(state))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
    }
}

/// Whether the daemon a state file describes is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// Its pid is alive and the file is fresh.
    Running,
    /// Its pid is alive but the file has not been rewritten for
    /// [`STALE_AFTER`]: the daemon is wedged (or the pid was reused).
    Stale,
    /// Its pid is gone: the daemon stopped or was killed.
    NotRunning,
}

/// Judges `state` at `now`.
pub fn liveness(state: &DaemonState, now: DateTime<Utc>) -> Liveness {
    if !pid_alive(state.pid) {
        return Liveness::NotRunning;
    }
    let age = (now - state.updated_at).to_std().unwrap_or_default();
    if age > STALE_AFTER {
        Liveness::Stale
    } else {
        Liveness::Running
    }
}

/// Whether a process with this pid exists (signal 0).
pub fn pid_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        else {
            return false;
        };
        // EPERM means it exists but belongs to someone else.
        match rustix::process::test_kill_process(pid) {
            Ok(()) => true,
            Err(e) => e == rustix::io::Errno::PERM,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// Everything but the components, fixed at start.
#[derive(Debug, Clone)]
pub struct StateHeader {
    /// Where to write.
    pub home: PathBuf,
    /// When the daemon started.
    pub started_at: DateTime<Utc>,
    /// The gateway's address.
    pub gateway: Option<String>,
    /// The redacted database URL.
    pub database: String,
}

impl StateHeader {
    /// The state now.
    pub fn snapshot(&self, components: &Components, now: DateTime<Utc>) -> DaemonState {
        DaemonState {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            started_at: self.started_at,
            updated_at: now,
            gateway: self.gateway.clone(),
            database: self.database.clone(),
            stopping: false,
            components: components.snapshot(),
        }
    }
}

/// Writes the file on every change and touches it every [`WRITE_EVERY`]
/// until `cancel`. A failed write is logged and retried at the next turn.
pub async fn writer(
    header: Arc<StateHeader>,
    components: Arc<Components>,
    clock: Arc<dyn Clock>,
    cancel: CancellationToken,
) -> anyhow::Result<()> {
    let mut heartbeat = super::heartbeat::Heartbeat::start(WRITE_EVERY);
    let mut written: Option<Written> = None;
    loop {
        // Registered before the write, so a change during it is not lost.
        let changed = components.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if written.is_none() {
            let state = header.snapshot(&components, clock.now());
            written = match write(&header.home, &state).await {
                Ok(file) => Some(file),
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "cannot write the daemon state file");
                    None
                }
            };
        }
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            () = &mut changed => {
                // A burst of changes (a restart is three) makes one write.
                tokio::time::sleep(Duration::from_millis(50)).await;
                written = None;
            }
            () = heartbeat.beat() => {
                // A failed write is retried whole; so is a file gone.
                written = written.filter(|file| file.touch(clock.now()).is_ok());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use cairn_gateway::ComponentState;

    use super::*;

    fn state(pid: u32, updated_at: DateTime<Utc>) -> DaemonState {
        DaemonState {
            pid,
            version: "0.1.0".into(),
            started_at: updated_at,
            updated_at,
            gateway: Some("127.0.0.1:42700".into()),
            database: "sqlite:///x.db".into(),
            stopping: false,
            components: BTreeMap::new(),
        }
    }

    #[tokio::test]
    #[expect(clippy::disallowed_methods, reason = "a test looks at the directory")]
    async fn written_atomically_and_read_back() {
        let home = tempfile::tempdir().unwrap();
        assert!(read(home.path()).await.unwrap().is_none());
        let components = Components::new();
        components.set("gateway", ComponentState::Running, Utc::now(), None);
        let header = StateHeader {
            home: home.path().to_path_buf(),
            started_at: Utc::now(),
            gateway: None,
            database: "sqlite:///x.db".into(),
        };
        let s = header.snapshot(&components, Utc::now());
        write(home.path(), &s).await.unwrap();
        assert_eq!(read(home.path()).await.unwrap(), Some(s));
        // No temporary file left beside it.
        let names: Vec<_> = std::fs::read_dir(home.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(STATE_FILE)]);
    }

    #[tokio::test]
    #[expect(
        clippy::disallowed_methods,
        reason = "a test reads and deletes the file"
    )]
    async fn the_heartbeat_moves_updated_at_and_leaves_the_content() {
        let home = tempfile::tempdir().unwrap();
        let pid = std::process::id();
        let then = Utc::now() - chrono::Duration::seconds(60);
        let written = write(home.path(), &state(pid, then)).await.unwrap();
        let before = std::fs::read(path(home.path())).unwrap();
        let read_then = read(home.path()).await.unwrap().unwrap();
        assert_eq!(read_then.updated_at, then);
        assert_eq!(liveness(&read_then, Utc::now()), Liveness::Stale);

        let now = Utc::now();
        written.touch(now).unwrap();
        assert_eq!(std::fs::read(path(home.path())).unwrap(), before);
        let read_now = read(home.path()).await.unwrap().unwrap();
        // File systems keep modification times to a second at worst.
        assert!((now - read_now.updated_at).num_milliseconds().abs() < 1000);
        assert_eq!(liveness(&read_now, Utc::now()), Liveness::Running);

        // Replaced, or deleted: the touch fails, so the file is written whole.
        let replaced = write(home.path(), &state(pid, now)).await.unwrap();
        assert!(
            written.touch(Utc::now()).is_err(),
            "a replaced file was touched"
        );
        std::fs::remove_file(path(home.path())).unwrap();
        assert!(
            replaced.touch(Utc::now()).is_err(),
            "a deleted file was touched"
        );
    }

    #[test]
    fn liveness_is_judged_by_pid_and_age() {
        let now = Utc::now();
        assert_eq!(
            liveness(&state(std::process::id(), now), now),
            Liveness::Running
        );
        assert_eq!(
            liveness(
                &state(std::process::id(), now - chrono::Duration::seconds(46)),
                now
            ),
            Liveness::Stale
        );
        // Far above any pid_max.
        assert_eq!(
            liveness(&state(999_999_999, now), now),
            Liveness::NotRunning
        );
    }
}
