//! Images on top of the body limit, and their number. A `/v1/chat/completions` request or a
//! WebSocket chat message may carry images as `data:` URLs, far larger than
//! any text: such a body may be longer than `gateway.body_limit_bytes` by up
//! to `gateway.image_limit_bytes`, as long as what is left once its image
//! `data:` URLs are set aside still fits the body limit. Text stays bounded
//! as before (and with it what reaches the model); only what is read grows,
//! by the images' allowance. However small, at most `gateway.max_images`
//! images go to the model in one request.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use cairn_core::config::GatewayConfig;
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;
use crate::state::AppState;

/// The most bytes read of a body or message that may carry images.
pub fn read_limit(settings: &GatewayConfig) -> usize {
    settings.body_limit.saturating_add(settings.image_limit)
}

/// Whether `len` bytes, `images` of them image `data:` URLs, may be
/// accepted; the refusal names both settings.
pub fn check(
    settings: &GatewayConfig,
    what: &str,
    len: usize,
    images: usize,
) -> Result<(), String> {
    let rest = len.saturating_sub(images);
    if len <= read_limit(settings) && rest <= settings.body_limit {
        return Ok(());
    }
    Err(format!(
        "the {what} is {len} bytes, {rest} of them besides images, more than the limit of {} (gateway.body_limit_bytes); \
         images sent as data: URLs may add up to {} bytes (gateway.image_limit_bytes)",
        settings.body_limit, settings.image_limit
    ))
}

/// Bytes of the image `data:` URLs among `urls`.
fn data_urls<'a>(urls: impl Iterator<Item = &'a Value>) -> usize {
    urls.filter_map(Value::as_str)
        .filter(|url| url.starts_with("data:image/"))
        .map(str::len)
        .sum()
}

/// The `image_url` parts of a chat completion request's messages.
fn image_parts(body: &Value) -> impl Iterator<Item = &Value> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|part| part["type"] == "image_url")
}

/// Bytes of the image `data:` URLs of a chat completion request: its
/// messages' `image_url` parts (`{"url": …}` or a bare string).
pub fn in_completion(body: &Value) -> usize {
    data_urls(image_parts(body).map(|part| match &part["image_url"] {
        Value::Object(object) => object.get("url").unwrap_or(&Value::Null),
        other => other,
    }))
}

/// The refusal of a chat completion request with more images (of any
/// kind, over all its messages: they all go to the model together) than
/// `gateway.max_images`.
pub fn too_many_in_completion(settings: &GatewayConfig, body: &Value) -> Option<String> {
    cairn_core::image::too_many_images(image_parts(body).count(), settings.max_images)
}

/// Bytes of the image `data:` URLs of a WebSocket message frame (`images`).
pub fn in_frame(frame: &Value) -> usize {
    data_urls(frame["images"].as_array().into_iter().flatten())
}

/// A JSON body that may carry images: read up to [`read_limit`], then held
/// to the body limit with its image `data:` URLs ([`in_completion`]) set
/// aside. Rejections are [`ApiError`]s, as [`crate::extract::ApiJson`]'s.
#[derive(Debug, Clone)]
pub struct JsonWithImages<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonWithImages<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let settings = state.settings();
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|mime| {
                let mime = mime.trim().to_ascii_lowercase();
                mime == "application/json" || mime.ends_with("+json")
            });
        if !json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "expected Content-Type: application/json",
            ));
        }
        let limit = read_limit(settings);
        let bytes = crate::extract::in_time(state, read_at_most(req, limit))
            .await??
            .ok_or_else(|| {
                too_large(format!(
                    "the request body is larger than {limit} bytes: gateway.body_limit_bytes ({}) and gateway.image_limit_bytes ({}) together",
                    settings.body_limit, settings.image_limit
                ))
            })?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::bad_request(format!("the body is not JSON: {e}")))?;
        check(settings, "request body", bytes.len(), in_completion(&value)).map_err(too_large)?;
        // Counted before any image is decoded, fetched or stored.
        if let Some(refusal) = too_many_in_completion(settings, &value) {
            return Err(ApiError::bad_request(refusal));
        }
        serde_json::from_value(value)
            .map(JsonWithImages)
            .map_err(|e| ApiError::unprocessable(format!("the body is not a valid request: {e}")))
    }
}

fn too_large(message: String) -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
}

/// The body, or `None` once it passes `max` bytes (the rest is not read).
async fn read_at_most(req: Request, max: usize) -> Result<Option<Bytes>, ApiError> {
    let mut stream = req.into_body().into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("reading the body failed: {e}")))?;
        if bytes.len() + chunk.len() > max {
            return Ok(None);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Some(Bytes::from(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_image_data_urls_count_as_images() {
        let body = json!({"messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "data:image/png;base64,AAAA"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": "data:image/gif;base64,BB"},
                {"type": "image_url", "image_url": {"url": "https://example.org/x.png"}}
            ]},
            {"role": "user", "content": "data:image/png;base64,CCCC"}
        ]});
        assert_eq!(in_completion(&body), 26 + 24);
        let frame = json!({"type": "message", "content": "data:image/png;base64,AAAA",
            "images": ["data:image/png;base64,AAAA", "data:text/plain;base64,AAAA"]});
        assert_eq!(in_frame(&frame), 26);
    }
}
