//! `/api/background`: the agent's background tasks (`background_run`),
//! from every conversation: list, one with its full result, cancel. A task
//! can only be cancelled by the process running it; one running in another
//! process (a `cairn chat`, say) is a 409 saying so.

use axum::Json;
use axum::extract::{Path, State};
use cairn_store::{BackgroundTask, TaskStatus};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiQuery;
use crate::state::AppState;

/// Most tasks one answer holds.
const MAX_LIMIT: u32 = 500;
/// Tasks listed when no limit is given.
const DEFAULT_LIMIT: u32 = 50;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_tasks))
        .routes(routes!(get_task))
        .routes(routes!(cancel_task))
}

/// A task, as listed.
#[derive(Debug, Serialize, ToSchema)]
pub struct TaskView {
    /// `bg-` and 8 hex digits.
    pub task_id: String,
    /// The tool it runs.
    pub tool_name: String,
    /// `running`, `completed`, `failed` or `cancelled`.
    pub status: String,
    /// The conversation (session) that launched it.
    pub session_id: String,
    /// Its thread, when known.
    pub thread_id: Option<String>,
    /// When it was launched.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it failed (`interrupted` when its process stopped).
    pub error: Option<String>,
    /// Whether its completion notice reached the conversation.
    pub delivered: bool,
}

/// A task with its arguments and full result.
#[derive(Debug, Serialize, ToSchema)]
pub struct TaskDetail {
    /// The task.
    #[serde(flatten)]
    pub task: TaskView,
    /// The tool's arguments.
    pub params: serde_json::Value,
    /// The full result, once it ended.
    pub result: Option<serde_json::Value>,
}

impl From<&BackgroundTask> for TaskView {
    fn from(t: &BackgroundTask) -> Self {
        Self {
            task_id: t.id.clone(),
            tool_name: t.tool.clone(),
            status: t.status.as_str().to_string(),
            session_id: t.session_id.clone(),
            thread_id: t.thread_id.clone(),
            started_at: t.started_at,
            finished_at: t.finished_at,
            error: t.error.clone(),
            delivered: t.delivered_at.is_some(),
        }
    }
}

/// How many tasks to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TasksQuery {
    /// At most this many, newest first (1 to 500; default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
}

/// Background tasks of every conversation, newest first.
#[utoipa::path(get, path = "/api/background", tag = "background", security(("bearer" = [])),
    params(TasksQuery),
    responses(
        (status = 200, description = "Newest first", body = [TaskView]),
        (status = 400, description = "A bad limit", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody)))]
async fn list_tasks(
    _: Authed,
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<TasksQuery>,
) -> Result<Json<Vec<TaskView>>, ApiError> {
    let limit = match query.limit {
        None => DEFAULT_LIMIT,
        Some(n) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "`limit` must be from 1 to {MAX_LIMIT}"
            )));
        }
    };
    let tasks = state.store().recent_background_tasks(limit).await?;
    Ok(Json(tasks.iter().map(TaskView::from).collect()))
}

async fn find(state: &AppState, id: &str) -> Result<BackgroundTask, ApiError> {
    state
        .store()
        .get_background_task(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no background task {id}")))
}

/// One task, with its arguments and full result.
#[utoipa::path(get, path = "/api/background/{id}", tag = "background", security(("bearer" = [])),
    params(("id" = String, Path, description = "The task's id (bg-…)")),
    responses(
        (status = 200, description = "The task", body = TaskDetail),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody)))]
async fn get_task(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskDetail>, ApiError> {
    let task = find(&state, &id).await?;
    Ok(Json(TaskDetail {
        task: TaskView::from(&task),
        params: task.params.clone(),
        result: task.result.clone(),
    }))
}

/// Cancels a running task of this daemon.
#[utoipa::path(post, path = "/api/background/{id}/cancel", tag = "background", security(("bearer" = [])),
    params(("id" = String, Path, description = "The task's id (bg-…)")),
    responses(
        (status = 200, description = "Cancelled", body = TaskView),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such task", body = ErrorBody),
        (status = 409, description = "Already ended, or running in another process", body = ErrorBody),
        (status = 503, description = "This gateway runs no background tasks", body = ErrorBody)))]
async fn cancel_task(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<TaskView>, ApiError> {
    let task = find(&state, &id).await?;
    if task.status != TaskStatus::Running {
        return Err(ApiError::conflict(format!(
            "background task {id} already ended ({})",
            task.status.as_str()
        )));
    }
    if !state.background()?.cancel(&id).await? {
        return Err(ApiError::conflict(format!(
            "background task {id} runs in another cairn process ({}); cancel it there",
            task.owner
        )));
    }
    let task = find(&state, &id).await?;
    Ok(Json(TaskView::from(&task)))
}
