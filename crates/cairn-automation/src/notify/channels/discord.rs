//! `type = "discord"`: a Discord webhook.

use secrecy::SecretString;
use serde::Deserialize;

/// `[channels.NAME]` with `type = "discord"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscordSpec {
    /// The webhook URL (a secret: anyone holding it can post).
    pub webhook_url: SecretString,
}
