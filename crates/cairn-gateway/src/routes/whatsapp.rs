//! `/whatsapp` and `/whatsapp/{channel}`: Meta's webhooks for the
//! WhatsApp channels. They authenticate by the channel's secrets, not by
//! a bearer token: `GET` answers Meta's verification (`hub.mode =
//! subscribe` and the channel's `verify_token`) with `hub.challenge`;
//! `POST` takes a delivery whose `X-Hub-Signature-256` is the HMAC-SHA256
//! of the raw body under the channel's `app_secret`, keeps it in the
//! store for the channel's adapter and answers 200 then (the turn runs
//! after, so a daemon dying before it finds the delivery at its restart;
//! a message delivered again is answered once, by the adapter). Anything
//! else is refused before the body reaches the adapter. With exactly one
//! WhatsApp channel the path may leave its name out.

use std::collections::HashMap;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cairn_automation::inbound::whatsapp::webhook::{Endpoints, HookError, SIGNATURE_HEADER};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::client::ClientIp;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiBytes;
use crate::state::AppState;

/// The routes of this module.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(verify_sole, deliver_sole))
        .routes(routes!(verify_named, deliver_named))
}

type Params = Result<Query<HashMap<String, String>>, QueryRejection>;

/// Answers Meta's verification of the only WhatsApp channel's webhook.
#[utoipa::path(get, path = "/whatsapp", tag = "channels",
    security(()),
    params(
        ("hub.mode" = String, Query, description = "subscribe"),
        ("hub.verify_token" = String, Query, description = "The channel's verify_token"),
        ("hub.challenge" = String, Query, description = "Echoed back when the token matches")),
    responses(
        (status = 200, description = "The challenge, as text", body = String, content_type = "text/plain"),
        (status = 403, description = "Not a subscription, or another token", body = ErrorBody),
        (status = 404, description = "Not exactly one WhatsApp channel runs here", body = ErrorBody),
        (status = 429, description = "Too many failed attempts from this client", body = ErrorBody)))]
async fn verify_sole(
    state: State<AppState>,
    ip: ClientIp,
    params: Params,
) -> Result<Response, ApiError> {
    verify(&state, ip, None, params)
}

/// Answers Meta's verification of the WhatsApp channel `channel`'s webhook.
#[utoipa::path(get, path = "/whatsapp/{channel}", tag = "channels",
    security(()),
    params(
        ("channel" = String, Path, description = "The channel's name ([channels.NAME])"),
        ("hub.mode" = String, Query, description = "subscribe"),
        ("hub.verify_token" = String, Query, description = "The channel's verify_token"),
        ("hub.challenge" = String, Query, description = "Echoed back when the token matches")),
    responses(
        (status = 200, description = "The challenge, as text", body = String, content_type = "text/plain"),
        (status = 403, description = "Not a subscription, or another token", body = ErrorBody),
        (status = 404, description = "No WhatsApp channel of that name runs here", body = ErrorBody),
        (status = 429, description = "Too many failed attempts from this client", body = ErrorBody)))]
async fn verify_named(
    state: State<AppState>,
    ip: ClientIp,
    Path(channel): Path<String>,
    params: Params,
) -> Result<Response, ApiError> {
    verify(&state, ip, Some(&channel), params)
}

/// Takes a webhook delivery for the only WhatsApp channel.
#[utoipa::path(post, path = "/whatsapp", tag = "channels",
    security(()),
    params(("X-Hub-Signature-256" = String, Header, description = "sha256=<hex HMAC-SHA256 of the raw body under the channel's app_secret>")),
    request_body(content = String, description = "Meta's webhook payload (JSON)", content_type = "application/json"),
    responses(
        (status = 200, description = "Kept in the store; the channel handles it after answering"),
        (status = 401, description = "Missing or wrong signature; nothing was taken", body = ErrorBody),
        (status = 404, description = "Not exactly one WhatsApp channel runs here", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 429, description = "Too many failed attempts from this client", body = ErrorBody),
        (status = 503, description = "The delivery cannot be kept now (the database is unreachable); Meta delivers it again", body = ErrorBody)))]
