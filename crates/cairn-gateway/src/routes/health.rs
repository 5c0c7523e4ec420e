//! `/healthz` (the process answers) and `/readyz` (it can do its work: the
//! store answers and no component has failed).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;
use crate::status::{ComponentHealth, ComponentState};

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
}

/// The liveness answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Alive {
    /// Always `ok`.
    pub status: String,
}

/// Whether the daemon answers at all.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process is alive", body = Alive)))]
async fn healthz() -> Json<Alive> {
    Json(Alive {
        status: "ok".to_string(),
    })
}

/// The readiness answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    /// `true`.
    pub ready: bool,
    /// The components' health.
    pub components: BTreeMap<String, ComponentHealth>,
}

/// Whether the daemon can do its work: the database answers and no
/// component has failed, is backing off or is still starting.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses(
        (status = 200, description = "Ready", body = Ready),
        (status = 503, description = "Not ready; the details say why", body = ErrorBody)))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Ready>, ApiError> {
    let components = state.components().snapshot();
    if let Err(e) = state.store().ping().await {
        tracing::warn!(error = %e, "readiness: the database does not answer");
        return Err(ApiError::unavailable("the database does not answer")
            .with_details(serde_json::json!({ "components": components })));
    }
    let waiting: Vec<&str> = components
        .iter()
        .filter(|(_, h)| {
            matches!(
                h.state,
                ComponentState::Starting | ComponentState::BackingOff | ComponentState::Failed
            )
        })
        .map(|(name, _)| name.as_str())
        .collect();
    if !waiting.is_empty() {
        return Err(ApiError::unavailable(format!(
            "not ready: {} not running",
            waiting.join(", ")
        ))
        .with_details(serde_json::json!({ "components": components })));
    }
    Ok(Json(Ready {
        ready: true,
        components,
    }))
}
