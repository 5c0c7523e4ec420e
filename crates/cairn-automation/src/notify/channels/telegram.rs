//! `type = "telegram"`: the Bot API's `sendMessage`.

use secrecy::SecretString;
use serde::Deserialize;

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
}

fn default_api_url() -> String {
    "https://api.telegram.org".to_string()
}
