//! `type = "webhook"`: POST the notification as JSON to a URL, optionally signed.

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde::Deserialize;

/// `[channels.NAME]` with `type = "webhook"`.
#[derive(Debug, Clone, Deserialize)]
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
