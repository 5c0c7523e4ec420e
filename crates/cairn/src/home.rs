//! `CAIRN_HOME` is the owner's alone, and so is what cairn writes for the
//! person elsewhere (backups, restored files, exports): the directory is 0700 and the files
//! cairn keeps there (the SQLite database and its `-wal`/`-shm`,
//! `config.toml`, `daemon.lock`, `daemon_state.json`, `install.key`) are
//! 0600. New ones are created so (the store creates the database, the daemon
//! its lock and state file); a home made earlier with wider modes is
//! tightened when the daemon starts, saying what it changed, and `cairn
//! doctor` warns about one it finds readable by others, with the command
//! that fixes it.
//!
//! Everything here is small synchronous file-system work, run before the
//! runtime has anything else to do (or inside `spawn_blocking`).
#![expect(
    clippy::disallowed_methods,
    reason = "start-up and doctor: a few stats and chmods, before the runtime has work"
)]

use std::fs::{OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The home directory's mode.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file cairn keeps in the home, and of the database.
pub const FILE_MODE: u32 = 0o600;

/// The files cairn keeps in the home besides the database.
const HOME_FILES: [&str; 4] = [
    "config.toml",
    "daemon.lock",
    "daemon_state.json",
    "install.key",
];

/// One mode changed (or found too wide): the path, its mode and the one it should have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    /// The directory or file.
    pub path: PathBuf,
    /// Its permission bits.
    pub mode: u32,
    /// What they should be.
    pub wanted: u32,
}

/// Creates `home` (and missing parents) with mode 0700 when it does not exist.
pub fn create(home: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    builder.create(home)
}

/// Creates `dir` and its missing parents with mode 0700.
pub fn create_dir(dir: &Path) -> anyhow::Result<()> {
    create(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Opens `path` for writing with mode 0600: a new file, or (with
/// `replace`) an existing one emptied and set to 0600.
pub fn create_file(path: &Path, replace: bool) -> anyhow::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options.write(true).mode(FILE_MODE);
    if replace {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let file = options.open(path).with_context(|| {
        if replace {
            format!("cannot write {}", path.display())
        } else {
            format!("cannot create {} (does it exist already?)", path.display())
        }
    })?;
    // An existing file keeps its mode on open: narrow it.
    file.set_permissions(Permissions::from_mode(FILE_MODE))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    Ok(file)
}

/// Writes `bytes` to `path` (mode 0600), replacing any file there when `replace`.
pub fn write(path: &Path, bytes: &[u8], replace: bool) -> anyhow::Result<()> {
    let mut file = create_file(path, replace)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The SQLite database file (with its `-wal` and `-shm`) a database URL
/// names; nothing for PostgreSQL or an in-memory database.
pub fn database_files(url: &str) -> Vec<PathBuf> {
    let Some(db) = cairn_store::sqlite_file(url) else {
        return Vec::new();
    };
    let name = db.as_os_str().to_owned();
    let mut files = vec![db];
    for suffix in ["-wal", "-shm"] {
        let mut side = name.clone();
        side.push(suffix);
        files.push(PathBuf::from(side));
    }
    files
}

/// The home and the files that should be private, with the mode each should have.
fn private_paths(home: &Path, database_url: &str) -> Vec<(PathBuf, u32)> {
    let mut paths = vec![(home.to_path_buf(), DIR_MODE)];
    paths.extend(HOME_FILES.iter().map(|f| (home.join(f), FILE_MODE)));
    paths.extend(
        database_files(database_url)
            .into_iter()
            .map(|f| (f, FILE_MODE)),
    );
    paths
}

/// Of the home and its private files, those group or others may reach
/// (missing ones are skipped).
pub fn exposed(home: &Path, database_url: &str) -> Vec<Exposed> {
    private_paths(home, database_url)
        .into_iter()
        .filter_map(|(path, wanted)| {
            let mode = mode_of(&path)?;
            (mode & 0o077 != 0).then_some(Exposed { path, mode, wanted })
        })
        .collect()
}

/// Creates the home 0700 if needed, then takes group and others' access
/// away from it and its private files, logging each change (a failure is
/// logged and the start goes on: the daemon can run, only less privately).
pub fn secure(home: &Path, database_url: &str) -> std::io::Result<Vec<Exposed>> {
    create(home)?;
    let mut changed = Vec::new();
    for found in exposed(home, database_url) {
        let shown = found.path.display().to_string();
        match set_mode(&found.path, found.wanted) {
            Ok(()) => {
                tracing::warn!(
                    path = %shown,
                    from = %format!("{:04o}", found.mode),
                    to = %format!("{:04o}", found.wanted),
                    "tightened the permissions of a private file or directory: other users could read it"
                );
                changed.push(found);
            }
            Err(error) => tracing::warn!(
                path = %shown,
                mode = %format!("{:04o}", found.mode),
                %error,
                "cannot tighten the permissions of a private file or directory; other users may read it"
            ),
        }
    }
    Ok(changed)
}

/// The `chmod` commands that make `exposed` private again.
pub fn fix_commands(exposed: &[Exposed]) -> Vec<String> {
    let mut by_mode: Vec<(u32, Vec<String>)> = Vec::new();
    for e in exposed {
        let path = shell_quote(&e.path.display().to_string());
        match by_mode.iter_mut().find(|(mode, _)| *mode == e.wanted) {
            Some((_, paths)) => paths.push(path),
            None => by_mode.push((e.wanted, vec![path])),
        }
    }
    by_mode
        .into_iter()
        .map(|(mode, paths)| format!("chmod {mode:o} {}", paths.join(" ")))
        .collect()
}

/// `text` as one shell word.
fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(unix)]
fn mode_of(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn mode_of(_: &Path) -> Option<u32> {
    None
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fix_commands_group_paths_by_mode_and_quote_them() {
        let e = |path: &str, wanted| Exposed {
            path: PathBuf::from(path),
            mode: 0o755,
            wanted,
        };
        assert_eq!(
            fix_commands(&[
                e("/h", DIR_MODE),
                e("/h/cairn.db", FILE_MODE),
                e("/h/it's.key", FILE_MODE)
            ]),
            ["chmod 700 /h", r"chmod 600 /h/cairn.db '/h/it'\''s.key'"]
        );
    }

    #[test]
    fn database_files_are_the_sqlite_file_and_its_companions() {
        assert_eq!(
            database_files("sqlite:///h/cairn.db?mode=rwc"),
            [
                PathBuf::from("/h/cairn.db"),
                PathBuf::from("/h/cairn.db-wal"),
                PathBuf::from("/h/cairn.db-shm")
            ]
        );
        assert!(database_files("postgres://u@h/db").is_empty());
        assert!(database_files("sqlite::memory:").is_empty());
    }
}

#[cfg(test)]
mod private_file_tests {
    use super::*;

    #[test]
    #[expect(
        clippy::disallowed_methods,
        reason = "test fixtures may use blocking std::fs"
    )]
    fn files_and_directories_are_the_owners_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        create_dir(&dir).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("config.toml");
        write(&file, b"x", false).unwrap();
        assert_eq!(mode(&file), 0o600);
        assert!(write(&file, b"y", false).is_err(), "no silent overwrite");
        std::fs::set_permissions(&file, Permissions::from_mode(0o644)).unwrap();
        write(&file, b"y", true).unwrap();
        assert_eq!(mode(&file), 0o600);
        assert_eq!(std::fs::read(&file).unwrap(), b"y");
    }
}
