//! `type = "slack"`: a Slack incoming webhook.

use secrecy::SecretString;
use serde::Deserialize;

/// `[channels.NAME]` with `type = "slack"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackSpec {
    /// The incoming-webhook URL (a secret: anyone holding it can post).
    pub webhook_url: SecretString,
}
