//! `type = "slack"`: a Slack incoming webhook.

use async_trait::async_trait;
use cairn_core::notification::Notification;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::http::{self, NOTIFICATION_ID_HEADER};
use super::text::fit;
use crate::notify::channel::{Channel, DeliveryError, Receipt};

/// Slack truncates a message's `text` beyond this many characters.
pub const TEXT_LIMIT: usize = 40_000;

/// `[channels.NAME]` with `type = "slack"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSpec {
    /// The incoming-webhook URL (a secret: anyone holding it can post).
    pub webhook_url: SecretString,
}

/// A Slack incoming-webhook channel.
#[derive(Debug, Clone)]
pub struct Slack {
    webhook_url: SecretString,
    http: reqwest::Client,
}

impl Slack {
    /// A channel for `spec`.
    pub fn new(spec: &SlackSpec, http: reqwest::Client) -> Self {
        Slack {
            webhook_url: spec.webhook_url.clone(),
            http,
        }
    }
}

/// The message's `text`: the headline (outcome marker and title) in bold,
/// then the body. Slack reads `&`, `<` and `>` as markup, so they are
/// escaped as Slack asks.
pub fn message_text(n: &Notification) -> String {
    let title = escape(&n.headline());
    let body = escape(&n.body);
    let text = match (title.is_empty(), body.is_empty()) {
        (true, _) => body,
        (false, true) => format!("*{title}*"),
        (false, false) => format!("*{title}*\n{body}"),
    };
    fit(&text, TEXT_LIMIT)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[async_trait]
impl Channel for Slack {
    fn kind(&self) -> &'static str {
        "slack"
    }

    async fn deliver(&self, n: &Notification) -> Result<Receipt, DeliveryError> {
        let request = self
            .http
            .post(self.webhook_url.expose_secret())
            .header(NOTIFICATION_ID_HEADER, n.id.to_string())
            .json(&json!({ "text": message_text(n) }));
        let answer = http::send(request).await?;
        http::confirm(&answer)
    }
}
