//! The one way cairn touches files below a root it does not trust all of:
//! the workspace (the agent's file tools, and the daemon's own reads and
//! writes there: identity files, `HEARTBEAT.md`, daily notes and archives,
//! the memory snapshot, routines' `state.md`, workspace skills, media, the
//! inbox, doctor's probe, backup and restore).
//!
//! The agent can plant anything in the workspace (a `git apply` makes
//! symbolic links), and the file system can change between a check and an
//! open. So every path is opened by a walk down from the root, one
//! component at a time, with `O_NOFOLLOW`:
//!
//! - no symbolic link below the root is followed, whenever it appeared;
//! - a regular file with more than one hard link is refused (it may be a
//!   file outside the workspace, linked in);
//! - special files (FIFOs, devices, sockets) are refused, checked before
//!   they are opened, so opening one has no effect;
//! - a file the daemon replaces is written under a fresh temporary name
//!   created with `O_EXCL`, then renamed over the old name: a link or hard
//!   link there is replaced, never written through.
//!
//! The root itself is trusted (the person configured it), so a root that is
//! itself a link is followed. `skills.paths` folders are not opened through
//! here: the person chose them, and they may hold links (see `skills`).
//!
//! Everything here blocks: async code calls it through [`Tree::run`].

mod list;
mod write;

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

pub use list::{Entry, Kind};
pub use write::Written;

/// Why a file below a root was refused or could not be used; each names the
/// path (relative to the root).
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// A symbolic link is in the way; `link` is the part of `path` that is one.
    #[error("{}", link_message(path, link))]
    Link {
        /// The path asked for.
        path: String,
        /// The component that is a link.
        link: String,
    },
    /// A regular file that has other names (hard links), maybe outside the root.
    #[error(
        "`{path}` has {links} hard links; cairn does not use a file that may be linked from outside the workspace"
    )]
    HardLink {
        /// The path asked for.
        path: String,
        /// Its link count.
        links: u64,
    },
    /// A FIFO, device or socket.
    #[error("`{path}` is {kind}, not a regular file")]
    Special {
        /// The path asked for.
        path: String,
        /// What it is ("a FIFO", "a device", ...).
        kind: &'static str,
    },
    /// A directory where a file was wanted.
    #[error("`{path}` is a directory")]
    IsDir {
        /// The path asked for.
        path: String,
    },
    /// A file where a directory was wanted.
    #[error("`{path}` is not a directory")]
    NotDir {
        /// The path asked for.
        path: String,
    },
    /// Nothing is there.
    #[error("`{path}` does not exist")]
    NotFound {
        /// The path asked for.
        path: String,
    },
    /// Something is there already (a new file was asked for).
    #[error("`{path}` exists already")]
    Exists {
        /// The path asked for.
        path: String,
    },
    /// Not a plain relative path (a `..`, a root, or empty).
    #[error("`{path}` is not a plain path below its root")]
    BadPath {
        /// The path asked for.
        path: String,
    },
    /// Any other failure of the file system.
    #[error("cannot use `{path}`: {source}")]
    Io {
        /// The path asked for.
        path: String,
        /// What the system said.
        source: std::io::Error,
    },
}

fn link_message(path: &str, link: &str) -> String {
    if path == link {
        format!("`{path}` is a symbolic link, which cairn does not follow")
    } else {
        format!("`{path}`: `{link}` is a symbolic link, which cairn does not follow")
    }
}

impl FsError {
    /// Whether the path is simply missing.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FsError::NotFound { .. })
    }

    /// Whether this is a refusal of what is there (a link, a hard link, a
    /// special file), as opposed to a missing file or an I/O failure.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            FsError::Link { .. } | FsError::HardLink { .. } | FsError::Special { .. }
        )
    }
}

/// What the last component is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenFor {
    /// Reading an existing file.
    Read,
    /// Writing an existing file in place, emptied, or a new one (the file
    /// tools' `file_write`); the daemon's own writes use [`Tree::write`].
    Replace,
    /// Appending to a file, creating it and missing directories.
    Append,
    /// Listing an existing directory.
    List,
}

