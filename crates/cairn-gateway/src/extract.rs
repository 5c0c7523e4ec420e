//! Request extractors whose rejections are [`ApiError`]s (axum's own
//! answer in plain text), with the configured body limit named on 413.
//! A body must arrive within `gateway.request_timeout_secs` (408 if not),
//! also on routes whose answer may take longer (agent turns), so a client
//! cannot hold a request open by sending its body slowly.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::AppState;

/// A JSON body (any content type is refused but `application/json`).
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

/// The raw body, for endpoints that verify a signature over its bytes.
#[derive(Debug, Clone)]
pub struct ApiBytes(pub Bytes);

fn too_large_or(status: StatusCode, state: &AppState, other: ApiError) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(state.settings().body_limit)
    } else {
        other
    }
}

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        match in_time(state, axum::Json::<T>::from_request(req, state)).await? {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_rejection(&rejection, state)),
        }
    }
}

/// Reads a body within the request time limit.
pub(crate) async fn in_time<T>(
    state: &AppState,
    read: impl Future<Output = T>,
) -> Result<T, ApiError> {
    let limit = state.settings().request_timeout;
    tokio::time::timeout(limit, read).await.map_err(|_| {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request body did not arrive within {} s (gateway.request_timeout_secs)",
                limit.as_secs()
            ),
        )
    })
}

fn json_rejection(rejection: &JsonRejection, state: &AppState) -> ApiError {
    let status = rejection.status();
    let message = rejection.body_text();
    let other = match rejection {
        JsonRejection::JsonDataError(_) => ApiError::unprocessable(message),
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "expected Content-Type: application/json",
        ),
        _ => ApiError::bad_request(message),
    };
    too_large_or(status, state, other)
}

impl FromRequest<AppState> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        match in_time(state, Bytes::from_request(req, state)).await? {
            Ok(bytes) => Ok(ApiBytes(bytes)),
            Err(rejection) => Err(bytes_rejection(&rejection, state)),
        }
    }
}

fn bytes_rejection(rejection: &BytesRejection, state: &AppState) -> ApiError {
    let other = ApiError::bad_request(rejection.body_text());
    too_large_or(rejection.status(), state, other)
}

/// A query string (`?limit=10`), whose rejection is a 400 [`ApiError`]
/// naming the parameter (axum's own answer is plain text).
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned> FromRequestParts<AppState> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::bad_request(rejection.body_text())),
        }
    }
}
