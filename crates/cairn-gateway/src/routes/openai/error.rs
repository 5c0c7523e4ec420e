//! Errors of the `/v1` API in OpenAI's shape,
//! `{"error":{"message","type","param","code"}}`, from every layer: the
//! handlers answer in it, and [`openai_errors`] rewrites the gateway's own
//! error bodies (authentication, the request parser, unknown routes) on `/v1`
//! paths, so an SDK always finds `type`.

use axum::Json;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::error::ApiError;

/// An error body in OpenAI's shape.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiErrorBody {
    /// The error.
    pub error: OpenAiErrorDetail,
}

/// What an OpenAI-shaped error says.
#[derive(Debug, Serialize, ToSchema)]
pub struct OpenAiErrorDetail {
    /// Human-readable message.
    pub message: String,
    /// `invalid_request_error`, `authentication_error`, `permission_error`,
    /// `not_found_error`, `rate_limit_error` or `server_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault, when known.
    pub param: Option<String>,
    /// Stable machine-readable code (`model_not_found`, `unauthorized`, …).
    pub code: Option<String>,
}

/// OpenAI's error type for an HTTP status.
pub fn kind_for(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

/// An error of this API.
#[derive(Debug)]
pub(crate) struct OpenAiError {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) param: Option<String>,
}

impl OpenAiError {
    /// 400 `invalid_request_error` about `param`.
    pub(crate) fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request",
            message: message.into(),
            param: Some(param.into()),
        }
    }

    /// An error with this status and code.
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            param: None,
        }
    }

    /// The JSON body.
    pub(crate) fn body(&self) -> Value {
        json!({"error": {
            "message": self.message, "type": kind_for(self.status),
            "param": self.param, "code": self.code,
        }})
    }
}

impl From<ApiError> for OpenAiError {
    fn from(e: ApiError) -> Self {
        Self::new(e.status, e.code, e.message)
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

/// Largest error body rewritten (the gateway's are a few hundred bytes).
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Rewrites the gateway's `{"error":{"code","message"}}` answers on `/v1`
/// paths into OpenAI's shape; other answers pass untouched.
pub async fn openai_errors(req: Request, next: Next) -> Response {
    let v1 = req.uri().path() == "/v1" || req.uri().path().starts_with("/v1/");
    let response = next.run(req).await;
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !v1 || !(status.is_client_error() || status.is_server_error()) || !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, ERROR_BODY_LIMIT).await else {
        return (
            status,
            Json(OpenAiError::new(status, "internal", "the error could not be read").body()),
        )
            .into_response();
    };
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let error = &value["error"];
    if error.get("type").is_some() || !error.is_object() {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let message = error["message"].as_str().unwrap_or_default().to_string();
    let rewritten = json!({"error": {
        "message": message, "type": kind_for(status),
        "param": param_of(&message), "code": error["code"],
    }});
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(rewritten.to_string()))
}

/// The field a parser message names: axum's `…: messages[0].role: invalid
/// type …` (serde_path_to_error's path), `…: missing field `model` …`, or both.
fn param_of(message: &str) -> Option<String> {
    let is_path = |p: &&str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']'))
    };
    let path = message.split(": ").skip(1).find(is_path);
    let missing = message
        .split("missing field `")
        .nth(1)
        .and_then(|rest| rest.split('`').next());
    match (path, missing) {
        (Some(path), Some(field)) => Some(format!("{path}.{field}")),
        (Some(path), None) => Some(path.to_string()),
        (None, Some(field)) => Some(field.to_string()),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_are_read_from_parser_messages() {
        assert_eq!(
            param_of("Failed to deserialize the JSON body into the target type: missing field `messages` at line 1 column 18").as_deref(),
            Some("messages")
        );
        assert_eq!(
            param_of("Failed to deserialize the JSON body into the target type: messages[0].role: invalid type").as_deref(),
            Some("messages[0].role")
        );
        assert_eq!(
            param_of("the bearer token is unknown, revoked or expired"),
            None
        );
        assert_eq!(
            kind_for(StatusCode::UNPROCESSABLE_ENTITY),
            "invalid_request_error"
        );
        assert_eq!(kind_for(StatusCode::BAD_GATEWAY), "server_error");
    }
}
