//! `/api/routines`: list, create, read, replace, delete, fire and the runs
//! of the person's routines.
//!
//! A routine is addressed by `{id}`: its UUID, or else its name (names are
//! unique per person, and what people and files use; the UUID is stable
//! across renames). A UUID-shaped key that is no routine's id is tried as a
//! name, so a routine whose name looks like a UUID is still reachable.
//!
//! Bodies are routine specs in the same JSON shape as routine files,
//! written through the routine service
//! ([`cairn_automation::routines::service`]) exactly as `cairn routine
//! apply` and the agent's routine tools write them; an invalid spec
//! is a 422 whose `error.details.problems` lists every problem with its
//! field path.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use cairn_automation::routines::define::{Problem, zone_of};
use cairn_automation::routines::engine::FireError;
use cairn_automation::routines::service::ServiceError;
use cairn_core::routine::{Routine, RoutineRun, RoutineSpec, Trigger};
use cairn_store::Admitted;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::routine_ops::{PauseView, api_error, me};
use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiBytes, ApiJson, ApiQuery};
use crate::state::{AppState, Gateway};

/// Most runs one `/runs` answer holds.
const MAX_RUNS: u32 = 100;
/// Runs `/runs` answers when `limit` is absent.
const DEFAULT_RUNS: u32 = 10;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_routines, create_routine))
        .routes(routes!(get_routine, replace_routine, delete_routine))
        .routes(routes!(fire_routine))
        .routes(routes!(routine_runs))
}

/// A routine as the API shows it: identity, the spec as written, and what
/// the engine keeps about it.
#[derive(Debug, Serialize, ToSchema)]
pub struct RoutineView {
    /// Stable id.
    pub id: Uuid,
    /// Unique name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Whether it may fire.
    pub enabled: bool,
    /// The trigger in a few words (`cron 0 9 * * *`, `event /deploy/`, `webhook`).
    pub trigger: String,
    /// A cron or once trigger's schedule in words (`at 09:00 on weekdays (Europe/Paris)`).
    pub schedule_description: Option<String>,
    /// The trigger's type (`cron`, `once`, `event`, `system_event`, `webhook`, `manual`).
    pub trigger_type: String,
    /// The action's type (`lightweight`, `full_job`, `tool_call`, `notification`, `watch`, `system`).
    pub action: String,
    /// The agent that runs it (an id of `[[agents]]`; `main` when its spec names none).
    pub agent: String,
    /// The IANA zone its schedule is read in.
    pub timezone: String,
    /// When its next slot fires, jitter applied (enabled timed routines only).
    pub next_fire_at: Option<DateTime<Utc>>,
    /// Its next slot (its identity in the runs; `next_fire_at` without jitter).
    pub next_slot: Option<DateTime<Utc>>,
    /// Set while it is paused: who paused it, when and why.
    pub paused: Option<PauseView>,
    /// When its latest run started.
    pub last_run_at: Option<DateTime<Utc>>,
    /// The status of its latest run.
    pub last_status: Option<String>,
    /// Runs so far.
    pub run_count: u64,
    /// Failed runs in a row.
    pub consecutive_failures: u32,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last changed.
    pub updated_at: DateTime<Utc>,
    /// The spec, in the routine-file shape (what `PUT` takes back); a
    /// literal webhook secret shows as `"***"`, which `PUT` keeps as stored.
    #[schema(value_type = RoutineSpec)]
    pub spec: Value,
}

/// The trigger in a few words.
fn trigger_short(trigger: &Trigger) -> String {
    match trigger {
        Trigger::Cron { schedule } => format!("cron {schedule}"),
        Trigger::Once { at } => format!("once {at}"),
        Trigger::Event { pattern, .. } => format!("event /{pattern}/"),
        other => other.kind().to_string(),
    }
}

/// The zone routines without their own are read in: the engine's (the
/// daemon's configured zone), UTC when this gateway runs without one.
pub(crate) fn user_zone(state: &Gateway) -> Tz {
    state
        .engine()
        .map_or(chrono_tz::UTC, |e| e.settings().user_zone)
}

