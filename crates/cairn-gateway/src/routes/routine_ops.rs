//! `/api/routines/{id}/pause|resume|backfill|next`: schedule operations.
//! Each handler authenticates, finds the routine (id or name, as the other
//! routine routes do), parses the body and calls the routine service, the
//! one place these operations are decided; the answer is translated to a
//! view or to the error shape.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use cairn_automation::routines::service::{
    Actor, BackfillRequest, MAX_NEXT, MAX_NOTE, NextFire, ServiceError,
};
use cairn_core::routine::Overlap;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::routines::{RoutineView, invalid, resolve, view_of};
use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{ApiBytes, ApiJson, ApiQuery};
use crate::state::{AppState, Gateway};

/// Who paused a routine, when and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct PauseView {
    /// Who: `ada (api)`, `ada (cli)`, `the agent`, `cairn` (after failures).
    pub by: String,
    /// When.
    pub at: DateTime<Utc>,
    /// Why, as written.
    pub note: Option<String>,
}

impl From<&cairn_core::routine::Pause> for PauseView {
    fn from(p: &cairn_core::routine::Pause) -> Self {
        Self {
            by: p.by.clone(),
            at: p.at,
            note: p.note.clone(),
        }
    }
}

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(pause_routine))
        .routes(routes!(resume_routine))
        .routes(routes!(backfill_routine))
        .routes(routes!(next_fires))
}

/// The person, through the API.
pub(super) fn me(state: &Gateway) -> Actor {
    Actor::Person {
        user: state.user_id().to_string(),
        via: "api",
    }
}

/// A refusal of the routine service as the API answers it.
pub(crate) fn api_error(e: ServiceError) -> ApiError {
    match e {
        ServiceError::Problems { problems, .. } => invalid(&problems),
        ServiceError::Taken(_) => ApiError::conflict(e.to_string()),
        ServiceError::NotFound { .. } => ApiError::not_found(e.to_string()),
        ServiceError::Invalid(_) => ApiError::unprocessable(e.to_string()),
        ServiceError::Conflict(_) => ApiError::conflict(e.to_string()),
        ServiceError::Forbidden(_) => {
            ApiError::new(StatusCode::FORBIDDEN, "forbidden", e.to_string())
        }
        ServiceError::TooMany { count, max, .. } => {
            ApiError::unprocessable(format!("{e} (send \"yes\": true)"))
                .with_details(json!({"slots": count, "max_backfill": max}))
        }
        ServiceError::Store(e) => e.into(),
    }
}

/// Why a routine is paused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseBody {
    /// Why (at most 500 characters).
    #[serde(default)]
    #[schema(max_length = 500)]
    pub note: Option<String>,
}

/// Pauses a routine: it keeps its schedule and history and fires nothing
/// until resumed. Pausing a paused routine changes nothing.
#[utoipa::path(post, path = "/api/routines/{id}/pause", tag = "routines", security(("bearer" = [])),
    params(("id" = String, Path, description = "The routine's id, or its name", example = "morning-brief")),
    request_body(content = Option<PauseBody>, description = "An optional note", content_type = "application/json"),
    responses(
        (status = 200, description = "Paused (`paused` says by whom, when and why)", body = RoutineView),
        (status = 400, description = "Not JSON", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such routine", body = ErrorBody),
        (status = 422, description = "The note is too long, or holds a NUL character", body = ErrorBody)))]
async fn pause_routine(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiBytes(body): ApiBytes,
) -> Result<Json<RoutineView>, ApiError> {
    let body: PauseBody = if body.iter().all(u8::is_ascii_whitespace) {
        PauseBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body is not a pause: {e}")))?
    };
    let routine = resolve(&state, &id).await?;
    let note = body.note;
    if note.as_deref().is_some_and(|n| n.contains('\0')) {
        return Err(ApiError::unprocessable(format!(
            "the note must not contain a NUL character (U+0000); at most {MAX_NOTE} characters"
        )));
    }
    let done = state
        .routines()
        .pause(&routine.spec.name, note.as_deref(), &me(&state))
        .await
        .map_err(api_error)?;
    Ok(Json(view_of(&state, &done.routine).await?))
}

/// A resumed routine and what becomes of the slots it missed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Resumed {
    /// The routine as it now is.
    pub routine: RoutineView,
    /// Whether it was paused.
    pub was_paused: bool,
    /// What its `catch_up` does about the slots missed while paused.
    pub catch_up: Option<String>,
}

/// Resumes a paused routine. The slots it missed while paused are caught
/// up by its `catch_up` policy (`catch_up` says how).
#[utoipa::path(post, path = "/api/routines/{id}/resume", tag = "routines", security(("bearer" = [])),
    params(("id" = String, Path, description = "The routine's id, or its name", example = "morning-brief")),
    responses(
        (status = 200, description = "Resumed (or it was not paused)", body = Resumed),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such routine", body = ErrorBody)))]
async fn resume_routine(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Resumed>, ApiError> {
    let routine = resolve(&state, &id).await?;
    let done = state
        .routines()
        .resume(&routine.spec.name, &me(&state))
        .await
        .map_err(api_error)?;
    Ok(Json(Resumed {
        routine: view_of(&state, &done.routine).await?,
        was_paused: done.lifted.is_some(),
        catch_up: done.catch_up,
    }))
}

/// A backfill: the past range whose slots to run.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillBody {
    /// From (included), RFC 3339.
    pub from: DateTime<Utc>,
    /// To (included, not in the future), RFC 3339.
    pub to: DateTime<Utc>,
    /// What the slots do while a run goes: `skip`, `buffer_one`,
    /// `buffer_all` (the default: they wait, in order), `cancel_other`, `allow_all`.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "buffer_all")]
    pub overlap: Option<String>,
    /// Run more slots than `routines.max_backfill`.
    #[serde(default)]
    pub yes: bool,
}

/// A slot and what became of it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SlotView {
    /// The slot.
    pub slot: DateTime<Utc>,
    /// Its run (for slots queued by this backfill).
    pub run_id: Option<Uuid>,
    /// The status of its run (`waiting` for one queued; that of the earlier
    /// run for one that already had one), when known.
    pub status: Option<String>,
    /// Why it is not run.
    pub reason: Option<String>,
}