/// A directory tree opened only through walks that follow no link below its root.
#[derive(Debug, Clone)]
pub struct Tree {
    root: PathBuf,
    file_mode: u32,
    dir_mode: u32,
    private: bool,
    replace_links: bool,
    hard_links: bool,
}

impl Tree {
    /// The tree below `root`; new files get 0666 and directories 0777, less the umask.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            file_mode: 0o666,
            dir_mode: 0o777,
            private: false,
            replace_links: false,
            hard_links: false,
        }
    }

    /// Files with several names are read too: for a folder the person chose
    /// (`skills.paths`), where the agent cannot plant them.
    #[must_use]
    pub fn allowing_hard_links(mut self) -> Self {
        self.hard_links = true;
        self
    }

    /// New files are exactly 0600 and directories 0700 (the home's modes).
    #[must_use]
    pub fn private(mut self) -> Self {
        self.file_mode = 0o600;
        self.dir_mode = 0o700;
        self.private = true;
        self
    }

    /// Writes replace a symbolic link standing where a directory of the path
    /// should be with a new directory (the link is removed, its target left
    /// alone), and report it; `cairn restore` puts back what the archive holds.
    #[must_use]
    pub fn replacing_links(mut self) -> Self {
        self.replace_links = true;
        self
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs blocking work on this tree on tokio's blocking pool (the
    /// future holds its own copy of the tree, not a borrow).
    pub fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Tree) -> Result<T, FsError> + Send + 'static,
    ) -> impl Future<Output = Result<T, FsError>> + Send + 'static {
        let tree = self.clone();
        async move {
            let root = tree.root.display().to_string();
            tokio::task::spawn_blocking(move || work(&tree))
                .await
                .map_err(|e| FsError::Io {
                    path: root,
                    source: std::io::Error::other(e.to_string()),
                })?
        }
    }

    /// Opens `rel` (relative to the root) for `how`, following no link below the root.
    pub fn open(&self, rel: &Path, how: OpenFor) -> Result<File, FsError> {
        let mut walk = Walk::new(rel)?;
        let creates = matches!(how, OpenFor::Replace | OpenFor::Append);
        let root = self.open_root(creates, &walk)?;
        if walk.names.is_empty() {
            return match how {
                OpenFor::List => Ok(File::from(reopen_dir(&root).map_err(|e| walk.io(e))?)),
                _ => Err(FsError::IsDir { path: walk.shown() }),
            };
        }
        let Some((dir, last)) = walk.parent(self, root, creates)? else {
            return Err(FsError::IsDir { path: walk.shown() });
        };
        match how {
            OpenFor::Read => walk.open_existing(self, &dir, last, OFlags::RDONLY),
            OpenFor::List => {
                let fd = rustix::fs::openat(
                    &dir,
                    last,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| walk.classify(&dir, last, walk.names.len(), e))?;
                Ok(File::from(fd))
            }
            OpenFor::Replace => {
                let file = match walk.open_existing(self, &dir, last, OFlags::WRONLY) {
                    Err(FsError::NotFound { .. }) => walk.create(self, &dir, last, OFlags::WRONLY),
                    other => other,
                }?;
                // Emptied only once it is known to be a file of its own.
                file.set_len(0).map_err(|e| walk.io_std(e))?;
                Ok(file)
            }
            OpenFor::Append => self.open_append(&walk, &dir, last),
        }
    }

    /// The first `limit` bytes of the file `rel`, or `None` when it does not exist.
    pub fn read(&self, rel: &Path, limit: u64) -> Result<Option<Vec<u8>>, FsError> {
        use std::io::Read;
        let file = match self.open(rel, OpenFor::Read) {
            Ok(file) => file,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        file.take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| FsError::Io {
                path: rel.display().to_string(),
                source: e,
            })?;
        Ok(Some(bytes))
    }

    /// Opens the root as a path handle; with `create`, makes it (and its
    /// parents: the root is configured, not planted) when missing.
    fn open_root(&self, create: bool, walk: &Walk<'_>) -> Result<OwnedFd, FsError> {
        let open = || {
            rustix::fs::open(
                &self.root,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
        };
        match open() {
            Err(Errno::NOENT) if create => {
                let mut builder = std::fs::DirBuilder::new();
                std::os::unix::fs::DirBuilderExt::mode(builder.recursive(true), self.dir_mode);
                builder.create(&self.root).map_err(|e| FsError::Io {
                    path: self.root.display().to_string(),
                    source: e,
                })?;
                open().map_err(|e| walk.root_error(e))
            }
            other => other.map_err(|e| walk.root_error(e)),
        }
    }
}