pub(super) async fn view_of(state: &Gateway, routine: &Routine) -> Result<RoutineView, ApiError> {
    let last = state.store().list_runs(routine.id, 1).await?;
    // A literal webhook secret is shown as "***" (PUT keeps the stored one).
    let spec = serde_json::to_value(routine.spec.redacted())
        .map_err(|e| ApiError::internal("the routine could not be shown", &e))?;
    let zone = zone_of(&routine.spec, user_zone(state));
    Ok(RoutineView {
        id: routine.id,
        name: routine.spec.name.clone(),
        description: routine.spec.description.clone(),
        enabled: routine.spec.enabled,
        trigger: trigger_short(&routine.spec.trigger),
        schedule_description: cairn_automation::routines::define::schedule_of(
            &routine.spec,
            user_zone(state),
            state.clock().now(),
        )
        .and_then(Result::ok)
        .map(|s| s.describe()),
        trigger_type: routine.spec.trigger.kind().to_string(),
        action: routine.spec.action.kind().to_string(),
        agent: routine.spec.agent_id().to_string(),
        timezone: zone.name().to_string(),
        next_fire_at: routine.next_due().filter(|_| routine.spec.enabled),
        next_slot: routine
            .runtime
            .next_fire_at
            .filter(|_| routine.spec.enabled),
        paused: routine.runtime.paused.as_ref().map(PauseView::from),
        last_run_at: routine.runtime.last_run_at,
        last_status: last.first().map(|r| r.status.as_str().to_string()),
        run_count: routine.runtime.run_count,
        consecutive_failures: routine.runtime.consecutive_failures,
        created_at: routine.created_at,
        updated_at: routine.updated_at,
        spec,
    })
}

/// The person's routine `key` names (its id, else its name), or 404.
pub(super) async fn resolve(state: &Gateway, key: &str) -> Result<Routine, ApiError> {
    // No name holds a NUL, and PostgreSQL refuses one in a query parameter.
    if key.contains('\0') {
        return Err(ApiError::not_found(
            "no routine has a NUL character in its name",
        ));
    }
    if let Ok(id) = Uuid::parse_str(key)
        && let Some(routine) = state.store().get_routine(id).await?
        && routine.user_id == state.user_id()
    {
        return Ok(routine);
    }
    match state.store().find_routine(state.user_id(), key).await? {
        Some(routine) => Ok(routine),
        None => Err(ApiError::not_found(format!(
            "no routine with the id or name \"{key}\""
        ))),
    }
}

/// 422 listing every problem with its field path.
pub(super) fn invalid(problems: &[Problem]) -> ApiError {
    let count = problems.len();
    let noun = if count == 1 { "problem" } else { "problems" };
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let listed: Vec<Value> = problems
        .iter()
        .map(|p| json!({"path": p.path, "message": p.message}))
        .collect();
    ApiError::unprocessable(format!(
        "{count} {noun} in the routine, nothing written: {}",
        lines.join("; ")
    ))
    .with_details(json!({ "problems": listed }))
}

/// The paths of every string (or key) in `value` holding a NUL character.
fn nul_paths(value: &Value, path: &str, out: &mut Vec<String>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::String(s) if s.contains('\0') => out.push(path.to_string()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                nul_paths(item, &join(&i.to_string()), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                if key.contains('\0') {
                    out.push(join(key));
                }
                nul_paths(item, &join(key), out);
            }
        }
        _ => {}
    }
}

/// 422 when `value` holds a NUL character anywhere: no field means one,
/// and PostgreSQL cannot store one in text, so it is refused up front the
/// same way on every backend.
fn refuse_nul(value: &Value) -> Result<(), ApiError> {
    let mut paths = Vec::new();
    nul_paths(value, "", &mut paths);
    if paths.is_empty() {
        return Ok(());
    }
    let problems: Vec<Problem> = paths
        .into_iter()
        .map(|path| Problem {
            path,
            message: "must not contain a NUL character (U+0000)".to_string(),
        })
        .collect();
    Err(invalid(&problems))
}

/// The spec in `body`, as written; the routine service judges it.
fn spec_of(body: Value) -> Result<RoutineSpec, ApiError> {
    refuse_nul(&body)?;
    // The shape is judged first (serde stops at its first problem); the
    // path it reports is the same dotted path the field checks use.
    serde_path_to_error::deserialize(body).map_err(|e| {
        let path = e.path().to_string();
        invalid(&[Problem {
            path: if path == "." { String::new() } else { path },
            message: e.into_inner().to_string(),
        }])
    })
}

/// The person's routines, by name.
#[utoipa::path(get, path = "/api/routines", tag = "routines", security(("bearer" = [])),
    responses(
        (status = 200, description = "The routines, by name", body = [RoutineView]),
        (status = 401, description = "No valid token", body = ErrorBody)))]
