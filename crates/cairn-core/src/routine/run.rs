//! The record of one execution of a routine.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// How a run ended (or that it has not yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// In progress, held by a live process's lease.
    Running,
    /// Finished with nothing to report.
    Ok,
    /// Finished and found something the person should see.
    Attention,
    /// Finished with an error.
    Failed,
    /// Its process went away before it finished (crash, kill, restart): not
    /// the routine's failure, and a scheduled slot may be re-run once.
    Interrupted,
    /// Not run: a guardrail (cooldown, concurrency, dedup, budget, overlap) held it back.
    Skipped,
    /// A slot queued behind another run of its routine (`overlap: buffer_*`,
    /// caught-up slots, a backfill): not started yet, held by no process.
    Waiting,
    /// Stopped before it ended, on purpose (`overlap: cancel_other`): not the
    /// routine's failure.
    Cancelled,
}

impl RunStatus {
    /// Every status, for listings and parsing.
    pub const ALL: [RunStatus; 8] = [
        RunStatus::Running,
        RunStatus::Ok,
        RunStatus::Attention,
        RunStatus::Failed,
        RunStatus::Interrupted,
        RunStatus::Skipped,
        RunStatus::Waiting,
        RunStatus::Cancelled,
    ];

    /// The lowercase name used in files, the store and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Ok => "ok",
            RunStatus::Attention => "attention",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Skipped => "skipped",
            RunStatus::Waiting => "waiting",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the run is over (not running, not waiting its turn).
    pub fn is_terminal(self) -> bool {
        !matches!(self, RunStatus::Running | RunStatus::Waiting)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status name that is not one of the eight.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown run status \"{0}\"; expected running, ok, attention, failed, interrupted, skipped, waiting or cancelled"
)]
pub struct UnknownStatus(pub String);

impl FromStr for RunStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_string()))
    }
}

/// One execution of a routine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutineRun {
    /// Unique id of the run.
    pub id: Uuid,
    /// The routine it belongs to.
    pub routine_id: Uuid,
    /// What fired it: `cron`, `once`, `event`, `system_event`, `webhook`, `manual`, `backfill`.
    pub trigger_type: String,
    /// Details of the fire (the matched message, the webhook's delivery id…).
    pub trigger_detail: Option<String>,
    /// For scheduled fires, the slot it fills; `(routine_id, scheduled_for, attempt)` is unique.
    pub scheduled_for: Option<DateTime<Utc>>,
    /// 1, or 2 for the re-run of a slot whose first run a crash interrupted.
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// How it ended.
    pub status: RunStatus,
    /// What it found or why it failed.
    pub result_summary: Option<String>,
    /// Tokens spent.
    pub tokens_used: Option<u64>,
    /// The job it started, for `full_job` actions.
    pub job_id: Option<Uuid>,
    /// The notification the run sent (its delivery status is the notification's).
    pub notification_id: Option<Uuid>,
    /// Why the run was `skipped` (which guardrail held it back).
    pub skip_reason: Option<String>,
    /// Content hash of the fire's payload, for `dedup_window`.
    pub dedup_key: Option<String>,
    /// Id of the process holding the run while it is `running`; kept on an
    /// `interrupted` run (whose crash it was).
    pub owner: Option<String>,
    /// The owner must renew its hold before this instant, or the run is an orphan.
    pub lease_until: Option<DateTime<Utc>>,
}

/// The attempt of a run that is not a re-run.
pub const FIRST_ATTEMPT: u32 = 1;

fn first_attempt() -> u32 {
    FIRST_ATTEMPT
}

/// One try of a run whose routine has `retry`: the run stays one record
/// (its slot and attempt unchanged) and each try is kept beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunTry {
    /// The run.
    pub run_id: Uuid,
    /// 1 for the first try.
    pub number: u32,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended (for a timed-out try: once its cancellation was seen through).
    pub ended_at: DateTime<Utc>,
    /// How it ended: `ok`, `attention` or `failed`.
    pub status: RunStatus,
    /// What it found or why it failed ("timed out after 30s; cancelled").
    pub summary: Option<String>,
}
