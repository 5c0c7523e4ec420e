//! HTTP plumbing shared by both clients: error classification, `Retry-After`,
//! key scrubbing, bounded body reads with timeouts.

use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use reqwest::header::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use serde_json::Value;

use crate::error::LlmError;

/// Largest whole response body we accept.
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Error messages are cut to this many characters (HTML error pages can be huge).
const MAX_MESSAGE_CHARS: usize = 600;

/// Per-client context for building errors: provider name, timeout, and the
/// key to scrub from anything we report.
#[derive(Clone)]
pub(crate) struct Wire {
    pub provider: String,
    pub timeout: Option<Duration>,
    pub api_key: Option<SecretString>,
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire")
            .field("provider", &self.provider)
            .field("timeout", &self.timeout)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

impl Wire {
    /// Replaces every occurrence of the API key with `[REDACTED]` and bounds the length.
    pub fn scrub(&self, message: &str) -> String {
        let mut text = message.trim().to_owned();
        if let Some(key) = &self.api_key {
            let key = key.expose_secret();
            if key.len() >= 4 {
                text = text.replace(key, "[REDACTED]");
            }
        }
        if text.chars().count() > MAX_MESSAGE_CHARS {
            text = text.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…";
        }
        text
    }

    /// Maps a reqwest failure to `Timeout` or `Transport`, without the URL.
    pub fn transport_error(&self, err: reqwest::Error) -> LlmError {
        if err.is_timeout() {
            return self.timeout_error();
        }
        // The URL may carry credentials (user:pass@host, ?key=), so it is dropped.
        let err = err.without_url();
        let mut message = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(inner) = source {
            message.push_str(": ");
            message.push_str(&inner.to_string());
            source = inner.source();
        }
        LlmError::Transport {
            provider: self.provider.clone(),
            message: self.scrub(&message),
        }
    }

    /// The timeout error for this client.
    pub fn timeout_error(&self) -> LlmError {
        LlmError::Timeout {
            provider: self.provider.clone(),
            after: self.timeout,
        }
    }

    /// Runs `fut` under the client timeout, if any.
    pub async fn with_timeout<T>(
        &self,
        fut: impl Future<Output = Result<T, LlmError>>,
    ) -> Result<T, LlmError> {
        match self.timeout {
            Some(limit) => tokio::time::timeout(limit, fut)
                .await
                .unwrap_or_else(|_| Err(self.timeout_error())),
            None => fut.await,
        }
    }

    /// Sends the request and waits for the response head, under the timeout.
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, LlmError> {
        self.with_timeout(async { request.send().await.map_err(|e| self.transport_error(e)) })
            .await
    }

