//! Listing a directory below a root, and looking at one name, without
//! following links.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType};
use rustix::io::Errno;

use super::{FsError, OpenFor, Tree, Walk};

/// What a name in a directory is (a link is reported, not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Link,
    /// A FIFO, device or socket.
    Special,
}

impl Kind {
    fn of(kind: FileType) -> Self {
        match kind {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Link,
            _ => Kind::Special,
        }
    }
}

/// One entry of a listed directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name in the directory.
    pub name: OsString,
    /// What it is.
    pub kind: Kind,
    /// Its size in bytes (0 for anything but a file).
    pub len: u64,
    /// How many names it has (more than one for a hard-linked file).
    pub links: u64,
}

impl Tree {
    /// The entries of the directory `rel`, sorted by name.
    pub fn list(&self, rel: &Path) -> Result<Vec<Entry>, FsError> {
        let shown = || rel.display().to_string();
        let io = |e: Errno| FsError::Io {
            path: shown(),
            source: e.into(),
        };
        let listing = self.open(rel, OpenFor::List)?;
        // A second handle on the same directory to look at each name from.
        let at = listing.try_clone().map_err(|e| FsError::Io {
            path: shown(),
            source: e,
        })?;
        let mut dir = Dir::new(listing).map_err(io)?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(io)?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let st = match rustix::fs::statat(&at, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Removed since it was listed.
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(io(e)),
            };
            let kind = Kind::of(FileType::from_raw_mode(st.st_mode));
            out.push(Entry {
                name: name.to_os_string(),
                kind,
                len: if kind == Kind::File {
                    u64::try_from(st.st_size).unwrap_or(0)
                } else {
                    0
                },
                links: st.st_nlink,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// What `rel` is, or `None` when nothing is there (its last component
    /// is looked at, not followed; a link before it is refused).
    pub fn kind(&self, rel: &Path) -> Result<Option<Kind>, FsError> {
        let mut walk = Walk::new(rel)?;
        let root = match self.open_root(false, &walk) {
            Err(e) if e.is_not_found() => return Ok(None),
            other => other?,
        };
        let (dir, last) = match walk.parent(self, root, false) {
            Ok(Some(found)) => found,
            Ok(None) => return Ok(Some(Kind::Dir)),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        match rustix::fs::statat(&dir, last, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Kind::of(FileType::from_raw_mode(st.st_mode)))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(walk.io(e)),
        }
    }
}
