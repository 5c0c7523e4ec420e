//! Signed messages to `POST /webhook`. With `gateway.webhook_secret` set,
//! a message needs, besides the bearer token, `X-Webhook-Signature:
//! sha256=<hex>`, the HMAC-SHA256 under the secret of the raw body or, when
//! the sender adds `X-Cairn-Timestamp: <unix seconds>`, of
//! `<timestamp>.<body>` (as routine webhooks sign); a timestamped message is
//! accepted within 5 minutes of the daemon's clock, once. Anything else is
//! 403 before the body is parsed, so nothing reaches the agent.
//!
//! Without the setting a signature cannot be checked, and one sent is
//! refused (403) rather than ignored: a sender that signs expects its
//! signature to be checked, and the answer says which setting is missing
//! instead of letting an unchecked message look verified.

use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode};
use cairn_automation::routines::webhook::{self, Delivery, TIMESTAMP_HEADER, WebhookError};
use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::extract::{ApiBytes, ApiJson};
use crate::state::AppState;

/// The header carrying a `/webhook` message's signature.
pub const SIGNATURE_HEADER: &str = "x-webhook-signature";

/// The store's scope of timestamped signatures already accepted.
const REPLAY_SCOPE: &str = "webhook-signature";

/// How long an accepted timestamped signature is remembered: past the
/// 5 minutes either way a timestamp is accepted.
const REPLAY_MEMORY: chrono::Duration = chrono::Duration::minutes(10);

/// A JSON body whose signature holds (or that needed none).
#[derive(Debug, Clone)]
pub struct SignedJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for SignedJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (signature, timestamp) = (
            header(req.headers(), SIGNATURE_HEADER),
            header(req.headers(), TIMESTAMP_HEADER),
        );
        let Some(secret) = state.settings().webhook_secret.as_ref() else {
            if signature.is_some() {
                return Err(forbidden(
                    "X-Webhook-Signature was sent, but gateway.webhook_secret is not set: the daemon cannot check it; set the secret the sender signs with, or stop signing",
                ));
            }
            return ApiJson::from_request(req, state)
                .await
                .map(|ApiJson(v)| SignedJson(v));
        };
        let content_type = content_type(req.headers());
        let ApiBytes(body) = ApiBytes::from_request(req, state).await?;
        let delivery = Delivery {
            body: &body,
            signature: signature.as_deref(),
            timestamp: timestamp.as_deref(),
            bearer_ok: true,
        };
        let now = state.clock().now();
        let verified = webhook::verify(secret.expose_secret(), &delivery, now).map_err(refusal)?;
        if let Some(key) = verified.replay_key {
            let fresh = state
                .store()
                .first_sighting(REPLAY_SCOPE, &key, now, REPLAY_MEMORY)
                .await?;
            if !fresh {
                return Err(forbidden(
                    "this signed message was already accepted: sign it again with a fresh X-Cairn-Timestamp",
                ));
            }
        }
        json_of(content_type.as_deref(), &body).map(SignedJson)
    }
}

/// A header's value (not text: empty, which no check accepts).
fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| v.to_str().unwrap_or_default().to_string())
}

/// A 403 saying why.
fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "bad_signature", message)
}

/// Why a signature was refused, naming this endpoint's header.
fn refusal(e: WebhookError) -> ApiError {
    match e {
        WebhookError::MissingSignature => forbidden(
            "missing X-Webhook-Signature header: gateway.webhook_secret is set, so a message must carry sha256=<hex HMAC-SHA256 of the body>",
        ),
        WebhookError::MalformedSignature => {
            forbidden("malformed X-Webhook-Signature header: expected sha256=<64 hex digits>")
        }
        WebhookError::BadSignature => forbidden(
            "X-Webhook-Signature does not match the body (or X-Cairn-Timestamp and the body)",
        ),
        other => forbidden(other.to_string()),
    }
}

/// The media type of the body, lowercased, without parameters.
fn content_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|mime| mime.trim().to_ascii_lowercase())
}

/// The body as `T`, answering as [`ApiJson`] would: 415 for another type,
/// 400 for text that is not JSON, 422 for JSON of the wrong shape.
fn json_of<T: DeserializeOwned>(content_type: Option<&str>, body: &[u8]) -> Result<T, ApiError> {
    if !content_type.is_some_and(|m| m == "application/json" || m.ends_with("+json")) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected Content-Type: application/json",
        ));
    }
    serde_json::from_slice(body).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => {
            ApiError::unprocessable(format!("the body is not a valid request: {e}"))
        }
        _ => ApiError::bad_request(format!("the body is not JSON: {e}")),
    })
}
