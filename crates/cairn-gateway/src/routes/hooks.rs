//! `POST /hooks/routine/{path}`: fires a webhook routine. The engine checks
//! the signature (`X-Signature-256: sha256=<hex>`, HMAC-SHA256 of the raw
//! body, or of `<timestamp>.<body>` with `X-Cairn-Timestamp`, which must
//! be within 5 minutes and new) or, for a routine without a secret, that a
//! bearer token came; the run is recorded before the 202 goes out.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use cairn_automation::routines::engine::{FireError, WebhookFireError};
use cairn_automation::routines::webhook::{
    Delivery, SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookError,
};
use cairn_store::Admitted;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::auth;
use crate::client::ClientIp;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiBytes;
use crate::state::AppState;

/// The routes of this module. Routine paths may hold slashes, so axum
/// routes a wildcard while the document names one `{path}` parameter.
pub fn routes() -> OpenApiRouter<AppState> {
    let (schemas, paths, method_router) = routes!(fire_routine_hook);
    let mut doc = utoipa::openapi::OpenApi::default();
    doc.paths = paths;
    doc.components
        .get_or_insert_with(Default::default)
        .schemas
        .extend(schemas);
    OpenApiRouter::with_openapi(doc).route("/hooks/routine/{*path}", method_router)
}

/// A fire that was accepted.
#[derive(Debug, Serialize, ToSchema)]
pub struct Accepted {
    /// The run recorded for it.
    pub run_id: Uuid,
    /// Set when the run waits for a place under the global run limit
    /// (`routines.max_concurrent`): why. It starts when a place frees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

/// Fires the webhook routine at `path` (its configured path, its id, or its name).
#[utoipa::path(post, path = "/hooks/routine/{path}", tag = "routines",
    security((), ("bearer" = [])),
    params(
        ("path" = String, Path, description = "The routine's webhook path (may contain slashes), its id or its name"),
        ("X-Signature-256" = Option<String>, Header, description = "sha256=<hex HMAC-SHA256 under the routine's secret of the body, or of <timestamp>.<body> when X-Cairn-Timestamp is sent>"),
        ("X-Cairn-Timestamp" = Option<i64>, Header, description = "Unix seconds, signed with the body; accepted within 5 minutes of the daemon's clock, once")),
    request_body(content = String, description = "Any body; JSON is handed to the action as the payload", content_type = "application/octet-stream"),
    responses(
        (status = 202, description = "The run is recorded and started", body = Accepted),
        (status = 401, description = "Missing or wrong signature or timestamp (or bearer token, for a routine without a secret)", body = ErrorBody),
        (status = 404, description = "No webhook routine there", body = ErrorBody),
        (status = 408, description = "The body did not arrive within the request time limit", body = ErrorBody),
        (status = 409, description = "A replayed delivery, refused by a guardrail (dedup, cooldown, concurrency), or disabled; the reason and the skipped run's id (null when the same refusal was recorded within the last minute) are in details", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 429, description = "Too many failed authentications", body = ErrorBody)))]
async fn fire_routine_hook(
    State(state): State<AppState>,
    Path(path): Path<String>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    ApiBytes(body): ApiBytes,
) -> Result<Response, ApiError> {
    let engine = state.engine()?;
    let bearer_ok = bearer_ok(&state, ip, &headers).await?;
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (signature, timestamp) = (header(SIGNATURE_HEADER), header(TIMESTAMP_HEADER));
    // In a task of its own: a client hanging up mid-request must not leave
    // a run admitted but never started.
    let engine = engine.clone();
    let fire = tokio::spawn(async move {
        let delivery = Delivery {
            body: &body,
            signature: signature.as_deref(),
            timestamp: timestamp.as_deref(),
            bearer_ok,
        };
        engine.fire_webhook(&path, &delivery).await
    });
    let fired = fire
        .await
        .map_err(|e| ApiError::internal("the webhook fire failed", &e))?;
    match fired {
        Ok(fired) => match fired.admitted {
            Admitted::Started => Ok((
                StatusCode::ACCEPTED,
                Json(Accepted {
                    run_id: fired.run_id,
                    waiting: None,
                }),
            )
                .into_response()),
            Admitted::Waiting(reason) => Ok((
                StatusCode::ACCEPTED,
                Json(Accepted {
                    run_id: fired.run_id,
                    waiting: Some(reason),
                }),
            )
                .into_response()),
            Admitted::Skipped(reason) => Err(ApiError::conflict(format!(
                "routine \"{}\" did not run: {reason}",
                fired.routine
            ))
            .with_details(serde_json::json!({ "run_id": fired.run_id, "reason": reason }))),
            Admitted::Refused(reason) => Err(ApiError::conflict(format!(
                "routine \"{}\" did not run: {reason} (recorded once a minute)",
                fired.routine
            ))
            .with_details(serde_json::json!({ "run_id": null, "reason": reason }))),
            Admitted::Taken => Err(ApiError::not_found(format!(
                "routine \"{}\" no longer exists",
                fired.routine
            ))),
        },
        Err(WebhookFireError::Webhook(e)) => Err(match e {
            WebhookError::Unknown(_) => ApiError::not_found(e.to_string()),
            WebhookError::Disabled(_) => ApiError::conflict(e.to_string()),
            WebhookError::MissingSignature if !bearer_ok => ApiError::unauthorized(format!(
                "missing {SIGNATURE_HEADER} header (or, for a routine without a secret, a bearer token)"
            )),
            WebhookError::MissingSignature
            | WebhookError::MalformedSignature
            | WebhookError::BadSignature
            | WebhookError::MalformedTimestamp
            | WebhookError::StaleTimestamp(_) => ApiError::unauthorized(e.to_string()),
            WebhookError::SecretUnavailable { .. } => {
                tracing::error!(error = %e, "a webhook routine's secret is not available");
                ApiError::unavailable(
                    "this routine's webhook secret is not configured on the daemon; its log has the details",
                )
            }
        }),
        Err(WebhookFireError::Fire(e)) => Err(match e {
            FireError::Disabled(_) | FireError::Paused(..) => ApiError::conflict(e.to_string()),
            FireError::Gone(_) => ApiError::not_found(e.to_string()),
            FireError::Store(e) => e.into(),
        }),
    }
}

/// Whether a valid bearer token came. A wrong one counts as an
/// authentication failure (and a client over the limit of failures is
/// refused), but is not itself an error: the signature may still do.
async fn bearer_ok(
    state: &AppState,
    ip: std::net::IpAddr,
    headers: &HeaderMap,
) -> Result<bool, ApiError> {
    let Some(token) = auth::bearer_in(headers) else {
        return Ok(false);
    };
    // A valid token always counts; only failures are limited.
    match auth::authenticate(state, token).await {
        Ok(_) => Ok(true),
        Err(e) if e.status == StatusCode::UNAUTHORIZED => {
            state.limits().auth_allowed(ip)?;
            state.limits().auth_failed(ip);
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
