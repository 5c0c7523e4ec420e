//! Appending to the workspace's archive and daily-log files.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use tokio::io::AsyncWriteExt;

use super::compactor::CompactionError;

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

/// Appends `text` to the file at `path`, creating it and its directories.
///
/// One `write_all` on a file opened for appending, so two compactions writing
/// the same day's file at once interleave whole entries, never lines.
pub async fn append(path: &Path, text: &str) -> Result<(), CompactionError> {
    let io = |source| CompactionError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(io)?;
    }
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await
        .map_err(io)?;
    file.write_all(text.as_bytes()).await.map_err(io)?;
    file.flush().await.map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn appends_and_names_the_file_on_error() {
        let dir = tempfile::tempdir().unwrap();
        let date = NaiveDate::from_ymd_opt(2025, 3, 14).unwrap();
        let path = archive_path(dir.path(), date);
        assert!(path.ends_with("context/archive/2025-03-14.md"));
        append(&path, "one\n").await.unwrap();
        append(&path, "two\n").await.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");

        // A file where a directory should be: the error names the path.
        let blocked = dir.path().join("daily");
        std::fs::write(&blocked, "not a dir").unwrap();
        let err = append(&daily_path(dir.path(), date), "x")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("daily"), "{err}");
    }
}