async fn list_routines(
    _: Authed,
    State(state): State<AppState>,
) -> Result<Json<Vec<RoutineView>>, ApiError> {
    let routines = state.store().list_routines(Some(state.user_id())).await?;
    let mut views = Vec::with_capacity(routines.len());
    for routine in &routines {
        views.push(view_of(&state, routine).await?);
    }
    Ok(Json(views))
}

/// Creates a routine from its spec.
#[utoipa::path(post, path = "/api/routines", tag = "routines", security(("bearer" = [])),
    request_body(content = RoutineSpec, description = "The routine spec, in the same JSON shape as a routine file"),
    responses(
        (status = 201, description = "Created", body = RoutineView),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 409, description = "The name is taken", body = ErrorBody),
        (status = 422, description = "Invalid; `error.details.problems` lists every problem with its path", body = ErrorBody)))]
async fn create_routine(
    _: Authed,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<RoutineView>), ApiError> {
    let routine = state
        .routines()
        .create(spec_of(body)?, &me(&state))
        .await
        .map_err(|e| match e {
            ServiceError::Taken(name) => ApiError::conflict(format!(
                "a routine named \"{name}\" already exists; PUT /api/routines/{name} replaces it"
            )),
            e => api_error(e),
        })?;
    Ok((StatusCode::CREATED, Json(view_of(&state, &routine).await?)))
}

/// One routine.
#[utoipa::path(get, path = "/api/routines/{id}", tag = "routines", security(("bearer" = [])),
    params(("id" = String, Path, description = "The routine's id, or its name", example = "morning-brief")),
    responses(
        (status = 200, description = "The routine", body = RoutineView),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such routine", body = ErrorBody)))]
async fn get_routine(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<RoutineView>, ApiError> {
    let routine = resolve(&state, &id).await?;
    Ok(Json(view_of(&state, &routine).await?))
}

/// Replaces a routine's spec (its history and state are kept; a new name
/// renames it).
#[utoipa::path(put, path = "/api/routines/{id}", tag = "routines", security(("bearer" = [])),
    params(("id" = String, Path, description = "The routine's id, or its name", example = "morning-brief")),
    request_body(content = RoutineSpec, description = "The routine spec, in the same JSON shape as a routine file"),
    responses(
        (status = 200, description = "Replaced", body = RoutineView),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such routine", body = ErrorBody),
        (status = 409, description = "The new name is taken", body = ErrorBody),
        (status = 422, description = "Invalid; `error.details.problems` lists every problem with its path", body = ErrorBody)))]
