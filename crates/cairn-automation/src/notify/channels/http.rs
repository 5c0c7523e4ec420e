//! What the HTTP channels share: one request timeout, the id header, and
//! the mapping of answers and transport failures to delivery outcomes.

use std::time::Duration;

use reqwest::{RequestBuilder, StatusCode};

use crate::notify::channel::{DeliveryError, Receipt};

use super::text::excerpt;

/// How long one HTTP delivery may take, connection included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The header every HTTP delivery carries so receivers can drop duplicates
/// (delivery is at-least-once).
pub const NOTIFICATION_ID_HEADER: &str = "X-Cairn-Notification-Id";

/// An answer from the receiver, body read as text.
pub(crate) struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body, or why it could not be read.
    pub body: Result<String, String>,
    /// `Retry-After` in seconds, when the receiver sent one.
    pub retry_after: Option<Duration>,
}

/// Sends `request` with the timeout. Transport failures are mapped here,
/// with the URL stripped: it may hold a token or a signed webhook path.
pub(crate) async fn send(request: RequestBuilder) -> Result<Answer, DeliveryError> {
    let response = request
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(transport_error)?;
    let status = response.status();
    // Only the delay-seconds form; an HTTP date is left to the backoff.
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = response.text().await.map_err(|e| describe(e.without_url()));
    Ok(Answer {
        status,
        body,
        retry_after,
    })
}

/// 2xx confirms; anything else is an error by [`status_error`].
pub(crate) fn confirm(answer: &Answer) -> Result<Receipt, DeliveryError> {
    if answer.status.is_success() {
        Ok(Receipt {
            detail: format!("HTTP {}", answer.status.as_u16()),
        })
    } else {
        let error = status_error(answer.status, answer.body.as_deref().unwrap_or(""));
        Err(match (error, answer.retry_after) {
            (DeliveryError::Retryable(message), Some(wait)) => {
                DeliveryError::RetryAfter(message, wait)
            }
            (error, _) => error,
        })
    }
}

/// A refusal: `HTTP 404: <excerpt of the body>`. 408, 429 and 5xx may pass
/// later; any other status needs a change of settings.
pub(crate) fn status_error(status: StatusCode, body: &str) -> DeliveryError {
    let excerpt = excerpt(body);
    let message = if excerpt.is_empty() {
        format!("HTTP {}", status.as_u16())
    } else {
        format!("HTTP {}: {excerpt}", status.as_u16())
    };
    if is_retryable(status) {
        DeliveryError::Retryable(message)
    } else {
        DeliveryError::Permanent(message)
    }
}

/// Whether a non-2xx status may pass later.
pub(crate) fn is_retryable(status: StatusCode) -> bool {
    status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
        || status.is_server_error()
}

/// A request that did not get an answer. Only a request that could not be
/// built (a bad header value) is permanent; connections and timeouts retry.
fn transport_error(error: reqwest::Error) -> DeliveryError {
    let error = error.without_url();
    if error.is_builder() {
        DeliveryError::Permanent(describe(error))
    } else if error.is_timeout() {
        DeliveryError::Retryable(format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()))
    } else {
        DeliveryError::Retryable(describe(error))
    }
}

/// The error and its causes on one line (the URL already stripped).
fn describe(error: reqwest::Error) -> String {
    cairn_core::text::error_chain(&error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_outcomes() {
        for code in [408, 429, 500, 502, 503] {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            assert!(
                matches!(status_error(status, ""), DeliveryError::Retryable(_)),
                "{code}"
            );
        }
        for code in [400, 401, 403, 404, 410, 413] {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            assert!(
                matches!(status_error(status, ""), DeliveryError::Permanent(_)),
                "{code}"
            );
        }
        assert_eq!(
            status_error(StatusCode::NOT_FOUND, "  no such\n hook ").to_string(),
            "HTTP 404: no such hook"
        );
    }
}
