//! One daemon per `CAIRN_HOME`: `daemon.lock` under an OS advisory lock
//! (`flock` on Unix, through std's `File::try_lock`), holding the pid of the
//! daemon that has it and the home's id. The kernel drops the lock when the
//! process ends, however it ends (SIGKILL, a crash), so a dead daemon never
//! leaves it stuck; the file itself stays and is simply reused.
//!
//! The home's id (random, made once and kept in the file) starts the owner
//! id of every daemon of this home ([`DaemonLock::owner_prefix`]), so runs
//! in a database shared with other homes are attributable: the daemon that
//! holds the lock knows that runs held by another owner with its prefix
//! belong to an earlier daemon of its home, which is gone.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The lock file's name under `CAIRN_HOME`.
pub const LOCK_FILE: &str = "daemon.lock";

/// Held while the daemon runs; dropping it (or the process ending) frees it.
#[derive(Debug)]
pub struct DaemonLock {
    // Never read: holding the open file is what keeps the lock.
    _file: std::fs::File,
    path: PathBuf,
    home_id: String,
}

/// The line of the lock file that keeps the home's id.
const HOME_LINE: &str = "home ";

/// Another daemon holds the lock.
#[derive(Debug)]
pub struct AlreadyRunning {
    /// Its pid, when it could be read.
    pub pid: Option<u32>,
    /// The home it runs on.
    pub home: PathBuf,
}

impl std::fmt::Display for AlreadyRunning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = match self.pid {
            Some(pid) => format!("pid {pid}"),
            None => "pid unknown".to_string(),
        };
        write!(
            f,
            "another cairn daemon ({who}) is already running on CAIRN_HOME {}; stop it first, or give this one its own CAIRN_HOME (several daemons may share one database)",
            self.home.display()
        )
    }
}

impl std::error::Error for AlreadyRunning {}

impl DaemonLock {
    /// Takes the lock of `home` (created if needed) and writes this
    /// process's pid in it; [`AlreadyRunning`] when another daemon has it.
    pub async fn acquire(home: &Path) -> anyhow::Result<DaemonLock> {
        let dir = home.to_path_buf();
        tokio::task::spawn_blocking(move || crate::home::create(&dir))
            .await
            .context("the lock task failed")?
            .with_context(|| format!("cannot create {}", home.display()))?;
        let path = home.join(LOCK_FILE);
        // Not truncated on open: the holder's pid must stay readable.
        let mut options = tokio::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        options.mode(crate::home::FILE_MODE);
        let file = options
            .open(&path)
            .await
            .with_context(|| format!("cannot open {}", path.display()))?
            .into_std()
            .await;
        let home = home.to_path_buf();
        // try_lock never waits, so this blocks only on a small local file.
        tokio::task::spawn_blocking(move || take(file, path, home))
            .await
            .context("the lock task failed")?
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This home's id: 12 hex digits, the same for every daemon of the home.
    pub fn home_id(&self) -> &str {
        &self.home_id
    }

    /// How the owner id of every daemon of this home starts.
    pub fn owner_prefix(&self) -> String {
        format!("daemon-{}-", self.home_id)
    }
}

/// The home id a lock file's text keeps, if it is well formed.
fn home_id_in(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(HOME_LINE))
        .map(str::trim)
        .find(|id| id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_ascii_lowercase)
}

fn take(mut file: std::fs::File, path: PathBuf, home: PathBuf) -> anyhow::Result<DaemonLock> {
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(AlreadyRunning {
                pid: text.lines().next().and_then(|l| l.trim().parse().ok()),
                home,
            }
            .into());
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    // A file from before home ids (only a pid), or damaged, gets a new id.
    let mut text = String::new();
    file.read_to_string(&mut text)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let home_id = home_id_in(&text)
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_string());
    let write = |file: &mut std::fs::File| -> std::io::Result<()> {
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        writeln!(file, "{}", std::process::id())?;
        writeln!(file, "{HOME_LINE}{home_id}")?;
        file.sync_all()
    };
    write(&mut file).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(DaemonLock {
        _file: file,
        path,
        home_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_lock_on_the_same_home_names_the_holders_pid() {
        let home = tempfile::tempdir().unwrap();
        let held = DaemonLock::acquire(home.path()).await.unwrap();
        let err = DaemonLock::acquire(home.path()).await.unwrap_err();
        let running = err.downcast_ref::<AlreadyRunning>().unwrap();
        assert_eq!(running.pid, Some(std::process::id()));
        assert!(
            err.to_string()
                .contains(&format!("pid {}", std::process::id()))
        );
        drop(held);
        // Freed with its holder; the file stays and is reused.
        let again = DaemonLock::acquire(home.path()).await.unwrap();
        assert!(again.path().ends_with(LOCK_FILE));
    }

    #[tokio::test]
    async fn the_home_id_is_kept_across_daemons_and_made_for_an_old_file() {
        let home = tempfile::tempdir().unwrap();
        let first = DaemonLock::acquire(home.path()).await.unwrap();
        let id = first.home_id().to_string();
        assert_eq!(id.len(), 12);
        assert_eq!(first.owner_prefix(), format!("daemon-{id}-"));
        drop(first);
        let second = DaemonLock::acquire(home.path()).await.unwrap();
        assert_eq!(second.home_id(), id);
        drop(second);
        // Another home has another id.
        let other = tempfile::tempdir().unwrap();
        let elsewhere = DaemonLock::acquire(other.path()).await.unwrap();
        assert_ne!(elsewhere.home_id(), id);
        // A lock file written before home ids held only the pid.
        tokio::fs::write(home.path().join(LOCK_FILE), "4242\n")
            .await
            .unwrap();
        let upgraded = DaemonLock::acquire(home.path()).await.unwrap();
        assert_eq!(upgraded.home_id().len(), 12);
        let text = tokio::fs::read_to_string(upgraded.path()).await.unwrap();
        assert_eq!(
            text,
            format!("{}\nhome {}\n", std::process::id(), upgraded.home_id())
        );
    }
}
