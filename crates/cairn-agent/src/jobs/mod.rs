//! Full jobs: agent loops that run in the background under a scheduler.
//!
//! A job comes from `/job <description>` in chat, a routine's `full_job`
//! action or the API. The [`JobScheduler`] persists it (`pending`), runs at
//! most `max_parallel_jobs` at once (the rest wait, first in first out),
//! runs each through the one [`AgentLoop`](crate::AgentLoop) under a time
//! limit and a cancellation token, and records how it ended with its usage
//! and cost. Jobs cannot ask anyone for approval: "ask" is answered by the
//! approver given at construction ([`DenyAll`](crate::runner::DenyAll) by
//! default), so the policy gate still decides every call.
//!
//! Every active job carries a lease held by its process. The scheduler
//! renews its leases; on start and periodically it fails jobs whose lease
//! lapsed ("interrupted: the process running it stopped"). They become
//! `failed`, not `stuck`: nothing is left to resume them, re-running them
//! could repeat side effects their tools already had, and `stuck` is kept for
//! jobs that still have a worker but show no progress
//! ([`JobScheduler::detect_stuck`]).
//!
//! Self-repair ([`JobScheduler::repair_stuck`]) restarts a job that still
//! has a worker but made no progress for `stuck_after`, from its
//! instructions, up to `max_repair_attempts` times; then the job ends
//! `failed` with `needs_attention` and one notification. A job held by
//! another process is restarted (or stopped) by that process, asked through
//! the store.
//!
//! Cancellation from another process (`cairn job cancel`) sets a flag in the
//! store and publishes it on the store's change signal; the scheduler checks
//! its running jobs' flags when it hears it. In-process
//! [`JobScheduler::cancel`] is immediate.
//!
//! Sub-agents (`agent_delegate`, `job_subtasks`: [`crate::delegation`]) are
//! recorded here too, as children ([`JobScheduler::run_child`]): held like
//! jobs while they run, outside the slots, in their parent's task.

mod child;
mod scheduler;
mod upkeep;
mod worker;

use std::time::Duration;

use cairn_core::config::AgentConfig;
use cairn_core::job::{DEFAULT_MAX_ITERATIONS, DEFAULT_TIMEOUT};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::agent_loop::LoopConfig;

pub use cairn_core::job::{CancelOutcome, JobOutcome, JobRecord, JobState};
pub use cairn_store::JobFilter;
pub use child::{ChildEnd, ChildTurn};
pub use scheduler::{JobHandle, JobScheduler, JobSchedulerBuilder};
pub use upkeep::{RepairReport, RepairedJob};

/// A tool call of a job that did not run because the policy denied it or
/// nobody could approve it; see [`JobHandle::refused_tools`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedTool {
    /// The canonical tool name.
    pub tool: String,
    /// [`ToolStatus::Declined`](crate::runner::ToolStatus::Declined) or
    /// [`ToolStatus::Denied`](crate::runner::ToolStatus::Denied).
    pub status: crate::runner::ToolStatus,
}

/// The session id a job's tool calls run under: `job:<id>`.
pub fn job_session_id(id: Uuid) -> String {
    format!("job:{id}")
}

/// The job a tool call belongs to, read from its context's session id.
pub fn job_id_from_session(session_id: &str) -> Option<Uuid> {
    session_id
        .strip_prefix("job:")
        .and_then(|id| Uuid::parse_str(id).ok())
}