/// One path being walked: its components, and how messages show it.
struct Walk<'a> {
    names: Vec<&'a OsStr>,
    rel: &'a Path,
    /// Links removed on the way ([`Tree::replacing_links`]).
    replaced: Vec<String>,
}

impl<'a> Walk<'a> {
    fn new(rel: &'a Path) -> Result<Self, FsError> {
        let mut names = Vec::new();
        for component in rel.components() {
            match component {
                Component::Normal(name) => names.push(name),
                Component::CurDir => {}
                _ => {
                    return Err(FsError::BadPath {
                        path: rel.display().to_string(),
                    });
                }
            }
        }
        Ok(Self {
            names,
            rel,
            replaced: Vec::new(),
        })
    }

    fn shown(&self) -> String {
        if self.names.is_empty() {
            ".".to_string()
        } else {
            self.rel.display().to_string()
        }
    }

    /// The first `n` components, as messages show them.
    fn prefix(&self, n: usize) -> String {
        self.names[..n]
            .iter()
            .map(|n| n.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/")
    }

    fn io(&self, e: Errno) -> FsError {
        match e {
            Errno::NOENT => FsError::NotFound { path: self.shown() },
            e => FsError::Io {
                path: self.shown(),
                source: e.into(),
            },
        }
    }

    fn io_std(&self, e: std::io::Error) -> FsError {
        FsError::Io {
            path: self.shown(),
            source: e,
        }
    }

    fn root_error(&self, e: Errno) -> FsError {
        match e {
            Errno::NOENT => FsError::NotFound { path: self.shown() },
            e => FsError::Io {
                path: self.shown(),
                source: std::io::Error::other(format!("its root is not usable: {e}")),
            },
        }
    }

    /// Walks down to the directory holding the last component (creating
    /// missing directories with `create`); `None` when the path is the root.
    fn parent(
        &mut self,
        tree: &Tree,
        root: OwnedFd,
        create: bool,
    ) -> Result<Option<(OwnedFd, &'a OsStr)>, FsError> {
        let Some((&last, parents)) = self.names.split_last() else {
            return Ok(None);
        };
        let mut dir = root;
        for (i, &name) in parents.iter().enumerate() {
            dir = match step(&dir, name) {
                Ok(next) => next,
                Err(Errno::NOENT) if create => {
                    make_dir(tree, &dir, name).map_err(|e| self.classify(&dir, name, i + 1, e))?
                }
                Err(_) if create && tree.replace_links && is_link(&dir, name) => {
                    let target = link_target(&dir, name);
                    // Unlinking removes the link itself; its target is not touched.
                    let made = rustix::fs::unlinkat(&dir, name, AtFlags::empty())
                        .and_then(|()| make_dir(tree, &dir, name))
                        .map_err(|e| self.io(e))?;
                    self.replaced
                        .push(format!("{} -> {target}", self.prefix(i + 1)));
                    made
                }
                Err(e) => return Err(self.classify(&dir, name, i + 1, e)),
            };
        }
        Ok(Some((dir, last)))
    }

    /// Why opening the `n`-th component `name` in `dir` failed with `e`:
    /// a refusal when it is a link (`O_NOFOLLOW` answers `ELOOP` for the
    /// last component, `ENOTDIR` for a directory handle), else the error.
    fn classify(&self, dir: &OwnedFd, name: &OsStr, n: usize, e: Errno) -> FsError {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => FsError::Link {
                path: self.shown(),
                link: self.prefix(n),
            },
            Ok(st) if e == Errno::NOTDIR => match special(FileType::from_raw_mode(st.st_mode)) {
                Some(kind) if n == self.names.len() => FsError::Special {
                    path: self.shown(),
                    kind,
                },
                _ => FsError::NotDir {
                    path: self.prefix(n),
                },
            },
            _ => self.io(e),
        }
    }

