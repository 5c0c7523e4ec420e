//! `GET /metrics`: the Prometheus text format. Needs a bearer token unless
//! `gateway.metrics_public` is set.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::auth::Authed;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(metrics))
}

/// The daemon's metrics: requests by route and status, routine fires and
/// their lateness, notifications by outcome, LLM calls, tokens and cost,
/// tool calls.
#[utoipa::path(get, path = "/metrics", tag = "health",
    security(("bearer" = []), ()),
    responses(
        (status = 200, description = "Prometheus text format", body = String, content_type = "text/plain"),
        (status = 401, description = "No valid bearer token (and metrics_public is off)", body = ErrorBody),
        (status = 503, description = "This process has another metrics recorder", body = ErrorBody)))]
async fn metrics(State(state): State<AppState>, request: Request) -> Result<Response, ApiError> {
    if !state.settings().metrics_public {
        let (mut parts, _) = request.into_parts();
        Authed::from_request_parts(&mut parts, &state).await?;
    }
    let text = crate::metrics::render()
        .ok_or_else(|| ApiError::unavailable("metrics are not recorded in this process"))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}
