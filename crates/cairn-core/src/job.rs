//! Full agent jobs as plain data: what a job was asked to do, where it
//! stands, what it produced and what it cost.
//!
//! The scheduler that runs jobs lives in `cairn-agent`; the store keeps
//! these records. Nothing here reads a clock: callers pass ids and instants.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Model calls a job may make when its spec does not say.
pub const DEFAULT_MAX_ITERATIONS: u32 = 50;

/// Wall-clock limit of a job when its spec does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for a free slot.
    Pending,
    /// Running, held by a live process's lease.
    InProgress,
    /// Finished with an answer.
    Completed,
    /// Ended without an answer (error, timeout, limit, interrupted); `error` says why.
    Failed,
    /// Still running but without any activity for too long.
    Stuck,
    /// Stopped at someone's request.
    Cancelled,
}

impl JobState {
    /// Every state, for listings and parsing.
    pub const ALL: [JobState; 6] = [
        JobState::Pending,
        JobState::InProgress,
        JobState::Completed,
        JobState::Failed,
        JobState::Stuck,
        JobState::Cancelled,
    ];

    /// The snake-case name used in the store, the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::InProgress => "in_progress",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Stuck => "stuck",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Whether the job is over (completed, failed or cancelled).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
    }

    /// Whether a process holds the job (pending in its queue, running or stuck).
    pub fn is_active(self) -> bool {
        !self.is_terminal()
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of the six.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown job state \"{0}\"; expected pending, in_progress, completed, failed, stuck or cancelled"
)]
pub struct UnknownJobState(pub String);

impl FromStr for JobState {
    type Err = UnknownJobState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().replace('-', "_").to_ascii_lowercase();
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == wanted)
            .ok_or_else(|| UnknownJobState(s.to_string()))
    }
}

/// One full job and everything known about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Unique id (a time-ordered UUID v7).
    pub id: Uuid,
    /// Short title for listings.
    pub title: String,
    /// What the job should achieve: the agent's instructions.
    pub description: String,
    /// The user the job works for.
    pub owner: String,
    /// Where it came from: a session or thread id, a routine id, `api`, … (free text).
    pub origin: Option<String>,
    /// The job this one is a subtask of.
    pub parent_id: Option<Uuid>,
    /// Where it stands.
    pub state: JobState,
    /// When it was submitted.
    pub created_at: DateTime<Utc>,
    /// When it began running.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// The last sign of progress (a model call, a tool starting or ending).
    pub last_activity_at: Option<DateTime<Utc>>,
    /// The final answer, for completed jobs.
    pub result: Option<String>,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// Model calls made by the agent loop.
    pub iterations: u32,
    /// Input tokens of every model call (planning included).
    pub input_tokens: u64,
    /// Output tokens of every model call (planning included).
    pub output_tokens: u64,
    /// Cost of every model call, in micro-dollars.
    pub cost_micros: u64,
    /// Model calls allowed before the job fails.
    pub max_iterations: u32,
    /// Wall-clock limit, after which the job fails.
    #[serde(with = "crate::duration::serde_compact")]
    pub timeout: Duration,
    /// Whether one model call first writes a plan that precedes the instructions.
    pub use_planning: bool,
    /// Someone (possibly another process) asked for the job to stop.
    pub cancel_requested: bool,
    /// Id of the process holding the job while it is active.
    pub lease_owner: Option<String>,
    /// The holder must renew before this instant, or the job is an orphan.
    pub lease_until: Option<DateTime<Utc>>,
    /// Times self-repair restarted it after it stopped making progress.
    #[serde(default)]
    pub repair_attempts: u32,
    /// Self-repair gave up on it: a person should look (it is `failed`).
    #[serde(default)]
    pub needs_attention: bool,
}

/// The short form of a job id people are shown (`/job`, `/cancel`): its
/// last 8 hex digits, since v7 ids share their time-ordered first ones.
/// Wherever an id is asked for, this is accepted back, as is any start of
/// the id (see `Store::job_ids_like`).
pub fn short_id(id: Uuid) -> String {
    let text = id.simple().to_string();
    text[text.len() - 8..].to_string()
}

/// What a person typed for a job id, as the hex digits to look for: at
/// least 4 hex digits (hyphens dropped, lower-cased), else why not.
pub fn id_digits(text: &str) -> Result<String, String> {
    let digits: String = text.trim().chars().filter(|c| *c != '-').collect();
    if digits.len() < 4 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "not a job id: \"{}\"; give the id as shown (at least 4 of its hex digits: its start, or the short form /job prints)",
            text.trim()
        ));
    }
    Ok(digits.to_ascii_lowercase())
}