/// Scheduler limits and timings.
#[derive(Debug, Clone, PartialEq)]
pub struct JobsConfig {
    /// Jobs running at once (`agent.max_parallel_jobs`, `MAX_PARALLEL_JOBS`).
    pub max_parallel_jobs: usize,
    /// Model calls per job when its spec does not say.
    pub default_max_iterations: u32,
    /// Wall-clock limit per job when its spec does not say.
    pub default_timeout: Duration,
    /// How long a lease lasts; it is renewed every third of this.
    pub lease: Duration,
    /// A running job without activity for this long is stuck (and
    /// [`JobScheduler::repair_stuck`] restarts it).
    pub stuck_after: Duration,
    /// Restarts of one stuck job before self-repair gives up on it.
    pub max_repair_attempts: u32,
    /// The system prompt jobs start from (a note about working unattended is appended).
    pub system_prompt: String,
    /// Model settings of each job's loop (its `max_iterations` comes from the job).
    pub loop_config: LoopConfig,
    /// This process's id as a lease holder; unique per process.
    pub lease_owner: String,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            max_parallel_jobs: 5,
            default_max_iterations: DEFAULT_MAX_ITERATIONS,
            default_timeout: DEFAULT_TIMEOUT,
            lease: Duration::from_secs(90),
            stuck_after: Duration::from_secs(10 * 60),
            max_repair_attempts: 3,
            system_prompt: "You are cairn, a personal AI agent.".to_string(),
            loop_config: LoopConfig::default(),
            lease_owner: format!("pid{}-{}", std::process::id(), Uuid::new_v4().simple()),
        }
    }
}

impl JobsConfig {
    /// Defaults with the limits of the `[agent]` configuration.
    pub fn from_agent(agent: &AgentConfig) -> Self {
        Self {
            max_parallel_jobs: usize::try_from(agent.max_parallel_jobs)
                .unwrap_or(usize::MAX)
                .max(1),
            default_max_iterations: agent.max_iterations.max(1),
            ..Self::default()
        }
    }
}

/// What to run: the description is the agent's instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// Short title for listings.
    pub title: String,
    /// What the job should achieve.
    pub description: String,
    /// The user the job works for.
    pub owner: String,
    /// Where it came from (session or thread id, routine id, `api`).
    pub origin: Option<String>,
    /// Ask the model for a short plan first.
    pub use_planning: bool,
    /// Model calls allowed (default: [`JobsConfig::default_max_iterations`]).
    pub max_iterations: Option<u32>,
    /// Wall-clock limit (default: [`JobsConfig::default_timeout`]).
    pub timeout: Option<Duration>,
    /// Answers the policy's "ask" for this job instead of the scheduler's
    /// approver: these tools are approved, every other one is declined (a
    /// routine's `allowed_tools`). `None`: the scheduler's approver answers.
    /// Policy denials stand either way. Kept in memory only: a job is never
    /// resumed after a restart (orphans are failed), so it needs no column.
    /// A job's sub-agents (its subtasks) ask the job's approver, so this list
    /// answers for them too.
    pub allowed_tools: Option<Vec<String>>,
}

/// Longest title derived from a description, in characters.
const TITLE_CHARS: usize = 60;

impl JobSpec {
    /// A job with default limits.
    pub fn new(
        title: impl Into<String>,
        description: impl Into<String>,
        owner: impl Into<String>,
    ) -> Self {
        Self {
            title: title.into(),
            description: description.into(),
            owner: owner.into(),
            origin: None,
            use_planning: false,
            max_iterations: None,
            timeout: None,
            allowed_tools: None,
        }
    }

    /// A job titled after the first line of its description (for `/job <description>`).
    pub fn from_description(description: impl Into<String>, owner: impl Into<String>) -> Self {
        let description = description.into();
        let first = description.trim().lines().next().unwrap_or_default().trim();
        let mut title: String = first.chars().take(TITLE_CHARS).collect();
        if first.chars().count() > TITLE_CHARS {
            title.push('…');
        }
        Self::new(title, description, owner)
    }

