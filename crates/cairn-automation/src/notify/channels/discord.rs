//! `type = "discord"`: a Discord webhook.

use async_trait::async_trait;
use cairn_core::notification::Notification;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::http::{self, NOTIFICATION_ID_HEADER};
use super::text::fit;
use crate::notify::channel::{Channel, DeliveryError, Receipt};

/// Discord refuses a message whose `content` is longer than this.
pub const CONTENT_LIMIT: usize = 2_000;

/// `[channels.NAME]` with `type = "discord"`: notifications through an
/// incoming webhook, messages received through the bot (`inbound = true`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordSpec {
    /// The webhook URL notifications are posted to (a secret:
    /// anyone holding it can post). Without it the channel only answers
    /// chats.
    #[serde(default)]
    pub webhook_url: Option<SecretString>,
    /// The bot's token, for the gateway and the REST API.
    #[serde(default)]
    pub bot_token: Option<SecretString>,
    /// Whether the bot receives messages.
    #[serde(default)]
    pub inbound: bool,
    /// Discord user ids (snowflakes) that may talk to the agent.
    #[serde(default, deserialize_with = "super::user_ids")]
    pub allowed_users: Vec<String>,
    /// The API's address (tests point it at a local server).
    #[serde(default = "default_api_url")]
    pub api_url: String,
}

fn default_api_url() -> String {
    "https://discord.com/api/v10".to_string()
}

/// A Discord webhook channel.
#[derive(Debug, Clone)]
pub struct Discord {
    webhook_url: SecretString,
    http: reqwest::Client,
}

impl Discord {
    /// A channel posting to the webhook `webhook_url`.
    pub fn new(webhook_url: &SecretString, http: reqwest::Client) -> Self {
        Discord {
            webhook_url: webhook_url.clone(),
            http,
        }
    }
}

/// The message's `content`: the headline (outcome marker and title) in
/// bold, then the body, cut with an ellipsis to [`CONTENT_LIMIT`].
pub fn message_content(n: &Notification) -> String {
    let headline = n.headline();
    let title = headline.as_str();
    let text = match (title.is_empty(), n.body.is_empty()) {
        (true, _) => n.body.clone(),
        (false, true) => format!("**{title}**"),
        (false, false) => format!("**{title}**\n{}", n.body),
    };
    fit(&text, CONTENT_LIMIT)
}

#[async_trait]
impl Channel for Discord {
    fn kind(&self) -> &'static str {
        "discord"
    }

    async fn deliver(&self, n: &Notification) -> Result<Receipt, DeliveryError> {
        // No mentions: a routine's output must not ping @everyone.
        let request = self
            .http
            .post(self.webhook_url.expose_secret())
            .header(NOTIFICATION_ID_HEADER, n.id.to_string())
            .json(&json!({
                "content": message_content(n),
                "allowed_mentions": { "parse": [] },
            }));
        let answer = http::send(request).await?;
        http::confirm(&answer)
    }
}