    /// Reads a whole body (bounded), under the timeout.
    pub async fn read_body(&self, response: reqwest::Response) -> Result<Bytes, LlmError> {
        self.with_timeout(async {
            let mut body = Vec::new();
            let mut chunks = response.bytes_stream();
            while let Some(chunk) = chunks.next().await {
                let chunk = chunk.map_err(|e| self.transport_error(e))?;
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(LlmError::bad_response(
                        &self.provider,
                        format!("response body larger than {MAX_BODY_BYTES} bytes"),
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Bytes::from(body))
        })
        .await
    }

    /// Turns a non-2xx response into the matching typed error.
    pub async fn error_from_response(&self, response: reqwest::Response) -> LlmError {
        let status = response.status().as_u16();
        let retry_after = parse_retry_after(response.headers(), Utc::now());
        let body = match self.read_body(response).await {
            Ok(body) => String::from_utf8_lossy(&body).into_owned(),
            Err(_) => String::new(),
        };
        self.classify(status, retry_after, &body)
    }

    /// Classifies an error by HTTP status and body text.
    pub fn classify(&self, status: u16, retry_after: Option<Duration>, body: &str) -> LlmError {
        let provider = self.provider.clone();
        let detail = ErrorDetail::from_body(body);
        let message = self.scrub(&detail.describe(status));
        match status {
            401 | 403 => LlmError::Auth {
                provider,
                status,
                message,
            },
            429 => LlmError::RateLimited {
                provider,
                retry_after,
                message,
            },
            _ if detail.is_context_length() => {
                LlmError::ContextLengthExceeded { provider, message }
            }
            408 => LlmError::Timeout {
                provider,
                after: None,
            },
            500..=599 => LlmError::Server {
                provider,
                status,
                message,
            },
            _ => LlmError::BadRequest {
                provider,
                status,
                message,
            },
        }
    }

    /// Classifies an error object found inside a 2xx body or a stream event.
    pub fn classify_embedded(&self, error: &Value) -> LlmError {
        let body = serde_json::json!({ "error": error }).to_string();
        let detail = ErrorDetail::from_body(&body);
        let status = error
            .get("code")
            .and_then(Value::as_u64)
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| (400..600).contains(c))
            .unwrap_or_else(|| detail.status_hint());
        self.classify(status, None, &body)
    }
}

/// The useful parts of a provider error body, in any of the common shapes.
#[derive(Debug, Default)]
struct ErrorDetail {
    message: String,
    code: String,
    kind: String,
}

impl ErrorDetail {
    fn from_body(body: &str) -> Self {
        let Ok(value) = serde_json::from_str::<Value>(body) else {
            return Self {
                message: body.to_owned(),
                ..Self::default()
            };
        };
        let text = |v: Option<&Value>| match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        // OpenAI / Anthropic / llama.cpp: {"error": {...}}; Ollama: {"error": "..."};
        // vLLM: {"object": "error", "message": ..., "type": ...}.
        let inner = match value.get("error") {
            Some(Value::String(message)) => {
                return Self {
                    message: message.clone(),
                    ..Self::default()
                };
            }
            Some(obj @ Value::Object(_)) => obj,
            _ => &value,
        };
        let message = match inner.get("message").or_else(|| inner.get("detail")) {
            Some(Value::String(s)) => s.clone(),
            Some(other) if !other.is_null() => other.to_string(),
            _ => body.to_owned(),
        };
        Self {
            message,
            code: text(inner.get("code")),
            kind: text(inner.get("type")),
        }
    }

    fn describe(&self, status: u16) -> String {
        let message = if self.message.trim().is_empty() {
            format!("HTTP {status} with an empty body")
        } else {
            self.message.clone()
        };
        match (self.kind.is_empty(), self.code.is_empty()) {
            (false, _) => format!("{message} ({})", self.kind),
            (true, false) => format!("{message} ({})", self.code),
            (true, true) => message,
        }
    }

    fn is_context_length(&self) -> bool {
        is_context_length_message(&format!("{} {} {}", self.code, self.kind, self.message))
    }

