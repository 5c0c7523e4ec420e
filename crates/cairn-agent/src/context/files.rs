//! Appending to the workspace's archive and daily-log files.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use super::compactor::CompactionError;
use crate::nofollow::{FsError, Tree};

/// `context/archive/YYYY-MM-DD.md` under the workspace.
pub fn archive_path(workspace: &Path, date: NaiveDate) -> PathBuf {
    workspace
        .join("context")
        .join("archive")
        .join(format!("{}.md", date.format("%Y-%m-%d")))
}

/// `daily/YYYY-MM-DD.md` under the workspace.
pub fn daily_path(workspace: &Path, date: NaiveDate) -> PathBuf {
    workspace
        .join("daily")
        .join(format!("{}.md", date.format("%Y-%m-%d")))
}

/// Appends `text` to the file at `path` (below `workspace`), creating it and
/// its directories, through [`Tree::append`]: a link or hard link there is
/// refused, never written through.
///
/// One `write_all` on a file opened for appending, so two compactions writing
/// the same day's file at once interleave whole entries, never lines.
pub async fn append(workspace: &Path, path: &Path, text: &str) -> Result<(), CompactionError> {
    let io = |e: FsError| CompactionError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    };
    let rel = path
        .strip_prefix(workspace)
        .map_err(|_| {
            io(FsError::BadPath {
                path: path.display().to_string(),
            })
        })?
        .to_path_buf();
    let text = text.to_string();
    Tree::new(workspace)
        .run(move |tree| tree.append(&rel, text.as_bytes()))
        .await
        .map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn appends_and_names_the_file_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let date = NaiveDate::from_ymd_opt(2025, 3, 14).unwrap();
        let path = archive_path(ws, date);
        assert!(path.ends_with("context/archive/2025-03-14.md"));
        append(ws, &path, "one\n").await.unwrap();
        append(ws, &path, "two\n").await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");

        // A file where a directory should be: the error names the path.
        let blocked = ws.join("daily");
        std::fs::write(&blocked, "not a dir").unwrap();
        let err = append(ws, &daily_path(ws, date), "x").await.unwrap_err();
        assert!(err.to_string().contains("daily"), "{err}");
    }

    /// Today's notes planted as a link to a file outside: refused, untouched.
    #[tokio::test]
    async fn never_appends_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "mine").unwrap();
        let date = NaiveDate::from_ymd_opt(2025, 3, 14).unwrap();
        let path = daily_path(ws, date);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let err = append(ws, &path, "x").await.unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
    }
}
