//! `type = "ntfy"`: publish to an ntfy topic.

use secrecy::SecretString;
use serde::Deserialize;

/// `[channels.NAME]` with `type = "ntfy"`.
#[derive(Debug, Clone, Deserialize)]
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
