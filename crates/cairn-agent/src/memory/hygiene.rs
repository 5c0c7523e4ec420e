//! Memory hygiene: daily memories archived after a week, archived and
//! conversation memories deleted after a month, core memories never touched;
//! then, when enabled, the core memories written to `MEMORY_SNAPSHOT.md`.
//!
//! One plain function, [`run_hygiene`], called by `cairn memory hygiene` and
//! by the daemon's system routine alike.

use std::path::{Path, PathBuf};

use cairn_store::{MemoryCategory, Store};
use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::MemoryError;
use super::snapshot::write_snapshot;

/// What hygiene keeps and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HygieneSettings {
    /// Off: [`run_hygiene`] does nothing.
    pub enabled: bool,
    /// Daily memories older than this many days are archived (7).
    pub archive_after_days: u32,
    /// Archived memories older than this many days are deleted (30).
    pub purge_after_days: u32,
    /// Conversation memories older than this many days are deleted (30).
    pub conversation_retention_days: u32,
    /// Writes `MEMORY_SNAPSHOT.md` (core memories) after cleaning.
    pub snapshot: bool,
}

impl Default for HygieneSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            archive_after_days: 7,
            purge_after_days: 30,
            conversation_retention_days: 30,
            snapshot: true,
        }
    }
}

/// What one hygiene pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HygieneReport {
    /// Whether it ran (hygiene may be disabled).
    pub ran: bool,
    /// Daily memories moved to `archived`.
    pub archived: u64,
    /// Archived memories deleted.
    pub purged: u64,
    /// Conversation memories deleted.
    pub purged_conversation: u64,
    /// The snapshot written, if any.
    pub snapshot: Option<PathBuf>,
}

/// One hygiene pass over the memories of `user_id` that `agent` owns (the
/// shared ones of other agents are theirs to clean) as of `now`; the
/// snapshot goes to the agent's `workspace/MEMORY_SNAPSHOT.md`.
pub async fn run_hygiene(
    store: &Store,
    user_id: &str,
    agent: &str,
    settings: &HygieneSettings,
    workspace: &Path,
    now: DateTime<Utc>,
) -> Result<HygieneReport, MemoryError> {
    if !settings.enabled {
        return Ok(HygieneReport::default());
    }
    let days = |n: u32| now - Duration::days(i64::from(n));
    let archived = store
        .archive_memories_older_than(
            user_id,
            agent,
            &[MemoryCategory::Daily],
            days(settings.archive_after_days),
        )
        .await?;
    let purged = store
        .purge_memories_older_than(
            user_id,
            agent,
            MemoryCategory::Archived,
            days(settings.purge_after_days),
        )
        .await?;
    let purged_conversation = store
        .purge_memories_older_than(
            user_id,
            agent,
            MemoryCategory::Conversation,
            days(settings.conversation_retention_days),
        )
        .await?;
    let snapshot = if settings.snapshot {
        Some(write_snapshot(store, user_id, agent, workspace, now).await?)
    } else {
        None
    };
    let report = HygieneReport {
        ran: true,
        archived,
        purged,
        purged_conversation,
        snapshot,
    };
    tracing::info!(agent, ?report, "memory hygiene");
    Ok(report)
}
