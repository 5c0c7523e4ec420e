//! `/api/jobs`: the agent's background jobs: list, one, cancel. Without an
//! LLM provider there is no job scheduler, and these answer 503.

use axum::Json;
use axum::extract::{Path, State};
use cairn_agent::jobs::JobError;
use cairn_core::job::{CancelOutcome, JobRecord, JobState};
use cairn_store::JobFilter;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiQuery;
use crate::state::AppState;

/// Most jobs one answer holds.
const MAX_LIMIT: u32 = 500;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_jobs))
        .routes(routes!(get_job))
        .routes(routes!(cancel_job))
}

/// A job's state.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobStateView {
    /// Waiting for a slot.
    Pending,
    /// Running.
    InProgress,
    /// Finished with an answer.
    Completed,
    /// Ended without one.
    Failed,
    /// Running without activity for too long.
    Stuck,
    /// Stopped at someone's request.
    Cancelled,
}

impl From<JobState> for JobStateView {
    fn from(s: JobState) -> Self {
        match s {
            JobState::Pending => Self::Pending,
            JobState::InProgress => Self::InProgress,
            JobState::Completed => Self::Completed,
            JobState::Failed => Self::Failed,
            JobState::Stuck => Self::Stuck,
            JobState::Cancelled => Self::Cancelled,
        }
    }
}

impl From<JobStateView> for JobState {
    fn from(s: JobStateView) -> Self {
        match s {
            JobStateView::Pending => Self::Pending,
            JobStateView::InProgress => Self::InProgress,
            JobStateView::Completed => Self::Completed,
            JobStateView::Failed => Self::Failed,
            JobStateView::Stuck => Self::Stuck,
            JobStateView::Cancelled => Self::Cancelled,
        }
    }
}

/// A job.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    /// Its id.
    pub id: Uuid,
    /// Short title.
    pub title: String,
    /// The instructions.
    pub description: String,
    /// Where it came from (`chat`, `routine:NAME`, …).
    pub origin: Option<String>,
    /// The job it is a subtask of.
    pub parent_id: Option<Uuid>,
    /// Its state.
    pub state: JobStateView,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Started.
    pub started_at: Option<DateTime<Utc>>,
    /// Ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// Last sign of life.
    pub last_activity_at: Option<DateTime<Utc>>,
    /// The answer.
    pub result: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// Model rounds so far.
    pub iterations: u32,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Cost in micro-dollars.
    pub cost_micros: u64,
    /// Whether a cancel was requested.
    pub cancel_requested: bool,
}

impl From<JobRecord> for JobView {
    fn from(j: JobRecord) -> Self {
        Self {
            id: j.id,
            title: j.title,
            description: j.description,
            origin: j.origin,
            parent_id: j.parent_id,
            state: j.state.into(),
            created_at: j.created_at,
            started_at: j.started_at,
            completed_at: j.completed_at,
            last_activity_at: j.last_activity_at,
            result: j.result,
            error: j.error,
            iterations: j.iterations,
            input_tokens: j.input_tokens,
            output_tokens: j.output_tokens,
            cost_micros: j.cost_micros,
            cancel_requested: j.cancel_requested,
        }
    }
}

fn job_error(e: JobError) -> ApiError {
    match e {
        JobError::NotFound(id) => ApiError::not_found(format!("no job {id}")),
        JobError::Store(e) => e.into(),
        JobError::ShuttingDown => ApiError::unavailable(e.to_string()),
        JobError::Invalid(_) => ApiError::unprocessable(e.to_string()),
    }
}

fn job_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id).map_err(|_| ApiError::not_found(format!("no job {id}")))
}

/// Which jobs to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct JobsQuery {
    /// Only jobs in this state.
    pub state: Option<JobStateView>,
    /// At most this many, newest first (1 to 500; default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// Jobs, newest first.
#[utoipa::path(get, path = "/api/jobs", tag = "jobs", security(("bearer" = [])),
    params(JobsQuery),
    responses(
        (status = 200, description = "Newest first", body = [JobView]),
        (status = 400, description = "A bad filter", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 503, description = "No LLM provider, so no jobs", body = ErrorBody)))]
async fn list_jobs(
    _: Authed,
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<JobsQuery>,
) -> Result<Json<Vec<JobView>>, ApiError> {
    let jobs = state.jobs()?;
    let limit = match query.limit {
        None => JobFilter::default().limit,
        Some(n) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "`limit` must be from 1 to {MAX_LIMIT}"
            )));
        }
    };
    let filter = JobFilter {
        state: query.state.map(Into::into),
        limit,
        ..JobFilter::default()
    };
    let list = jobs.list(&filter).await.map_err(job_error)?;
    Ok(Json(list.into_iter().map(Into::into).collect()))
}

/// One job.
#[utoipa::path(get, path = "/api/jobs/{id}", tag = "jobs", security(("bearer" = [])),
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 503, description = "No LLM provider, so no jobs", body = ErrorBody)))]
async fn get_job(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<JobView>, ApiError> {
    let jobs = state.jobs()?;
    let uuid = job_id(&id)?;
    match jobs.get(uuid).await.map_err(job_error)? {
        Some(job) => Ok(Json(job.into())),
        None => Err(ApiError::not_found(format!("no job {id}"))),
    }
}

/// What a cancel did.
#[derive(Debug, Serialize, ToSchema)]
pub struct CancelView {
    /// `cancelled` (it had not started), `requested` (it is running and
    /// was asked to stop) or `already_ended`.
    pub outcome: String,
    /// The job's state now.
    pub state: JobStateView,
}

/// Cancels a job.
#[utoipa::path(post, path = "/api/jobs/{id}/cancel", tag = "jobs", security(("bearer" = [])),
    params(("id" = String, Path, description = "The job's id")),
    responses(
        (status = 200, description = "What the cancel did", body = CancelView),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such job", body = ErrorBody),
        (status = 503, description = "No LLM provider, so no jobs", body = ErrorBody)))]
async fn cancel_job(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<CancelView>, ApiError> {
    let jobs = state.jobs()?;
    let uuid = job_id(&id)?;
    let outcome = jobs.cancel(uuid).await.map_err(job_error)?;
    let now = jobs
        .get(uuid)
        .await
        .map_err(job_error)?
        .ok_or_else(|| ApiError::not_found(format!("no job {id}")))?;
    let outcome = match outcome {
        CancelOutcome::Cancelled => "cancelled",
        CancelOutcome::Requested => "requested",
        CancelOutcome::AlreadyEnded(_) => "already_ended",
    };
    Ok(Json(CancelView {
        outcome: outcome.to_string(),
        state: now.state.into(),
    }))
}
