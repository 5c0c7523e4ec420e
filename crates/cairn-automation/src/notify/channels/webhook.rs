//! `type = "webhook"`: POST the notification as JSON to a URL, optionally signed.

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use cairn_core::notification::{Notification, Outcome, Priority};
use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use uuid::Uuid;

use super::http::{self, NOTIFICATION_ID_HEADER};
use crate::notify::channel::{Channel, DeliveryError, Receipt};

/// The signature header: `sha256=<lower-hex HMAC-SHA256 of the raw body>`.
pub const SIGNATURE_HEADER: &str = "X-Cairn-Signature-256";

/// `[channels.NAME]` with `type = "webhook"`.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSpec {
    /// Where to POST.
    pub url: String,
    /// Extra request headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Signs the raw body: `X-Cairn-Signature-256: sha256=<hex HMAC-SHA256>`.
    #[serde(default)]
    pub secret: Option<SecretString>,
}

/// What a webhook receiver gets, field for field: `title` is the headline
/// (outcome marker and title), `outcome` the outcome alone (`ok`,
/// `attention`, `failed` or null).
#[derive(Serialize)]
struct Payload<'a> {
    id: Uuid,
    title: String,
    outcome: Option<Outcome>,
    body: &'a str,
    priority: Priority,
    tags: &'a [String],
    data: &'a Option<serde_json::Value>,
    source: &'a str,
    created_at: DateTime<Utc>,
}

/// A webhook channel.
#[derive(Clone)]
pub struct Webhook {
    url: String,
    /// The extra headers, checked once here rather than at each delivery.
    headers: HeaderMap,
    secret: Option<SecretString>,
    http: reqwest::Client,
}

impl Webhook {
    /// A channel for `spec`; `Err` names an extra header that is not a
    /// valid HTTP header.
    pub fn new(spec: &WebhookSpec, http: reqwest::Client) -> Result<Self, String> {
        let mut headers = HeaderMap::new();
        for (name, value) in &spec.headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("headers: \"{name}\" is not a valid header name"))?;
            // The value may be a credential: name the header, not the value.
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("headers.{name}: not a valid header value"))?;
            // Extra headers are often credentials: Debug shows "Sensitive".
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        Ok(Webhook {
            url: spec.url.clone(),
            headers,
            secret: spec.secret.clone(),
            http,
        })
    }
}

impl fmt::Debug for WebhookSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values are mostly credentials: their names only.
        f.debug_struct("WebhookSpec")
            .field("host", &host_of(&self.url))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("signed", &self.secret.is_some())
            .finish_non_exhaustive()
    }
}

/// The host of a URL: the path and query may hold a token, so Debug shows
/// where, not what.
fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default()
}

impl fmt::Debug for Webhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Webhook")
            .field("host", &host_of(&self.url))
            .field("headers", &self.headers)
            .field("signed", &self.secret.is_some())
            .finish_non_exhaustive()
    }
}

/// `sha256=<lower-hex HMAC-SHA256 of body>`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts keys of any length"),
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(7 + digest.len() * 2);
    out.push_str("sha256=");
    for byte in digest {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

#[async_trait]
impl Channel for Webhook {
    fn kind(&self) -> &'static str {
        "webhook"
    }

    async fn deliver(&self, n: &Notification) -> Result<Receipt, DeliveryError> {
        let payload = Payload {
            id: n.id,
            title: n.headline(),
            outcome: Outcome::from_tags(&n.tags),
            body: &n.body,
            priority: n.priority,
            tags: &n.tags,
            data: &n.data,
            source: &n.source,
            created_at: n.created_at,
        };
        // Serialized once: the signature covers exactly the bytes sent.
        let body = serde_json::to_vec(&payload)
            .map_err(|e| DeliveryError::Permanent(format!("cannot encode the payload: {e}")))?;
        let mut headers = self.headers.clone();
        // Ours last, so an extra header cannot replace them.
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(NOTIFICATION_ID_HEADER, header_value(&n.id.to_string())?);
        if let Some(secret) = &self.secret {
            let signed = signature(secret.expose_secret(), &body);
            headers.insert(SIGNATURE_HEADER, header_value(&signed)?);
        }
        let answer = http::send(self.http.post(&self.url).headers(headers).body(body)).await?;
        http::confirm(&answer)
    }
}

/// A header value from text we made (ASCII), as a delivery error otherwise.
fn header_value(text: &str) -> Result<HeaderValue, DeliveryError> {
    HeaderValue::from_str(text)
        .map_err(|_| DeliveryError::Permanent("invalid header value".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_rfc_4231_case_2() {
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
