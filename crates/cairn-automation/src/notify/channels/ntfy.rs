//! `type = "ntfy"`: publish to an ntfy topic.

use async_trait::async_trait;
use cairn_core::notification::{Notification, Priority};
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::http::{self, NOTIFICATION_ID_HEADER};
use super::text::fit_bytes;

/// Most bytes of message ntfy takes as text (its server's default; more
/// becomes an attachment, or a 413 where attachments are off).
pub const MESSAGE_LIMIT: usize = 4_096;
use crate::notify::channel::{Channel, DeliveryError, Receipt};

/// `[channels.NAME]` with `type = "ntfy"`.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NtfySpec {
    /// The ntfy server.
    #[serde(default = "default_server")]
    pub server: String,
    /// The topic.
    pub topic: String,
    /// An access token, for protected topics.
    #[serde(default)]
    pub token: Option<SecretString>,
}

fn default_server() -> String {
    "https://ntfy.sh".to_string()
}

// Anyone who knows a topic can read it and post to it: Debug never shows one.
impl std::fmt::Debug for NtfySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtfySpec")
            .field("server", &self.server)
            .field("token", &self.token.is_some())
            .finish_non_exhaustive()
    }
}

/// An ntfy channel: the body is the message (cut to [`MESSAGE_LIMIT`]
/// bytes), the rest goes in headers.
#[derive(Clone)]
pub struct Ntfy {
    /// `{server}/{topic}`.
    url: Url,
    token: Option<SecretString>,
    http: reqwest::Client,
}

impl std::fmt::Debug for Ntfy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ntfy")
            .field("host", &self.url.host_str().unwrap_or_default())
            .field("token", &self.token.is_some())
            .finish_non_exhaustive()
    }
}

impl Ntfy {
    /// A channel for `spec`; `Err` when the server is not a URL a topic can
    /// be appended to.
    pub fn new(spec: &NtfySpec, http: reqwest::Client) -> Result<Self, String> {
        let mut url = Url::parse(&spec.server).map_err(|e| format!("server: not a URL: {e}"))?;
        url.path_segments_mut()
            .map_err(|()| "server: cannot take a topic path".to_string())?
            .pop_if_empty()
            .push(&spec.topic);
        Ok(Ntfy {
            url,
            token: spec.token.clone(),
            http,
        })
    }

    /// The publish URL, `{server}/{topic}`.
    pub fn url(&self) -> &str {
        self.url.as_str()
    }
}

/// ntfy's priority scale: 1 (min) to 5 (max).
pub fn priority_number(priority: Priority) -> u8 {
    match priority {
        Priority::Low => 2,
        Priority::Normal => 3,
        Priority::High => 4,
        Priority::Urgent => 5,
    }
}

/// A header value ntfy decodes: ASCII as is, anything else as an RFC 2047
/// encoded word (ntfy reads those), with line breaks flattened since a
/// header is one line.
pub fn header_text(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.is_ascii() {
        line
    } else {
        format!("=?UTF-8?B?{}?=", base64(line.as_bytes()))
    }
}

/// Standard base64 with padding; small enough not to warrant a crate.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn header_value(text: &str) -> Result<HeaderValue, DeliveryError> {
    HeaderValue::from_str(text)
        .map_err(|_| DeliveryError::Permanent("invalid header value".to_string()))
}

#[async_trait]
impl Channel for Ntfy {
    fn kind(&self) -> &'static str {
        "ntfy"
    }

    async fn deliver(&self, n: &Notification) -> Result<Receipt, DeliveryError> {
        let mut headers = HeaderMap::new();
        let headline = n.headline();
        if !headline.is_empty() {
            headers.insert("Title", header_value(&header_text(&headline))?);
        }
        headers.insert(
            "Priority",
            HeaderValue::from(u16::from(priority_number(n.priority))),
        );
        if !n.tags.is_empty() {
            headers.insert("Tags", header_value(&header_text(&n.tags.join(",")))?);
        }
        if let Some(token) = &self.token {
            let mut value = header_value(&format!("Bearer {}", token.expose_secret()))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        headers.insert(NOTIFICATION_ID_HEADER, header_value(&n.id.to_string())?);
        let request = self
            .http
            .post(self.url.clone())
            .headers(headers)
            .body(fit_bytes(&n.body, MESSAGE_LIMIT));
        let answer = http::send(request).await?;
        http::confirm(&answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn header_text_encodes_only_what_needs_it() {
        assert_eq!(header_text("Disk\nfull"), "Disk full");
        assert_eq!(header_text("Été"), "=?UTF-8?B?w4l0w6k=?=");
    }
}
