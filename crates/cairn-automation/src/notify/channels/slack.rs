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

/// `[channels.NAME]` with `type = "slack"`: notifications through an
/// incoming webhook, messages received through the bot (`inbound = true`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSpec {
    /// The incoming-webhook URL notifications are posted to (a secret:
    /// anyone holding it can post). Without it the channel only answers
    /// chats.
    #[serde(default)]
    pub webhook_url: Option<SecretString>,
    /// The bot's token (`xoxb-…`) for the Web API.
    #[serde(default)]
    pub bot_token: Option<SecretString>,
    /// The app-level token (`xapp-…`) that opens the Socket Mode connection.
    #[serde(default)]
    pub app_token: Option<SecretString>,
    /// Whether the bot receives messages.
    #[serde(default)]
    pub inbound: bool,
    /// Slack user ids (`U0123ABCD`) that may talk to the agent.
    #[serde(default, deserialize_with = "super::user_ids")]
    pub allowed_users: Vec<String>,
    /// The API's address (tests point it at a local server).
    #[serde(default = "default_api_url")]
    pub api_url: String,
}

fn default_api_url() -> String {
    "https://slack.com/api/".to_string()
}

/// A Slack incoming-webhook channel.
#[derive(Debug, Clone)]
pub struct Slack {
    webhook_url: SecretString,
    http: reqwest::Client,
}

impl Slack {
    /// A channel posting to the incoming webhook `webhook_url`.
    pub fn new(webhook_url: &SecretString, http: reqwest::Client) -> Self {
        Slack {
            webhook_url: webhook_url.clone(),
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