async fn replace_routine(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<RoutineView>, ApiError> {
    let routine = resolve(&state, &id).await?;
    let done = state
        .routines()
        .replace(routine, spec_of(body)?, &me(&state))
        .await
        .map_err(api_error)?;
    Ok(Json(view_of(&state, &done.routine).await?))
}

/// Deletes a routine with its run history.
#[utoipa::path(delete, path = "/api/routines/{id}", tag = "routines", security(("bearer" = [])),
    params(("id" = String, Path, description = "The routine's id, or its name", example = "morning-brief")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such routine", body = ErrorBody)))]
async fn delete_routine(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let routine = resolve(&state, &id).await?;
    state
        .routines()
        .delete(&routine, &me(&state))
        .await
        .map_err(api_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// A fire that started.
#[derive(Debug, Serialize, ToSchema)]
pub struct FireAccepted {
    /// The routine's id.
    pub routine_id: Uuid,
    /// Its name.
    pub routine: String,
    /// The run started; `GET /api/routines/{id}/runs` shows its outcome.
    pub run_id: Uuid,
    /// Set when the run waits for a place under the global run limit
    /// (`routines.max_concurrent`): why. It starts when a place frees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// Fires a routine now (cooldown does not apply to a manual fire; the
/// concurrency limit does). The optional JSON body is handed to the action
/// as the trigger's payload.
#[utoipa::path(post, path = "/api/routines/{id}/fire", tag = "routines", security(("bearer" = [])),
    params(("id" = String, Path, description = "The routine's id, or its name", example = "morning-brief")),
    request_body(content = Option<Object>, description = "Optional payload for the action", content_type = "application/json"),
    responses(
        (status = 202, description = "Started", body = FireAccepted),
        (status = 400, description = "The body is not JSON", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such routine", body = ErrorBody),
        (status = 409, description = "Refused: disabled, or a guardrail held it back (the message says which; `error.details.run_id` is the skipped run)", body = ErrorBody),
        (status = 422, description = "The payload holds a NUL character", body = ErrorBody),
        (status = 503, description = "No routine engine runs here", body = ErrorBody)))]
async fn fire_routine(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiBytes(body): ApiBytes,
) -> Result<(StatusCode, Json<FireAccepted>), ApiError> {
    let engine = state.engine()?;
    let payload = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let value: Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the payload is not JSON: {e}")))?;
        refuse_nul(&value)?;
        Some(value).filter(|v| !v.is_null())
    };
    let routine = resolve(&state, &id).await?;
    let fired = engine
        .fire_manual(&routine, payload, None)
        .await
        .map_err(|e| match e {
            FireError::Disabled(_) | FireError::Paused(..) => ApiError::conflict(e.to_string()),
            FireError::Gone(_) => ApiError::not_found(e.to_string()),
            FireError::Store(e) => ApiError::from(e),
        })?;
    let accepted = |waiting| {
        Ok((
            StatusCode::ACCEPTED,
            Json(FireAccepted {
                routine_id: fired.routine_id,
                routine: fired.routine.clone(),
                run_id: fired.run_id,
                waiting,
            }),
        ))
    };
    match &fired.admitted {
        Admitted::Started => accepted(None),
        Admitted::Waiting(reason) => accepted(Some(reason.clone())),
        Admitted::Skipped(reason) => Err(ApiError::conflict(format!(
            "routine \"{}\" did not fire: {reason}",
            fired.routine
        ))
        .with_details(json!({ "run_id": fired.run_id, "reason": reason }))),
        Admitted::Refused(reason) => Err(ApiError::conflict(format!(
            "routine \"{}\" did not fire: {reason}",
            fired.routine
        ))
        .with_details(json!({ "run_id": null, "reason": reason }))),
        Admitted::Taken => Err(ApiError::conflict(format!(
            "routine \"{}\" did not fire: it was deleted or another process took the fire",
            fired.routine
        ))),
    }
}

/// How many runs to show.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunsQuery {
    /// How many runs, newest first (1 to 100; default 10).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// One run of a routine.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunView {
    /// The run's id.
    pub id: Uuid,
    /// What fired it (`cron`, `manual`, `webhook`, …).
    pub trigger_type: String,
    /// Details of the fire.
    pub trigger_detail: Option<String>,
    /// The slot it fills, for scheduled fires.
    pub scheduled_for: Option<DateTime<Utc>>,
    /// 1, or 2 for the re-run of a slot whose first run a crash interrupted.
    pub attempt: u32,
    /// Started.
    pub started_at: DateTime<Utc>,
    /// Ended.
    pub completed_at: Option<DateTime<Utc>>,
    /// `running`, `ok`, `attention`, `failed`, `skipped`, `interrupted`, …
    pub status: String,
    /// What it found or why it failed.
    pub result_summary: Option<String>,
    /// Tokens spent.
    pub tokens_used: Option<u64>,
    /// The job it started (`full_job`).
    pub job_id: Option<Uuid>,
    /// The notification it sent.
    pub notification_id: Option<Uuid>,
    /// Which guardrail held it back (`skipped` runs).
    pub skip_reason: Option<String>,
}

impl From<RoutineRun> for RunView {
    fn from(r: RoutineRun) -> Self {
        Self {
            id: r.id,
            trigger_type: r.trigger_type,
            trigger_detail: r.trigger_detail,
            scheduled_for: r.scheduled_for,
            attempt: r.attempt,
            started_at: r.started_at,
            completed_at: r.completed_at,
            status: r.status.as_str().to_string(),
            result_summary: r.result_summary,
            tokens_used: r.tokens_used,
            job_id: r.job_id,
            notification_id: r.notification_id,
            skip_reason: r.skip_reason,
        }
    }
}

/// A routine's latest runs, newest first.
#[utoipa::path(get, path = "/api/routines/{id}/runs", tag = "routines", security(("bearer" = [])),
    params(("id" = String, Path, description = "The routine's id, or its name", example = "morning-brief"), RunsQuery),
    responses(
        (status = 200, description = "Its runs, newest first", body = [RunView]),
        (status = 400, description = "A bad `limit`", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such routine", body = ErrorBody)))]
async fn routine_runs(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<RunsQuery>,
) -> Result<Json<Vec<RunView>>, ApiError> {
    let limit = match query.limit {
        None => DEFAULT_RUNS,
        Some(n) if (1..=MAX_RUNS).contains(&n) => n,
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "`limit` must be from 1 to {MAX_RUNS}"
            )));
        }
    };
    let routine = resolve(&state, &id).await?;
    let runs = state.store().list_runs(routine.id, limit).await?;
    Ok(Json(runs.into_iter().map(RunView::from).collect()))
}