    /// Opens the existing file `last` in `dir` with `access` (read or
    /// write, never creating), after checking what it is.
    fn open_existing(
        &self,
        tree: &Tree,
        dir: &OwnedFd,
        last: &OsStr,
        access: OFlags,
    ) -> Result<File, FsError> {
        let n = self.names.len();
        // Looked at before it is opened: opening a device or FIFO can do things.
        let st = rustix::fs::statat(dir, last, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| self.classify(dir, last, n, e))?;
        // Only reads may share a file with other names, and only where allowed.
        let hard_links = tree.hard_links && access == OFlags::RDONLY;
        self.check_file(&st, hard_links)?;
        let flags = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK | access;
        let fd = rustix::fs::openat(dir, last, flags, Mode::empty())
            .map_err(|e| self.classify(dir, last, n, e))?;
        // Checked again on what was opened: the name may have changed meanwhile.
        let st = rustix::fs::fstat(&fd).map_err(|e| self.io(e))?;
        self.check_file(&st, hard_links)?;
        Ok(File::from(fd))
    }

    /// Creates the new file `last` in `dir` (`O_EXCL`: never through a link).
    fn create(
        &self,
        tree: &Tree,
        dir: &OwnedFd,
        last: &OsStr,
        access: OFlags,
    ) -> Result<File, FsError> {
        let flags =
            OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd = rustix::fs::openat(
            dir,
            last,
            flags | access,
            Mode::from_raw_mode(tree.file_mode),
        )
        .map_err(|e| match e {
            Errno::EXIST => FsError::Exists { path: self.shown() },
            e => self.classify(dir, last, self.names.len(), e),
        })?;
        if tree.private {
            // The umask may only narrow; the home's files are exactly 0600.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(tree.file_mode)).map_err(|e| self.io(e))?;
        }
        Ok(File::from(fd))
    }

    /// A regular file with one name (any number with `hard_links`), or the
    /// refusal saying what it is.
    fn check_file(&self, st: &Stat, hard_links: bool) -> Result<(), FsError> {
        let path = self.shown();
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile if st.st_nlink > 1 && !hard_links => Err(FsError::HardLink {
                path,
                links: st.st_nlink,
            }),
            FileType::RegularFile => Ok(()),
            FileType::Directory => Err(FsError::IsDir { path }),
            FileType::Symlink => Err(FsError::Link {
                link: path.clone(),
                path,
            }),
            other => Err(FsError::Special {
                path,
                kind: special(other).unwrap_or("not a regular file"),
            }),
        }
    }
}

/// How a special file is named in messages; `None` for files, directories and links.
fn special(kind: FileType) -> Option<&'static str> {
    match kind {
        FileType::Fifo => Some("a FIFO"),
        FileType::Socket => Some("a socket"),
        FileType::CharacterDevice | FileType::BlockDevice => Some("a device"),
        FileType::RegularFile | FileType::Directory | FileType::Symlink => None,
        FileType::Unknown => Some("of an unknown kind"),
    }
}

/// Opens the directory `name` in `dir` as a path handle, refusing a link.
fn step(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Makes the directory `name` in `dir` (or finds it made meanwhile) and steps into it.
fn make_dir(tree: &Tree, dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, Errno> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(tree.dir_mode)) {
        Ok(()) | Err(Errno::EXIST) => step(dir, name),
        Err(e) => Err(e),
    }
}

/// What the link `name` in `dir` points to, as messages show it.
fn link_target(dir: &OwnedFd, name: &OsStr) -> String {
    rustix::fs::readlinkat(dir, name, Vec::new())
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether `name` in `dir` is a symbolic link.
fn is_link(dir: &OwnedFd, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

/// A readable handle on the directory behind a path handle.
fn reopen_dir(dir: &OwnedFd) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

#[cfg(test)]
mod tests;
