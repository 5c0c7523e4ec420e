//! The backup archive: a gzip-compressed tar whose first entry is
//! `manifest.json`, then `config.toml`, `database/…` (a SQLite file, or one
//! JSON-lines file per table) and `workspace/…`. Entries are written 0600
//! (directories 0700), and read back only as plain files and directories
//! under relative paths: nothing in an archive can write outside the
//! directory it is unpacked into.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};
use cairn_agent::nofollow::{Kind, OpenFor, Tree};
use cairn_store::portable::TableCount;
use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};

use crate::home;

/// The archive format this binary writes and reads.
pub const FORMAT: u32 = 1;

/// The name of the first entry.
pub const MANIFEST: &str = "manifest.json";

/// How the database is kept in the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DatabaseForm {
    /// `database/cairn.db`, a SQLite file written by `VACUUM INTO`.
    SqliteFile,
    /// `database/<table>.jsonl`, the portable export (from PostgreSQL).
    Jsonl,
}

/// What an archive holds; written first so a restore can refuse early.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The cairn version that wrote it.
    pub cairn_version: String,
    /// The schema version of the database in it.
    pub schema_version: i64,
    /// `sqlite` or `postgres`: the backend it was taken from.
    pub backend: String,
    /// When it was taken.
    pub created_at: DateTime<Utc>,
    /// How the database is kept.
    pub database: DatabaseForm,
    /// Rows per table, in copy order.
    pub tables: Vec<TableCount>,
    /// Whether config.toml is in it.
    pub config: bool,
    /// Regular files of the workspace in it.
    pub workspace_files: u64,
    /// The fingerprints of the keys its vault's secrets are sealed with
    /// (the key itself is never in the archive): a restore checks the key
    /// it is given against them before writing anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vault_keys: Vec<String>,
    /// The OS keyring entry (its user name) holding that key, when the
    /// home kept it there: a restore on the same machine finds it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vault_keyring_entry: Option<String>,
}

/// An archive being written to `FILE.partial`, renamed to `FILE` when finished.
pub struct Writer {
    tar: tar::Builder<GzEncoder<File>>,
    partial: PathBuf,
    target: PathBuf,
}

impl Writer {
    /// Starts `target` (refused if it exists, unless `replace`) with its manifest.
    pub fn create(target: &Path, replace: bool, manifest: &Manifest) -> anyhow::Result<Writer> {
        if !replace && exists(target) {
            bail!(crate::exit::BadInput(format!(
                "{} exists; add --force to replace it",
                target.display()
            )));
        }
        let mut name = target.as_os_str().to_owned();
        name.push(".partial");
        let partial = PathBuf::from(name);
        let file = home::create_file(&partial, true)?;
        let mut writer = Writer {
            tar: tar::Builder::new(GzEncoder::new(file, Compression::default())),
            partial,
            target: target.to_path_buf(),
        };
        let text = serde_json::to_vec_pretty(manifest)?;
        writer.bytes(MANIFEST, &text)?;
        Ok(writer)
    }

    /// Adds an entry holding `bytes`.
    pub fn bytes(&mut self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let mut header = file_header(bytes.len() as u64);
        self.tar
            .append_data(&mut header, name, bytes)
            .with_context(|| format!("cannot add {name} to the archive"))
    }

    /// Adds the file at `path` as `name`.
    #[expect(
        clippy::disallowed_methods,
        reason = "sync archive writing, outside async code"
    )]
    pub fn file(&mut self, name: &str, path: &Path) -> anyhow::Result<()> {
        let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let len = file.metadata()?.len();
        let mut header = file_header(len);
        self.tar
            .append_data(&mut header, name, file)
            .with_context(|| format!("cannot add {} to the archive", path.display()))
    }

    /// Adds the workspace file `rel` as `name`, opened through the no-follow
    /// walk (a link, hard link or special file swapped in since it was
    /// listed is refused, not archived).
    pub fn workspace_file(&mut self, name: &str, tree: &Tree, rel: &Path) -> anyhow::Result<()> {
        let shown = || tree.root().join(rel).display().to_string();
        let file = tree
            .open(rel, OpenFor::Read)
            .with_context(|| format!("cannot read {}", shown()))?;
        let len = file.metadata()?.len();
        let mut header = file_header(len);
        self.tar
            .append_data(&mut header, name, file)
            .with_context(|| format!("cannot add {} to the archive", shown()))
    }

    /// Completes the archive and moves it into place.
    #[expect(
        clippy::disallowed_methods,
        reason = "sync archive writing, outside async code"
    )]
    pub fn finish(self) -> anyhow::Result<()> {
        let gz = self.tar.into_inner().context("cannot finish the archive")?;
        let file = gz.finish().context("cannot finish the archive")?;
        file.sync_all()?;
        std::fs::rename(&self.partial, &self.target)
            .with_context(|| format!("cannot move the archive to {}", self.target.display()))
    }
}

