//! `/api/watchers`: the person's watchers (routines that call a tool on an
//! interval and escalate only what matters; see
//! [`cairn_automation::primitives::watch`]): create, list, one with its
//! history, delete, pause, resume. Creating one asks the policy the way
//! `watch_start` does: a tool that would need approval, or is denied, is a
//! 422 (`not_watchable`). Without an agent (no LLM configured) there is no
//! tool runner to ask, so creating is a 503; the rest still works.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use cairn_automation::primitives::watch::{HistoryEntry, WatchError, WatchRequest, WatcherView};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_watchers, create_watcher))
        .routes(routes!(get_watcher, delete_watcher))
        .routes(routes!(pause_watcher))
        .routes(routes!(resume_watcher))
}

/// A new watcher (the arguments of `watch_start`).
#[derive(Debug, Deserialize, ToSchema)]
pub struct NewWatcher {
    /// The tool to call at each check.
    pub name: String,
    /// Its arguments.
    #[schema(value_type = Option<Object>)]
    pub params: Option<Value>,
    /// Seconds between checks, 5 to 3600 (default 30).
    #[schema(minimum = 5, maximum = 3600)]
    pub interval: Option<f64>,
    /// What it is for.
    pub label: Option<String>,
    /// `on_change` (default), `on_error`, `on_threshold`, `summary` or `always`.
    pub notify_when: Option<String>,
    /// `expression` for on_threshold, `batch_size` for summary.
    #[schema(value_type = Option<Object>)]
    pub notify_config: Option<Value>,
    /// Where escalations go (the person's default channel when absent).
    pub output_channel: Option<String>,
}

/// A watcher.
#[derive(Debug, Serialize, ToSchema)]
pub struct Watcher {
    /// Its id (12 hex digits).
    pub watcher_id: String,
    /// The watched tool.
    pub tool_name: String,
    /// The tool's arguments.
    #[schema(value_type = Object)]
    pub params: Value,
    /// What it is for.
    pub label: String,
    /// `running` or `paused`.
    pub status: String,
    /// Seconds between checks.
    pub interval: u64,
    /// The strategy.
    pub notify_when: String,
    /// The strategy's settings.
    #[schema(value_type = Object)]
    pub notify_config: Value,
    /// Where escalations go.
    pub output_channel: Option<String>,
    /// Checks so far.
    pub check_count: u64,
    /// Notifications so far.
    pub notification_count: u64,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it last checked.
    pub last_check_at: Option<DateTime<Utc>>,
    /// When it checks next (none while paused).
    pub next_check_at: Option<DateTime<Utc>>,
    /// The routine behind it.
    pub routine: String,
}

impl From<WatcherView> for Watcher {
    fn from(w: WatcherView) -> Self {
        Self {
            watcher_id: w.watcher_id,
            tool_name: w.tool_name,
            params: w.params,
            label: w.label,
            status: w.status,
            interval: w.interval,
            notify_when: w.notify_when,
            notify_config: w.notify_config,
            output_channel: w.output_channel,
            check_count: w.check_count,
            notification_count: w.notification_count,
            created_at: w.created_at,
            last_check_at: w.last_check_at,
            next_check_at: w.next_check_at,
            routine: w.routine,
        }
    }
}

/// One check.
#[derive(Debug, Serialize, ToSchema)]
pub struct Check {
    /// The check's number.
    pub check: u64,
    /// When it ran.
    pub at: DateTime<Utc>,
    /// `ok` or `error`.
    pub status: String,
    /// Whether it was escalated.
    pub notified: bool,
    /// The result or the error (capped).
    pub result: String,
}

impl From<HistoryEntry> for Check {
    fn from(e: HistoryEntry) -> Self {
        Self {
            check: e.check,
            at: e.at,
            status: e.status,
            notified: e.notified,
            result: e.result,
        }
    }
}

/// A watcher with its history.
#[derive(Debug, Serialize, ToSchema)]
pub struct WatcherDetail {
    /// The watcher.
    #[serde(flatten)]
    pub watcher: Watcher,
    /// Its kept checks (up to 100), oldest first.
    pub history: Vec<Check>,
}