    /// Sets where the job came from.
    #[must_use]
    pub fn with_origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }

    /// Asks for a plan before the work.
    #[must_use]
    pub fn with_planning(mut self, on: bool) -> Self {
        self.use_planning = on;
        self
    }

    /// Sets the model-call limit.
    #[must_use]
    pub fn with_max_iterations(mut self, n: u32) -> Self {
        self.max_iterations = Some(n);
        self
    }

    /// Sets the wall-clock limit.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Approves exactly these tools when the policy asks, declining the rest
    /// (see [`JobSpec::allowed_tools`]).
    #[must_use]
    pub fn with_allowed_tools<S: Into<String>>(
        mut self,
        tools: impl IntoIterator<Item = S>,
    ) -> Self {
        self.allowed_tools = Some(tools.into_iter().map(Into::into).collect());
        self
    }

    fn validate(&self) -> Result<(), JobError> {
        if self.description.trim().is_empty() {
            return Err(JobError::Invalid("description: must not be empty".into()));
        }
        if self.title.trim().is_empty() {
            return Err(JobError::Invalid("title: must not be empty".into()));
        }
        if self.max_iterations == Some(0) {
            return Err(JobError::Invalid(
                "max_iterations: must be at least 1".into(),
            ));
        }
        if self.timeout == Some(Duration::ZERO) {
            return Err(JobError::Invalid("timeout: must be longer than 0s".into()));
        }
        Ok(())
    }
}

/// A sign of progress of a running job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobProgress {
    /// The job.
    pub job_id: Uuid,
    /// Model calls so far.
    pub iterations: u32,
    /// What just happened (`model call 2`, `running shell`, …).
    pub step: String,
}

/// A running job that has shown no activity for too long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckJob {
    /// The job.
    pub job_id: Uuid,
    /// Its last sign of progress.
    pub last_activity: DateTime<Utc>,
    /// How long it has been quiet.
    pub stuck_for: Duration,
}

/// Why a scheduler call failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The job store failed.
    #[error("job store: {0}")]
    Store(#[from] cairn_store::StoreError),
    /// No job has this id.
    #[error("job {0} not found")]
    NotFound(Uuid),
    /// The spec is unusable; the message names the field.
    #[error("invalid job spec: {0}")]
    Invalid(String),
    /// The scheduler is stopping and takes no new jobs.
    #[error("the job scheduler is shutting down")]
    ShuttingDown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_come_from_the_first_line() {
        let spec = JobSpec::from_description("  Summarise my inbox\nthen draft replies", "ada");
        assert_eq!(spec.title, "Summarise my inbox");
        let long = "x".repeat(80);
        let spec = JobSpec::from_description(long.clone(), "ada");
        assert_eq!(spec.title.chars().count(), TITLE_CHARS + 1);
        assert!(spec.title.ends_with('…'));
        assert_eq!(spec.description, long);
    }

    #[test]
    fn specs_are_validated_by_field() {
        let bad = JobSpec::new("t", "  ", "ada").validate().unwrap_err();
        assert!(bad.to_string().contains("description"), "{bad}");
        let bad = JobSpec::new("t", "d", "ada")
            .with_max_iterations(0)
            .validate()
            .unwrap_err();
        assert!(bad.to_string().contains("max_iterations"), "{bad}");
        assert!(JobSpec::new("t", "d", "ada").validate().is_ok());
    }

    #[test]
    fn session_ids_carry_the_job_id() {
        let id = Uuid::now_v7();
        assert_eq!(job_id_from_session(&job_session_id(id)), Some(id));
        assert_eq!(job_id_from_session("session-1"), None);
    }

    #[test]
    fn config_takes_the_agent_limits() {
        let agent = AgentConfig {
            name: "cairn".into(),
            max_iterations: 7,
            max_parallel_jobs: 2,
            max_delegation_depth: 2,
            max_parallel_delegations: 4,
            undo_depth: 20,
            session_idle: std::time::Duration::from_secs(3600),
            approval_timeout: std::time::Duration::from_secs(120),
            approval_channel: None,
        };
        let config = JobsConfig::from_agent(&agent);
        assert_eq!(config.max_parallel_jobs, 2);
        assert_eq!(config.default_max_iterations, 7);
        assert_ne!(config.lease_owner, JobsConfig::default().lease_owner);
    }
}