/// What a backfill recorded.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackfillView {
    /// The routine.
    pub routine: String,
    /// The overlap policy used.
    pub overlap: String,
    /// Slots queued to run, oldest first (`GET /api/routines/{id}/runs` shows them).
    pub queued: Vec<SlotView>,
    /// Slots that already had a run: not run again.
    pub already_run: Vec<SlotView>,
    /// Slots the overlap policy skipped.
    pub skipped: Vec<SlotView>,
}

/// Runs a cron routine's past slots from `from` to `to`, in order, with
/// trigger `backfill`; a slot that already has a run is not run again.
#[utoipa::path(post, path = "/api/routines/{id}/backfill", tag = "routines", security(("bearer" = [])),
    params(("id" = String, Path, description = "The routine's id, or its name", example = "morning-brief")),
    request_body = BackfillBody,
    responses(
        (status = 202, description = "Recorded; the engine runs the queued slots in order", body = BackfillView),
        (status = 400, description = "Not JSON, or not this shape", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such routine", body = ErrorBody),
        (status = 409, description = "The routine is disabled or paused", body = ErrorBody),
        (status = 422, description = "A bad range, a trigger without slots, an unknown overlap, or more slots than routines.max_backfill without `yes`", body = ErrorBody)))]
async fn backfill_routine(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<BackfillBody>,
) -> Result<(StatusCode, Json<BackfillView>), ApiError> {
    let routine = resolve(&state, &id).await?;
    let overlap = match &body.overlap {
        Some(text) => Some(
            text.parse::<Overlap>()
                .map_err(|e| ApiError::unprocessable(format!("overlap: {e}")))?,
        ),
        None => None,
    };
    let request = BackfillRequest {
        from: body.from,
        to: body.to,
        overlap,
        confirmed: body.yes,
    };
    let done = state
        .routines()
        .backfill(&routine.spec.name, &request, &me(&state))
        .await
        .map_err(api_error)?;
    let slot = |slot, run_id, status: Option<String>, reason| SlotView {
        slot,
        run_id,
        status,
        reason,
    };
    Ok((
        StatusCode::ACCEPTED,
        Json(BackfillView {
            routine: done.routine.spec.name.clone(),
            overlap: done.overlap.as_str().to_string(),
            queued: done
                .queued
                .iter()
                .filter_map(|r| {
                    let at = r.scheduled_for?;
                    Some(slot(at, Some(r.id), Some(r.status.to_string()), None))
                })
                .collect(),
            already_run: done
                .already
                .iter()
                .map(|(at, status)| slot(*at, None, status.map(|s| s.to_string()), None))
                .collect(),
            skipped: done
                .skipped
                .iter()
                .map(|(at, why)| slot(*at, None, Some("skipped".into()), Some(why.clone())))
                .collect(),
        }),
    ))
}

/// How many next fires.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NextQuery {
    /// How many (1 to 100; default 5).
    #[param(minimum = 1, maximum = 100)]
    pub count: Option<usize>,
}

/// One next fire.
#[derive(Debug, Serialize, ToSchema)]
pub struct NextFireView {
    /// When it fires (the slot plus the routine's jitter).
    pub fires_at: DateTime<Utc>,
    /// The slot (its identity in the runs).
    pub slot: DateTime<Utc>,
}

impl From<NextFire> for NextFireView {
    fn from(f: NextFire) -> Self {
        Self {
            fires_at: f.fires_at,
            slot: f.slot,
        }
    }
}

/// A routine's next fires, jitter applied (a paused routine's fire once it is resumed).
#[utoipa::path(get, path = "/api/routines/{id}/next", tag = "routines", security(("bearer" = [])),
    params(("id" = String, Path, description = "The routine's id, or its name", example = "morning-brief"), NextQuery),
    responses(
        (status = 200, description = "Its next fires, soonest first", body = [NextFireView]),
        (status = 400, description = "A bad `count`", body = ErrorBody),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 404, description = "No such routine", body = ErrorBody)))]
async fn next_fires(
    _: Authed,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<NextQuery>,
) -> Result<Json<Vec<NextFireView>>, ApiError> {
    let count = match query.count {
        None => 5,
        Some(n) if (1..=MAX_NEXT).contains(&n) => n,
        Some(_) => {
            return Err(ApiError::bad_request(format!(
                "`count` must be from 1 to {MAX_NEXT}"
            )));
        }
    };
    let routine = resolve(&state, &id).await?;
    let fires = state.routines().next_of(&routine, count);
    Ok(Json(fires.into_iter().map(NextFireView::from).collect()))
}
