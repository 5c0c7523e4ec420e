//! `type = "telegram"`: the Bot API's `sendMessage`.

use std::fmt;

use std::time::Duration;

use async_trait::async_trait;
use cairn_core::notification::Notification;
use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use super::http::{self, NOTIFICATION_ID_HEADER};
use super::text::fit;
use crate::notify::channel::{Channel, DeliveryError, Receipt};

/// Telegram refuses a message whose text is longer than this.
pub const TEXT_LIMIT: usize = 4_096;

/// `[channels.NAME]` with `type = "telegram"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramSpec {
    /// The bot's token.
    pub bot_token: SecretString,
    /// The chat to write to.
    pub chat_id: String,
    /// The Bot API's address (tests point it at a local server).
    #[serde(default = "default_api_url")]
    pub api_url: String,
    /// Whether the bot also receives messages (long polling `getUpdates`).
    #[serde(default)]
    pub inbound: bool,
    /// Telegram user ids that may talk to the agent (strings or numbers).
    #[serde(default, deserialize_with = "super::user_ids")]
    pub allowed_users: Vec<String>,
}

fn default_api_url() -> String {
    "https://api.telegram.org".to_string()
}

/// A Telegram bot channel. The token is part of the request path, so every
/// error is stripped of the URL and scrubbed of the token.
#[derive(Clone)]
pub struct Telegram {
    bot_token: SecretString,
    chat_id: String,
    api_url: String,
    http: reqwest::Client,
}

impl fmt::Debug for Telegram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telegram")
            .field("chat_id", &self.chat_id)
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

/// The part of the Bot API's answer that says whether it worked.
#[derive(Deserialize)]
struct ApiAnswer {
    ok: bool,
    #[serde(default)]
    error_code: Option<u16>,
    #[serde(default)]
    description: Option<String>,
    /// On a 429: `{"retry_after": seconds}`.
    #[serde(default)]
    parameters: Option<ApiParameters>,
}

#[derive(Debug, Deserialize)]
struct ApiParameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

impl Telegram {
    /// A channel for `spec`.
    pub fn new(spec: &TelegramSpec, http: reqwest::Client) -> Self {
        Telegram {
            bot_token: spec.bot_token.clone(),
            chat_id: spec.chat_id.clone(),
            api_url: spec.api_url.trim_end_matches('/').to_string(),
            http,
        }
    }

    /// Replaces the token wherever a receiver or a library echoed it.
    fn scrub(&self, error: DeliveryError) -> DeliveryError {
        let token = self.bot_token.expose_secret();
        if token.is_empty() {
            return error;
        }
        match error {
            DeliveryError::Retryable(m) => {
                DeliveryError::Retryable(m.replace(token, "<bot token>"))
            }
            DeliveryError::Permanent(m) => {
                DeliveryError::Permanent(m.replace(token, "<bot token>"))
            }
            DeliveryError::RetryAfter(m, wait) => {
                DeliveryError::RetryAfter(m.replace(token, "<bot token>"), wait)
            }
        }
    }

    async fn send(&self, n: &Notification) -> Result<Receipt, DeliveryError> {
        let url = format!(
            "{}/bot{}/sendMessage",
            self.api_url,
            self.bot_token.expose_secret()
        );
        let request = self
            .http
            .post(url)
            .header(NOTIFICATION_ID_HEADER, n.id.to_string())
            .json(&json!({ "chat_id": self.chat_id, "text": message_text(n) }));
        let answer = http::send(request).await?;
        let body = answer.body.as_deref().unwrap_or("");
        let parsed = serde_json::from_str::<ApiAnswer>(body);
        if !answer.status.is_success() {
            // Flood control says how long to wait, in the body.
            if let Ok(ApiAnswer {
                parameters:
                    Some(ApiParameters {
                        retry_after: Some(secs),
                    }),
                ..
            }) = &parsed
            {
                let message = format!(
                    "Telegram answered HTTP {}: too many requests",
                    answer.status.as_u16()
                );
                return Err(DeliveryError::RetryAfter(
                    message,
                    Duration::from_secs(*secs),
                ));
            }
            return Err(http::status_error(answer.status, body));
        }
        // A 2xx is not enough: the Bot API confirms with "ok": true.
        match parsed {
            Ok(ApiAnswer { ok: true, .. }) => Ok(Receipt {
                detail: format!("HTTP {}", answer.status.as_u16()),
            }),
            Ok(ApiAnswer {
                ok: false,
                error_code,
                description,
                ..
            }) => {
                let message = format!(
                    "Telegram answered HTTP {} with ok=false: {}",
                    answer.status.as_u16(),
                    description.as_deref().unwrap_or("no description")
                );
                // Its error_code is an HTTP status; without one, try again.
                match error_code.and_then(|c| StatusCode::from_u16(c).ok()) {
                    Some(code) if !http::is_retryable(code) => {
                        Err(DeliveryError::Permanent(message))
                    }
                    _ => Err(DeliveryError::Retryable(message)),
                }
            }
            Err(_) => Err(DeliveryError::Retryable(format!(
                "HTTP {} without the Bot API's confirmation: {}",
                answer.status.as_u16(),
                super::text::excerpt(body)
            ))),
        }
    }
}

/// The message text: the headline (outcome marker and title), a blank
/// line, the body; plain text (no `parse_mode`), so nothing needs escaping.
/// Cut to [`TEXT_LIMIT`].
pub fn message_text(n: &Notification) -> String {
    let headline = n.headline();
    let title = headline.as_str();
    let text = match (title.is_empty(), n.body.is_empty()) {
        (true, _) => n.body.clone(),
        (false, true) => title.to_string(),
        (false, false) => format!("{title}\n\n{}", n.body),
    };
    fit(&text, TEXT_LIMIT)
}

#[async_trait]
impl Channel for Telegram {
    fn kind(&self) -> &'static str {
        "telegram"
    }

    async fn deliver(&self, n: &Notification) -> Result<Receipt, DeliveryError> {
        self.send(n).await.map_err(|e| self.scrub(e))
    }
}