impl JobRecord {
    /// A pending job with default limits and no history.
    pub fn new(
        id: Uuid,
        title: impl Into<String>,
        description: impl Into<String>,
        owner: impl Into<String>,
        created_at: DateTime<Utc>,
    ) -> Self {
        Self {
            id,
            title: title.into(),
            description: description.into(),
            owner: owner.into(),
            origin: None,
            parent_id: None,
            state: JobState::Pending,
            created_at,
            started_at: None,
            completed_at: None,
            last_activity_at: None,
            result: None,
            error: None,
            iterations: 0,
            input_tokens: 0,
            output_tokens: 0,
            cost_micros: 0,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            timeout: DEFAULT_TIMEOUT,
            use_planning: false,
            cancel_requested: false,
            lease_owner: None,
            lease_until: None,
            repair_attempts: 0,
            needs_attention: false,
        }
    }

    /// Records how the job ended and releases its lease: what every job
    /// store writes on `finish_job`, and what the worker shows afterwards.
    pub fn apply_outcome(&mut self, outcome: &JobOutcome) {
        self.state = outcome.state;
        self.result.clone_from(&outcome.result);
        self.error.clone_from(&outcome.error);
        self.iterations = outcome.iterations;
        self.input_tokens = outcome.input_tokens;
        self.output_tokens = outcome.output_tokens;
        self.cost_micros = outcome.cost_micros;
        self.completed_at = Some(outcome.completed_at);
        self.lease_owner = None;
        self.lease_until = None;
    }
}

/// How a job ended, as written back by the process that ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    /// Completed, failed or cancelled.
    pub state: JobState,
    /// The answer (completed jobs; failed ones may keep partial text).
    pub result: Option<String>,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// Model calls made by the agent loop.
    pub iterations: u32,
    /// Input tokens spent.
    pub input_tokens: u64,
    /// Output tokens spent.
    pub output_tokens: u64,
    /// Cost in micro-dollars.
    pub cost_micros: u64,
    /// When it ended.
    pub completed_at: DateTime<Utc>,
}

impl JobOutcome {
    /// Checks that this outcome ends a job (completed, failed or cancelled),
    /// as every job store must before recording it for job `id`.
    pub fn ensure_terminal(&self, id: Uuid) -> Result<(), NonTerminalOutcome> {
        if self.state.is_terminal() {
            Ok(())
        } else {
            Err(NonTerminalOutcome {
                id,
                state: self.state,
            })
        }
    }
}

/// An outcome whose state does not end a job (pending, in progress, stuck).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("job {id} cannot finish as {state}: expected completed, failed or cancelled")]
pub struct NonTerminalOutcome {
    /// The job it was meant for.
    pub id: Uuid,
    /// The state it named.
    pub state: JobState,
}

/// What a cancellation request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelOutcome {
    /// The job had not started; it is cancelled now.
    Cancelled,
    /// The job is running; its process was asked to stop it.
    Requested,
    /// The job had already ended in this state; nothing changed.
    AlreadyEnded(JobState),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_id_is_its_hex_digits_and_too_little_is_refused() {
        assert_eq!(id_digits(" 0193A1B2-c3d4 ").unwrap(), "0193a1b2c3d4");
        let id = Uuid::now_v7();
        assert_eq!(short_id(id), id.simple().to_string()[24..]);
        assert!(id_digits("abc").unwrap_err().contains("\"abc\""));
        assert!(id_digits("not-an-id").is_err());
    }

    #[test]
    fn states_round_trip_and_classify() {
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse::<JobState>(), Ok(state));
            assert_eq!(state.is_terminal(), !state.is_active());
        }
        assert_eq!("in-progress".parse::<JobState>(), Ok(JobState::InProgress));
        assert_eq!("Stuck".parse::<JobState>(), Ok(JobState::Stuck));
        let err = "running".parse::<JobState>().unwrap_err().to_string();
        assert!(
            err.contains("\"running\"") && err.contains("in_progress"),
            "{err}"
        );
        assert!(JobState::Cancelled.is_terminal() && !JobState::Stuck.is_terminal());
    }

    #[test]
    fn record_serializes_state_and_timeout_compactly() {
        let at = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let job = JobRecord::new(Uuid::nil(), "t", "d", "ada", at);
        let json = serde_json::to_value(&job).unwrap();
        assert_eq!(json["state"], "pending");
        assert_eq!(json["timeout"], "1800s");
        let back: JobRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, job);
    }
}
