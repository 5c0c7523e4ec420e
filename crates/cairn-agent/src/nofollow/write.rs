//! Writing below a root: a file replaced whole (a fresh temporary name, then
//! a rename), appended to, created new, or removed.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, OFlags, RenameFlags};
use rustix::io::Errno;

use super::{FsError, OpenFor, Tree, Walk, link_target};

/// Tries at appending when the file keeps appearing and vanishing meanwhile.
const APPEND_TRIES: usize = 3;

/// What a write did besides writing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Written {
    /// Symbolic links replaced on the way, each as `path -> target`: the
    /// file's old name when it was a link, and with
    /// [`Tree::replacing_links`] the directories of the path that were.
    pub replaced_links: Vec<String>,
}

impl Tree {
    /// Replaces the file `rel` with `bytes`, creating missing directories
    /// (see [`Tree::write_from`]).
    pub fn write(&self, rel: &Path, bytes: &[u8]) -> Result<Written, FsError> {
        self.write_from(rel, &mut &bytes[..], true)
    }

    /// Writes what `reader` yields as the file `rel`: under a fresh name
    /// created with `O_EXCL`, then renamed over `rel`, so a link or hard link
    /// there is replaced, never written through, and no reader sees half a
    /// file. With `replace` false an existing `rel` is kept ([`FsError::Exists`]).
    pub fn write_from(
        &self,
        rel: &Path,
        reader: &mut dyn Read,
        replace: bool,
    ) -> Result<Written, FsError> {
        let mut walk = Walk::new(rel)?;
        let root = self.open_root(true, &walk)?;
        let Some((dir, last)) = walk.parent(self, root, true)? else {
            return Err(FsError::IsDir { path: walk.shown() });
        };
        let (temp, mut file) = self.temp_file(&walk, &dir, last)?;
        let copied = std::io::copy(reader, &mut file)
            .and_then(|_| file.flush())
            .map_err(|e| walk.io_std(e));
        drop(file);
        let forget = |e: FsError| {
            let _ = rustix::fs::unlinkat(&dir, &temp, AtFlags::empty());
            e
        };
        copied.map_err(forget)?;
        let old = rustix::fs::statat(&dir, last, AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .map(|st| FileType::from_raw_mode(st.st_mode));
        let old_link = (old == Some(FileType::Symlink)).then(|| link_target(&dir, last));
        if old == Some(FileType::Directory) {
            return Err(forget(FsError::IsDir { path: walk.shown() }));
        }
        rename(&dir, &temp, last, replace).map_err(|e| {
            forget(match e {
                Errno::EXIST => FsError::Exists { path: walk.shown() },
                e => walk.io(e),
            })
        })?;
        let mut replaced_links = std::mem::take(&mut walk.replaced);
        if let Some(target) = old_link {
            replaced_links.push(format!("{} -> {target}", walk.shown()));
        }
        Ok(Written { replaced_links })
    }

    /// Appends `bytes` to the file `rel`, creating it and missing directories;
    /// one `write_all` on a file opened for appending, so two writers
    /// interleave whole entries.
    pub fn append(&self, rel: &Path, bytes: &[u8]) -> Result<(), FsError> {
        let mut file = self.open(rel, OpenFor::Append)?;
        file.write_all(bytes)
            .and_then(|()| file.flush())
            .map_err(|e| FsError::Io {
                path: rel.display().to_string(),
                source: e,
            })
    }

    /// Creates the new file `rel` holding `bytes` ([`FsError::Exists`] when
    /// the name is taken, by anything, a link included).
    pub fn create_new(&self, rel: &Path, bytes: &[u8]) -> Result<(), FsError> {
        let mut walk = Walk::new(rel)?;
        let root = self.open_root(true, &walk)?;
        let Some((dir, last)) = walk.parent(self, root, true)? else {
            return Err(FsError::IsDir { path: walk.shown() });
        };
        let mut file = walk.create(self, &dir, last, OFlags::WRONLY)?;
        file.write_all(bytes).map_err(|e| walk.io_std(e))
    }

    /// Removes the name `rel` (a link is removed, not what it points to).
    pub fn remove(&self, rel: &Path) -> Result<(), FsError> {
        let mut walk = Walk::new(rel)?;
        let root = self.open_root(false, &walk)?;
        let Some((dir, last)) = walk.parent(self, root, false)? else {
            return Err(FsError::IsDir { path: walk.shown() });
        };
        rustix::fs::unlinkat(&dir, last, AtFlags::empty()).map_err(|e| match e {
            Errno::ISDIR => FsError::IsDir { path: walk.shown() },
            e => walk.io(e),
        })
    }

    /// Opens `last` in `dir` for appending, creating it when missing.
    pub(super) fn open_append(
        &self,
        walk: &Walk<'_>,
        dir: &OwnedFd,
        last: &OsStr,
    ) -> Result<File, FsError> {
        let access = OFlags::WRONLY | OFlags::APPEND;
        for _ in 0..APPEND_TRIES {
            match walk.open_existing(self, dir, last, access) {
                Err(FsError::NotFound { .. }) => match walk.create(self, dir, last, access) {
                    // Made meanwhile: opened as an existing file next time round.
                    Err(FsError::Exists { .. }) => {}
                    other => return other,
                },
                other => return other,
            }
        }
        Err(FsError::Io {
            path: walk.shown(),
            source: std::io::Error::other("it kept appearing and vanishing; try again"),
        })
    }

    /// A new file under a fresh name beside `last`, and that name.
    fn temp_file(
        &self,
        walk: &Walk<'_>,
        dir: &OwnedFd,
        last: &OsStr,
    ) -> Result<(OsString, File), FsError> {
        // Short enough that a long name still makes a legal one.
        let stem: String = last.to_string_lossy().chars().take(64).collect();
        let temp = OsString::from(format!(".{stem}.{}.tmp", uuid::Uuid::new_v4().simple()));
        let file = walk.create(self, dir, &temp, OFlags::WRONLY)?;
        Ok((temp, file))
    }
}

/// Renames `from` to `to` in `dir`; without `replace`, never over an existing `to`.
fn rename(dir: &OwnedFd, from: &OsStr, to: &OsStr, replace: bool) -> Result<(), Errno> {
    if replace {
        return rustix::fs::renameat(dir, from, dir, to);
    }
    match rustix::fs::renameat_with(dir, from, dir, to, RenameFlags::NOREPLACE) {
        // A file system without RENAME_NOREPLACE: a hard link refuses an existing name too.
        Err(Errno::INVAL | Errno::NOSYS) => {
            rustix::fs::linkat(dir, from, dir, to, AtFlags::empty())?;
            rustix::fs::unlinkat(dir, from, AtFlags::empty())
        }
        other => other,
    }
}
