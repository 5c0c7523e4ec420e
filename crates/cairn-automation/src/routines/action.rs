//! The seam between the engine and what a routine does: the engine decides
//! when a routine runs and records the run; an [`ActionExecutor`] does the
//! work and says how it went.

use std::sync::Arc;

use async_trait::async_trait;
use cairn_core::routine::{Routine, RunStatus};
use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// What fired a run, handed to its action as context.
#[derive(Debug, Clone, PartialEq)]
pub struct FireContext {
    /// `cron`, `once`, `event`, `system_event`, `webhook` or `manual`.
    pub trigger_type: String,
    /// One line about the fire (the slot, the matched message, the event name).
    pub detail: Option<String>,
    /// The payload: the chat message, the webhook body, the system event's
    /// fields, or what `routine fire --payload` passed.
    pub payload: Option<serde_json::Value>,
    /// The slot, for scheduled fires.
    pub scheduled_for: Option<DateTime<Utc>>,
}

/// One run for an executor to carry out.
#[derive(Debug, Clone)]
pub struct ActionRequest {
    /// The routine as it was when the run was admitted (shared: each try's
    /// request is the run's routine, not a copy of it).
    pub routine: Arc<Routine>,
    /// The run's id (already recorded as `running`).
    pub run_id: Uuid,
    /// Why it runs.
    pub fire: FireContext,
    /// Cancelled when the run times out or the daemon shuts down.
    pub cancel: CancellationToken,
}

/// A message the run asks to deliver whatever the routine's notify settings
/// say (the `notification` action's reminder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The title (the routine's name when absent).
    pub title: Option<String>,
    /// The text.
    pub body: String,
}

/// How a run's action went.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionOutcome {
    /// `Ok`, `Attention` or `Failed`.
    pub status: RunStatus,
    /// What it found or why it failed; the notification's text.
    pub summary: Option<String>,
    /// Tokens the LLM calls used.
    pub tokens_used: Option<u64>,
    /// The job a `full_job` action ran.
    pub job_id: Option<Uuid>,
    /// The routine's new JSON state, when the run replaced it.
    pub state: Option<serde_json::Value>,
    /// A message to deliver regardless of the notify settings.
    pub notice: Option<Notice>,
}

impl ActionOutcome {
    /// An outcome with this status and summary and nothing else.
    pub fn new(status: RunStatus, summary: impl Into<String>) -> Self {
        Self {
            status,
            summary: Some(summary.into()),
            tokens_used: None,
            job_id: None,
            state: None,
            notice: None,
        }
    }

    /// A failed run, with the reason.
    pub fn failed(reason: impl Into<String>) -> Self {
        Self::new(RunStatus::Failed, reason)
    }
}

/// Carries out routine actions.
#[async_trait]
pub trait ActionExecutor: Send + Sync {
    /// Runs the request's action to its end (or until `cancel`), never panicking.
    async fn execute(&self, request: ActionRequest) -> ActionOutcome;
}