fn api_error(e: WatchError) -> ApiError {
    match e {
        WatchError::Invalid(m) => ApiError::unprocessable(m),
        WatchError::Refused(m) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "not_watchable", m)
        }
        WatchError::NotFound(_) => ApiError::not_found(e.to_string()),
        WatchError::Unavailable(m) => ApiError::unavailable(m),
        WatchError::Store(s) => ApiError::from(s),
    }
}

/// Every watcher, running ones first.
#[utoipa::path(get, path = "/api/watchers", tag = "watchers", security(("bearer" = [])),
    responses(
        (status = 200, description = "Running first, then paused", body = [Watcher]),
        (status = 401, description = "No valid token", body = ErrorBody)))]
async fn list_watchers(
    _: Authed,
    State(state): State<AppState>,
) -> Result<Json<Vec<Watcher>>, ApiError> {
    let all = state.watchers().list().await.map_err(api_error)?;
    Ok(Json(all.into_iter().map(Watcher::from).collect()))
}

/// Starts a watcher.
#[utoipa::path(post, path = "/api/watchers", tag = "watchers", security(("bearer" = [])),
    request_body = NewWatcher,
    responses(
        (status = 201, description = "Started", body = Watcher),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 422, description = "Invalid, or the tool cannot run unattended (`not_watchable`)", body = ErrorBody),
        (status = 503, description = "No agent here, so no tool runner to ask", body = ErrorBody)))]
async fn create_watcher(
    _: Authed,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Watcher>), ApiError> {
    if !body.is_object() {
        return Err(ApiError::unprocessable(
            "the body must be an object: {name, params, interval, label, notify_when, notify_config, output_channel}",
        ));
    }
    let request = WatchRequest::from_args(&body).map_err(api_error)?;
    let watcher = state
        .watchers()
        .start(request, None)
        .await
        .map_err(api_error)?;
    if let Ok(engine) = state.engine() {
        engine.poke();
    }
    Ok((StatusCode::CREATED, Json(watcher.into())))
}

/// One watcher with its history.
#[utoipa::path(get, path = "/api/watchers/{id}", tag = "watchers", security(("bearer" = [])),
    params(("id" = String, Path, description = "The watcher's id")),
    responses(
        (status = 200, description = "The watcher and its kept checks", body = WatcherDetail),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such watcher", body = ErrorBody)))]
async fn get_watcher(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<WatcherDetail>, ApiError> {
    let watchers = state.watchers();
    let watcher = watchers.get(&id).await.map_err(api_error)?;
    let history = watchers
        .history(&id, cairn_automation::primitives::watch::HISTORY)
        .await
        .map_err(api_error)?;
    Ok(Json(WatcherDetail {
        watcher: watcher.into(),
        history: history.into_iter().map(Check::from).collect(),
    }))
}

/// Stops a watcher for good, with its history.
#[utoipa::path(delete, path = "/api/watchers/{id}", tag = "watchers", security(("bearer" = [])),
    params(("id" = String, Path, description = "The watcher's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such watcher", body = ErrorBody)))]
async fn delete_watcher(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.watchers().stop(&id).await.map_err(api_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Pauses a watcher: checks are skipped, counts and history kept.
#[utoipa::path(post, path = "/api/watchers/{id}/pause", tag = "watchers", security(("bearer" = [])),
    params(("id" = String, Path, description = "The watcher's id")),
    responses(
        (status = 200, description = "Paused", body = Watcher),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such watcher", body = ErrorBody)))]
async fn pause_watcher(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Watcher>, ApiError> {
    let watcher = state.watchers().pause(&id).await.map_err(api_error)?;
    Ok(Json(watcher.into()))
}

/// Resumes a paused watcher; its next check is one interval away.
#[utoipa::path(post, path = "/api/watchers/{id}/resume", tag = "watchers", security(("bearer" = [])),
    params(("id" = String, Path, description = "The watcher's id")),
    responses(
        (status = 200, description = "Running", body = Watcher),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such watcher", body = ErrorBody)))]
async fn resume_watcher(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Watcher>, ApiError> {
    let watcher = state.watchers().resume(&id).await.map_err(api_error)?;
    if let Ok(engine) = state.engine() {
        engine.poke();
    }
    Ok(Json(watcher.into()))
}
