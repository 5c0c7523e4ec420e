//! Opening files below a root without following symbolic links.
//!
//! The file tools resolve a path first ([`super::paths::PathScope::resolve`]),
//! but canonicalisation cannot see through a link whose target does not exist
//! yet (a dangling link), and the file system can change between the check
//! and the open. So the open walks down from the root one component at a time
//! with `O_NOFOLLOW`: a link anywhere below the root is refused, whenever it
//! appeared. A new file is created with `O_EXCL`, so a name that appears in
//! the meantime (a link included) is never written through.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::ToolError;

/// What the last component is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpenFor {
    /// Reading an existing file.
    Read,
    /// Replacing a file's content, creating it and missing directories.
    Replace,
    /// Appending to a file, creating it and missing directories.
    Append,
    /// Listing an existing directory.
    List,
}

/// Opens `path`, which lies below `root` (both canonical, as
/// [`PathScope::resolve`](super::paths::PathScope::resolve) returns them),
/// without following a symbolic link below `root`; `shown` names the path in
/// messages. Blocking: async code calls it through
/// [`off_runtime`](super::paths::off_runtime).
pub(crate) fn open_below(
    root: &Path,
    path: &Path,
    how: OpenFor,
    shown: &str,
) -> Result<File, ToolError> {
    let rel = path
        .strip_prefix(root)
        .map_err(|_| ToolError::NotPermitted(format!("`{shown}` is outside the workspace")))?;
    let mut names = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => names.push(name),
            _ => {
                return Err(ToolError::InvalidArguments(format!(
                    "`{shown}` is not a normalised path"
                )));
            }
        }
    }
    let io = |e: Errno| ToolError::Io(format!("cannot open `{shown}`: {e}"));
    let mut dir = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)?;
    let Some((last, parents)) = names.split_last() else {
        return match how {
            OpenFor::List => Ok(File::from(reopen_dir(&dir).map_err(io)?)),
            _ => Err(ToolError::InvalidArguments(format!(
                "`{shown}` is a directory"
            ))),
        };
    };
    let creates = matches!(how, OpenFor::Replace | OpenFor::Append);
    for name in parents {
        dir = match step(&dir, name) {
            Err(Errno::NOENT) if creates => {
                match rustix::fs::mkdirat(&dir, *name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => step(&dir, name),
                    Err(e) => Err(e),
                }
            }
            other => other,
        }
        .map_err(|e| refusal(&dir, name, e, shown))?;
    }
    // Non-blocking: a FIFO or device planted in the workspace must not hang the call.
    let flags = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
    let fd = match how {
        OpenFor::Read => rustix::fs::openat(&dir, *last, flags | OFlags::RDONLY, Mode::empty()),
        OpenFor::List => rustix::fs::openat(
            &dir,
            *last,
            flags | OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        ),
        OpenFor::Replace | OpenFor::Append => {
            let flags = flags
                | OFlags::WRONLY
                | if how == OpenFor::Append {
                    OFlags::APPEND
                } else {
                    OFlags::TRUNC
                };
            match rustix::fs::openat(&dir, *last, flags, Mode::empty()) {
                Err(Errno::NOENT) => rustix::fs::openat(
                    &dir,
                    *last,
                    flags | OFlags::CREATE | OFlags::EXCL,
                    Mode::from_raw_mode(0o666),
                ),
                other => other,
            }
        }
    }
    .map_err(|e| match e {
        Errno::ISDIR => ToolError::InvalidArguments(format!("`{shown}` is a directory")),
        Errno::EXIST => ToolError::NotPermitted(format!(
            "`{shown}` appeared while it was being created; try again"
        )),
        e => refusal(&dir, last, e, shown),
    })?;
    let kind = rustix::fs::fstat(&fd).map_err(io)?;
    let kind = FileType::from_raw_mode(kind.st_mode);
    match (how, kind) {
        (OpenFor::List, FileType::Directory)
        | (OpenFor::Read | OpenFor::Replace | OpenFor::Append, FileType::RegularFile) => {}
        (_, FileType::Directory) => {
            return Err(ToolError::InvalidArguments(format!(
                "`{shown}` is a directory"
            )));
        }
        _ => {
            return Err(ToolError::InvalidArguments(format!(
                "`{shown}` is not a regular file"
            )));
        }
    }
    Ok(File::from(fd))
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

/// A readable handle on the directory behind a path handle.
fn reopen_dir(dir: &OwnedFd) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Why opening `name` in `dir` failed with `e`: a refusal when it is a
/// symbolic link (`O_NOFOLLOW` answers `ELOOP` for the last component,
/// `ENOTDIR` for a directory handle), an I/O error otherwise.
fn refusal(dir: &OwnedFd, name: &OsStr, e: Errno, shown: &str) -> ToolError {
    let is_link = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink);
    if is_link {
        ToolError::NotPermitted(format!(
            "`{shown}`: `{}` is a symbolic link, which file tools do not follow",
            name.to_string_lossy()
        ))
    } else {
        ToolError::Io(format!("cannot open `{shown}`: {e}"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::disallowed_methods)]

    use std::io::{Read, Write};

    use super::*;

    #[test]
    fn creates_replaces_appends_and_reads() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let path = root.join("a/b/c.txt");
        let mut f = open_below(&root, &path, OpenFor::Replace, "c").unwrap();
        f.write_all(b"one").unwrap();
        let mut f = open_below(&root, &path, OpenFor::Append, "c").unwrap();
        f.write_all(b"+two").unwrap();
        let mut text = String::new();
        open_below(&root, &path, OpenFor::Read, "c")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "one+two");
        open_below(&root, &path, OpenFor::Replace, "c")
            .unwrap()
            .write_all(b"3")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "3");
        assert!(open_below(&root, &root.join("a"), OpenFor::List, "a").is_ok());
        assert!(open_below(&root, &root, OpenFor::List, ".").is_ok());
        assert!(matches!(
            open_below(&root, &root.join("a"), OpenFor::Read, "a"),
            Err(ToolError::InvalidArguments(m)) if m.contains("is a directory")
        ));
        assert!(matches!(
            open_below(&root, &root.join("a/missing"), OpenFor::Read, "a/missing"),
            Err(ToolError::Io(_))
        ));
    }

    /// A link swapped in after the path was resolved is refused wherever it is.
    #[test]
    fn refuses_links_in_any_component() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("sub/link")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), root.join("file_link")).unwrap();
        for (path, how) in [
            ("sub/link/x.txt", OpenFor::Replace),
            ("sub/link/x.txt", OpenFor::Read),
            ("sub/link", OpenFor::List),
            ("file_link", OpenFor::Replace),
            ("file_link", OpenFor::Append),
            ("file_link", OpenFor::Read),
        ] {
            match open_below(&root, &root.join(path), how, path) {
                Err(ToolError::NotPermitted(m)) => assert!(m.contains("symbolic link"), "{m}"),
                other => panic!("{path} {how:?}: {other:?}"),
            }
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