    fn status_hint(&self) -> u16 {
        let kind = self.kind.to_ascii_lowercase();
        if kind.contains("rate_limit") {
            429
        } else if kind.contains("auth") || kind.contains("permission") {
            401
        } else if kind.contains("invalid_request") || self.is_context_length() {
            400
        } else {
            500
        }
    }
}

/// Whether an error text says the prompt does not fit the model's context.
///
/// Covers OpenAI (`context_length_exceeded`, "maximum context length"),
/// Anthropic ("prompt is too long"), llama.cpp ("exceeds the available context
/// size", `exceed_context_size_error`), vLLM ("maximum context length", "is too
/// long and exceeds limit"), Ollama ("exceeded max context length"), LM Studio
/// and others ("context length", "context window" with "exceed"/"too long").
pub fn is_context_length_message(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    const PHRASES: [&str; 9] = [
        "context_length_exceeded",
        "exceed_context_size",
        "maximum context length",
        "prompt is too long",
        "exceeds the available context size",
        "exceeded max context length",
        "context length exceeded",
        "too long and exceeds limit",
        "input is too long",
    ];
    if PHRASES.iter().any(|p| text.contains(p)) {
        return true;
    }
    let about_context = [
        "context length",
        "context window",
        "context size",
        "context limit",
    ]
    .iter()
    .any(|p| text.contains(p));
    about_context
        && [
            "exceed",
            "too long",
            "too large",
            "overflow",
            "longer than",
            "greater than",
        ]
        .iter()
        .any(|p| text.contains(p))
}

/// Reads `Retry-After` (seconds or HTTP date) or `retry-after-ms`.
pub fn parse_retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    parse_retry_after_value(headers.get("retry-after")?.to_str().ok()?, now)
}

/// Parses one `Retry-After` value: delta seconds or an HTTP date.
pub fn parse_retry_after_value(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let when = DateTime::parse_from_rfc2822(value).ok()?;
    let delta = when.with_timezone(&Utc) - now;
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn wire() -> Wire {
        Wire {
            provider: "test".into(),
            timeout: Some(Duration::from_secs(5)),
            api_key: Some(SecretString::from("sk-secret-123")),
        }
    }

    #[test]
    fn retry_after_seconds_date_and_ms() {
        let now = DateTime::parse_from_rfc3339("2015-10-21T07:28:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            parse_retry_after_value("7", now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after_value("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after_value("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after_value("soon", now), None);
        assert_eq!(parse_retry_after_value("-3", now), None);
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("9"));
        headers.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(
            parse_retry_after(&headers, now),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn status_classification() {
        let w = wire();
        assert!(matches!(
            w.classify(401, None, "{}"),
            LlmError::Auth { status: 401, .. }
        ));
        assert!(matches!(w.classify(403, None, ""), LlmError::Auth { .. }));
        assert!(matches!(
            w.classify(429, None, ""),
            LlmError::RateLimited { .. }
        ));
        assert!(matches!(
            w.classify(503, None, "down"),
            LlmError::Server { status: 503, .. }
        ));
        assert!(matches!(w.classify(529, None, ""), LlmError::Server { .. }));
        assert!(matches!(
            w.classify(408, None, ""),
            LlmError::Timeout { .. }
        ));
        assert!(matches!(
            w.classify(404, None, "no model"),
            LlmError::BadRequest { .. }
        ));
    }

    #[test]
    fn context_length_phrasings_of_each_server() {
        let bodies = [
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}"#,
            r#"{"error":"prompt too long; exceeded max context length by 512 tokens"}"#,
            r#"{"error":"Trying to keep the first 9000 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough."}"#,
        ];
        for body in bodies {
            let err = wire().classify(400, None, body);
            assert!(
                matches!(err, LlmError::ContextLengthExceeded { .. }),
                "{body}: {err}"
            );
        }
        // Some servers report it as a 500.
        assert!(matches!(
            wire().classify(500, None, bodies[4]),
            LlmError::ContextLengthExceeded { .. }
        ));
        assert!(!is_context_length_message("invalid value for temperature"));
    }

    #[test]
    fn messages_are_scrubbed_and_bounded() {
        let err = wire().classify(
            401,
            None,
            r#"{"error":{"message":"bad key sk-secret-123"}}"#,
        );
        let text = err.to_string();
        assert!(!text.contains("sk-secret-123"), "{text}");
        assert!(text.contains("[REDACTED]"));
        let long = "x".repeat(5000);
        assert!(wire().classify(500, None, &long).to_string().len() < 1000);
        assert!(
            wire()
                .classify(500, None, "")
                .to_string()
                .contains("empty body")
        );
        assert!(!format!("{:?}", wire()).contains("sk-secret"));
    }

    #[test]
    fn embedded_errors_use_their_code_or_type() {
        let w = wire();
        let err = w.classify_embedded(&serde_json::json!({"code": 502, "message": "upstream"}));
        assert!(matches!(err, LlmError::Server { status: 502, .. }));
        let err = w.classify_embedded(
            &serde_json::json!({"type": "overloaded_error", "message": "Overloaded"}),
        );
        assert!(matches!(err, LlmError::Server { status: 500, .. }));
        let err = w
            .classify_embedded(&serde_json::json!({"type": "rate_limit_error", "message": "slow"}));
        assert!(matches!(err, LlmError::RateLimited { .. }));
    }
}