/// Every regular file under `dir` (the private staging directory a restore
/// unpacks into), as (`prefix/…` name, path) in name
/// order, and how many symbolic links and special files were left out.
#[expect(
    clippy::disallowed_methods,
    reason = "sync archive writing, outside async code"
)]
pub fn list_tree(prefix: &str, dir: &Path) -> anyhow::Result<(Vec<(String, PathBuf)>, u64)> {
    let mut files = Vec::new();
    let mut skipped = 0;
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((files, 0)),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    let mut entries: Vec<_> = entries.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let kind = entry.file_type()?;
        let name = format!("{prefix}/{}", entry.file_name().to_string_lossy());
        if kind.is_dir() {
            let (more, s) = list_tree(&name, &entry.path())?;
            files.extend(more);
            skipped += s;
        } else if kind.is_file() {
            files.push((name, entry.path()));
        } else {
            skipped += 1;
        }
    }
    Ok((files, skipped))
}

/// Every file of the workspace to back up, as (`workspace/…` name, path
/// below the workspace) in name order, and how many were left out:
/// symbolic links, special files and files with other names (hard links),
/// all seen through the no-follow walk.
pub fn list_workspace(tree: &Tree) -> anyhow::Result<(Vec<(String, PathBuf)>, u64)> {
    let mut files = Vec::new();
    let mut skipped = 0;
    let mut stack = vec![PathBuf::new()];
    while let Some(dir) = stack.pop() {
        let entries = match tree.list(&dir) {
            Ok(entries) => entries,
            Err(e) if e.is_not_found() && dir.as_os_str().is_empty() => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot read {}", tree.root().join(&dir).display()));
            }
        };
        for entry in entries {
            let rel = dir.join(&entry.name);
            match entry.kind {
                Kind::Dir => stack.push(rel),
                Kind::File if entry.links == 1 => {
                    files.push((format!("workspace/{}", rel.display()), rel));
                }
                Kind::File | Kind::Link | Kind::Special => skipped += 1,
            }
        }
    }
    files.sort();
    Ok((files, skipped))
}

fn file_header(len: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_size(len);
    header.set_mode(0o600);
    header.set_mtime(Utc::now().timestamp().max(0).unsigned_abs());
    header.set_entry_type(tar::EntryType::Regular);
    header
}

#[expect(clippy::disallowed_methods, reason = "sync check before writing")]
fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

/// Opens an archive and reads its manifest, refusing other formats.
#[expect(
    clippy::disallowed_methods,
    reason = "sync archive reading, outside async code"
)]
pub fn read_manifest(path: &Path) -> anyhow::Result<Manifest> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut archive = tar::Archive::new(GzDecoder::new(BufReader::new(file)));
    let mut entries = archive
        .entries()
        .with_context(|| format!("{} is not a cairn backup", path.display()))?;
    let not_backup = || {
        format!(
            "{} is not a cairn backup (no {MANIFEST} first)",
            path.display()
        )
    };
    let mut first = entries
        .next()
        .with_context(not_backup)?
        .with_context(not_backup)?;
    if first.path()?.as_os_str() != MANIFEST {
        bail!(crate::exit::BadInput(not_backup()));
    }
    let mut text = String::new();
    first.read_to_string(&mut text)?;
    let manifest: Manifest = serde_json::from_str(&text)
        .with_context(|| format!("{}: {MANIFEST} is unreadable", path.display()))?;
    if manifest.format != FORMAT {
        bail!(crate::exit::BadInput(format!(
            "{}: archive format {} is not one this cairn reads ({FORMAT})",
            path.display(),
            manifest.format
        )));
    }
    Ok(manifest)
}

/// Unpacks every entry after the manifest into `dir` (files 0600,
/// directories 0700); refuses links, devices and paths leaving `dir`.
#[expect(
    clippy::disallowed_methods,
    reason = "sync archive reading, outside async code"
)]
pub fn unpack(path: &Path, dir: &Path) -> anyhow::Result<()> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut archive = tar::Archive::new(GzDecoder::new(BufReader::new(file)));
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = entry.path()?.into_owned();
        if name.as_os_str() == MANIFEST {
            continue;
        }
        let relative = safe_relative(&name)
            .with_context(|| format!("{}: entry {}", path.display(), name.display()))?;
        let out = dir.join(relative);
        match entry.header().entry_type() {
            tar::EntryType::Directory => home::create_dir(&out)?,
            tar::EntryType::Regular | tar::EntryType::GNUSparse => {
                if let Some(parent) = out.parent() {
                    home::create_dir(parent)?;
                }
                let mut file = home::create_file(&out, false)?;
                std::io::copy(&mut entry, &mut file)
                    .with_context(|| format!("cannot unpack {}", name.display()))?;
            }
            other => bail!(
                "{}: entry {} is a {other:?}, which a cairn backup never holds",
                path.display(),
                name.display()
            ),
        }
    }
    Ok(())
}

/// `name` if it is a plain relative path (no root, no `..`).
fn safe_relative(name: &Path) -> anyhow::Result<&Path> {
    if name
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        && !name.as_os_str().is_empty()
    {
        Ok(name)
    } else {
        bail!("refused: the path leaves the directory it is unpacked into")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_unpacked() {
        assert!(safe_relative(Path::new("workspace/notes/a.md")).is_ok());
        assert!(safe_relative(Path::new("./config.toml")).is_ok());
        assert!(safe_relative(Path::new("../etc/passwd")).is_err());
        assert!(safe_relative(Path::new("workspace/../../x")).is_err());
        assert!(safe_relative(Path::new("/etc/passwd")).is_err());
        assert!(safe_relative(Path::new("")).is_err());
    }
}
