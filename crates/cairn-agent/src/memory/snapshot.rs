//! `MEMORY_SNAPSHOT.md`: the core memories as markdown, written by hygiene
//! and `cairn memory export`, and loaded back at start-up into an empty
//! store (cold-boot hydration), so a lost database keeps what matters.
//!
//! Format: a title, a line of explanation, then one `## key` heading per
//! memory followed by its content. A memory without a key has the heading
//! `## (no key)`. Content lines starting with `#` are written with a
//! backslash before them, so they never read as headings.

use std::path::{Path, PathBuf};

use cairn_store::{MemoryCategory, NewMemory, Store};
use chrono::{DateTime, Utc};

use super::MemoryError;
use crate::nofollow::Tree;

/// The snapshot's file name in the workspace.
pub const SNAPSHOT_FILE: &str = "MEMORY_SNAPSHOT.md";

/// The heading of a memory without a key.
const NO_KEY: &str = "(no key)";

/// One memory of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotEntry {
    /// Its key, if it had one.
    pub key: Option<String>,
    /// Its content.
    pub content: String,
}

/// The markdown of the core memories of `user_id` that `agent` owns, oldest
/// first (stable diffs). Other agents' shared memories are left to their
/// own snapshots: hydrated here, they would become copies of this agent's.
pub async fn export_snapshot(
    store: &Store,
    user_id: &str,
    agent: &str,
    now: DateTime<Utc>,
) -> Result<String, MemoryError> {
    let mut docs = store
        .list_memories(user_id, agent, Some(MemoryCategory::Core), u32::MAX)
        .await?;
    docs.retain(|d| d.agent == agent);
    docs.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    let mut out = format!(
        "# Memory snapshot\n\nCore memories exported by cairn at {}. Loaded back into an empty memory store at start-up.\n",
        now.format("%Y-%m-%d %H:%M UTC")
    );
    for doc in docs {
        let key = doc
            .key
            .as_deref()
            .map(|k| k.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|k| !k.is_empty() && k != NO_KEY)
            .unwrap_or_else(|| NO_KEY.to_string());
        out.push_str(&format!("\n## {key}\n\n"));
        for line in doc.content.trim().lines() {
            if line.starts_with('#') || line.starts_with("\\#") {
                out.push('\\');
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// The memories of a snapshot's markdown (text before the first `## ` is ignored).
pub fn parse_snapshot(text: &str) -> Vec<SnapshotEntry> {
    let mut entries = Vec::new();
    let mut current: Option<(Option<String>, Vec<String>)> = None;
    let mut finish = |current: Option<(Option<String>, Vec<String>)>| {
        if let Some((key, lines)) = current {
            let content = lines.join("\n").trim().to_string();
            if !content.is_empty() {
                entries.push(SnapshotEntry { key, content });
            }
        }
    };
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            finish(current.take());
            let heading = heading.trim();
            let key = (heading != NO_KEY && !heading.is_empty()).then(|| heading.to_string());
            current = Some((key, Vec::new()));
        } else if let Some((_, lines)) = current.as_mut() {
            let line = line
                .strip_prefix('\\')
                .filter(|l| l.starts_with('#') || l.starts_with("\\#"))
                .unwrap_or(line);
            lines.push(line.to_string());
        }
    }
    finish(current);
    entries
}

/// Writes the snapshot to `workspace/MEMORY_SNAPSHOT.md` and returns its
/// path: under a fresh temporary name, then renamed over the old one
/// ([`Tree::write`]), so a crash never leaves half a snapshot and a link
/// planted there (or at a temporary name) is never written through.
pub async fn write_snapshot(
    store: &Store,
    user_id: &str,
    agent: &str,
    workspace: &Path,
    now: DateTime<Utc>,
) -> Result<PathBuf, MemoryError> {
    let text = export_snapshot(store, user_id, agent, now).await?;
    let path = workspace.join(SNAPSHOT_FILE);
    Tree::new(workspace)
        .run(move |tree| tree.write(Path::new(SNAPSHOT_FILE), text.as_bytes()))
        .await
        .map_err(|e| MemoryError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    Ok(path)
}

/// Cold-boot hydration: when `agent` owns no memories of `user_id` at all
/// and its `workspace/MEMORY_SNAPSHOT.md` exists, stores each of its entries
/// as a core memory of `agent`'s (private: the snapshot does not say what
/// was shared). Returns how many were loaded (0 when nothing was done).
pub async fn hydrate(
    store: &Store,
    user_id: &str,
    agent: &str,
    workspace: &Path,
    now: DateTime<Utc>,
) -> Result<usize, MemoryError> {
    if store.count_memories(user_id, agent).await? > 0 {
        return Ok(0);
    }
    let path = workspace.join(SNAPSHOT_FILE);
    let read = Tree::new(workspace)
        .run(|tree| tree.read(Path::new(SNAPSHOT_FILE), u64::MAX))
        .await;
    let io = |message: String| MemoryError::Io {
        path: path.display().to_string(),
        message,
    };
    let bytes = match read {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(0),
        // Planted by someone: not loaded, and no reason to stop the start.
        Err(e) if e.is_refusal() => {
            tracing::warn!(path = %path.display(), reason = %e, "the memory snapshot is not loaded");
            return Ok(0);
        }
        Err(e) => return Err(io(e.to_string())),
    };
    let text = String::from_utf8(bytes).map_err(|e| io(e.to_string()))?;
    let entries = parse_snapshot(&text);
    for entry in &entries {
        store
            .store_memory(
                &NewMemory {
                    user_id: user_id.to_string(),
                    agent: agent.to_string(),
                    key: entry.key.clone(),
                    content: entry.content.clone(),
                    category: MemoryCategory::Core,
                    source: "snapshot".to_string(),
                    shared: false,
                },
                now,
            )
            .await?;
    }
    if !entries.is_empty() {
        tracing::info!(agent, memories = entries.len(), path = %path.display(), "memory hydrated from the snapshot");
    }
    Ok(entries.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_in_content_survive_the_round_trip() {
        let text = "# Memory snapshot\n\nintro\n\n## coffee\n\nespresso\n\\## not a heading\n\\\\# odd\n\n## (no key)\n\nlives in Lyon\n";
        assert_eq!(
            parse_snapshot(text),
            vec![
                SnapshotEntry {
                    key: Some("coffee".into()),
                    content: "espresso\n## not a heading\n\\# odd".into()
                },
                SnapshotEntry {
                    key: None,
                    content: "lives in Lyon".into()
                },
            ]
        );
    }
}
