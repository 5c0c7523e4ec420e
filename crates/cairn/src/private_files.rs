//! Files and directories only their owner may read: config.toml, backups,
//! restored files (0600) and the directories holding them (0700).
//! Sync code, for one-shot commands and `spawn_blocking`.

use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;

/// Creates `dir` and its missing parents with mode 0700.
#[allow(
    clippy::disallowed_methods,
    reason = "sync helper for one-shot commands and spawn_blocking"
)]
pub fn create_dir(dir: &Path) -> anyhow::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

/// Opens `path` for writing with mode 0600: a new file, or (with
/// `replace`) an existing one emptied and set to 0600.
#[allow(
    clippy::disallowed_methods,
    reason = "sync helper for one-shot commands and spawn_blocking"
)]
pub fn create_file(path: &Path, replace: bool) -> anyhow::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options.write(true).mode(0o600);
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
    file.set_permissions(Permissions::from_mode(0o600))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods)]
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