async fn deliver_sole(
    state: State<AppState>,
    ip: ClientIp,
    headers: HeaderMap,
    body: ApiBytes,
) -> Result<StatusCode, ApiError> {
    deliver(&state, ip, None, &headers, body).await
}

/// Takes a webhook delivery for the WhatsApp channel `channel`.
#[utoipa::path(post, path = "/whatsapp/{channel}", tag = "channels",
    security(()),
    params(
        ("channel" = String, Path, description = "The channel's name ([channels.NAME])"),
        ("X-Hub-Signature-256" = String, Header, description = "sha256=<hex HMAC-SHA256 of the raw body under the channel's app_secret>")),
    request_body(content = String, description = "Meta's webhook payload (JSON)", content_type = "application/json"),
    responses(
        (status = 200, description = "Kept in the store; the channel handles it after answering"),
        (status = 401, description = "Missing or wrong signature; nothing was taken", body = ErrorBody),
        (status = 404, description = "No WhatsApp channel of that name runs here", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 429, description = "Too many failed attempts from this client", body = ErrorBody),
        (status = 503, description = "The delivery cannot be kept now (the database is unreachable); Meta delivers it again", body = ErrorBody)))]
async fn deliver_named(
    state: State<AppState>,
    ip: ClientIp,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: ApiBytes,
) -> Result<StatusCode, ApiError> {
    deliver(&state, ip, Some(&channel), &headers, body).await
}

fn endpoints(state: &AppState) -> Result<&Endpoints, ApiError> {
    state
        .whatsapp()
        .ok_or_else(|| ApiError::not_found("no WhatsApp channel runs here"))
}

fn verify(
    state: &AppState,
    ClientIp(ip): ClientIp,
    channel: Option<&str>,
    params: Params,
) -> Result<Response, ApiError> {
    let endpoints = endpoints(state)?;
    state.limits().auth_allowed(ip)?;
    let Query(params) = params.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let param = |name: &str| params.get(name).map(String::as_str);
    match endpoints.verify(
        channel,
        param("hub.mode"),
        param("hub.verify_token"),
        param("hub.challenge"),
    ) {
        Ok(challenge) => Ok(([(header::CONTENT_TYPE, "text/plain")], challenge).into_response()),
        Err(e) => Err(refusal(state, ip, e)),
    }
}

async fn deliver(
    state: &AppState,
    ClientIp(ip): ClientIp,
    channel: Option<&str>,
    headers: &HeaderMap,
    ApiBytes(body): ApiBytes,
) -> Result<StatusCode, ApiError> {
    let endpoints = endpoints(state)?;
    state.limits().auth_allowed(ip)?;
    // Not text: empty, which no signature matches.
    let signature = headers
        .get(SIGNATURE_HEADER)
        .map(|v| v.to_str().unwrap_or_default());
    match endpoints.deliver(channel, signature, &body).await {
        Ok(()) => Ok(StatusCode::OK),
        Err(e) => Err(refusal(state, ip, e)),
    }
}

/// The answer to a refused request; a wrong token or signature counts
/// as a failed authentication of the client.
fn refusal(state: &AppState, ip: std::net::IpAddr, e: HookError) -> ApiError {
    match e {
        HookError::Unknown(m) => ApiError::not_found(m),
        HookError::Forbidden => {
            state.limits().auth_failed(ip);
            ApiError::new(StatusCode::FORBIDDEN, "forbidden", e.to_string())
        }
        HookError::Unsigned(m) => {
            state.limits().auth_failed(ip);
            tracing::info!(%ip, reason = %m, "a WhatsApp webhook was refused");
            ApiError::unauthorized(m)
        }
        HookError::Unkept => ApiError::unavailable(e.to_string()),
    }
}
