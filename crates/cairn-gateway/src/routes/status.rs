//! `/api/status`: what this daemon is and how it is doing, from cheap
//! queries only (a dashboard polls it).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use cairn_core::notification::DeliveryStatus;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use crate::status::ComponentHealth;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(status))
}

/// The daemon's status.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusView {
    /// cairn's version.
    pub version: String,
    /// When the gateway started.
    pub started_at: DateTime<Utc>,
    /// Seconds since then.
    pub uptime_secs: u64,
    /// The database backend (`sqlite` or `postgres`).
    pub database: String,
    /// The model the agent answers with, when an LLM is configured.
    pub model: Option<String>,
    /// The components' health, by name.
    pub components: BTreeMap<String, ComponentHealth>,
    /// Counts.
    pub counts: Counts,
}

/// How many of each.
#[derive(Debug, Serialize, ToSchema)]
pub struct Counts {
    /// The person's routines.
    pub routines: u64,
    /// Of which enabled.
    pub enabled_routines: u64,
    /// Of which paused (`GET /api/routines` says by whom, when and why).
    pub paused_routines: u64,
    /// Notifications not yet delivered (nor given up on).
    pub pending_notifications: u64,
}

/// The daemon's status: version, uptime, database, components, counts.
#[utoipa::path(get, path = "/api/status", tag = "status", security(("bearer" = [])),
    responses(
        (status = 200, description = "The status", body = StatusView),
        (status = 401, description = "No valid token", body = ErrorBody)))]
async fn status(_: Authed, State(state): State<AppState>) -> Result<Json<StatusView>, ApiError> {
    let routines = state.store().list_routines(Some(state.user_id())).await?;
    let pending = state
        .store()
        .notification_counts()
        .await?
        .into_iter()
        .filter(|(s, _)| *s == DeliveryStatus::Pending)
        .map(|(_, n)| n)
        .sum();
    let now = state.clock().now();
    let uptime = (now - state.started_at()).num_seconds().max(0);
    Ok(Json(StatusView {
        version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: state.started_at(),
        uptime_secs: u64::try_from(uptime).unwrap_or(0),
        database: state.store().backend().as_str().to_string(),
        model: state.model().map(str::to_string),
        components: state.components().snapshot(),
        counts: Counts {
            routines: routines.len() as u64,
            enabled_routines: routines.iter().filter(|r| r.spec.enabled).count() as u64,
            paused_routines: routines
                .iter()
                .filter(|r| r.runtime.paused.is_some())
                .count() as u64,
            pending_notifications: pending,
        },
    }))
}
