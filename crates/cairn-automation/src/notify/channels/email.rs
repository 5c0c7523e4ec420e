//! `type = "email"`: SMTP with STARTTLS, TLS, or (for local relays) neither.

use secrecy::SecretString;
use serde::Deserialize;

/// How the SMTP connection is secured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpSecurity {
    /// Plain connection upgraded with STARTTLS (port 587).
    #[default]
    Starttls,
    /// TLS from the first byte (port 465).
    Tls,
    /// No encryption: only for a relay on this machine.
    None,
}

/// One address or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Recipients {
    /// `to = "me@example.org"`.
    One(String),
    /// `to = ["me@example.org", "ops@example.org"]`.
    Many(Vec<String>),
}

impl Recipients {
    /// The addresses.
    pub fn list(&self) -> Vec<&str> {
        match self {
            Recipients::One(one) => vec![one.as_str()],
            Recipients::Many(many) => many.iter().map(String::as_str).collect(),
        }
    }
}

/// `[channels.NAME]` with `type = "email"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmailSpec {
    /// SMTP server host.
    pub host: String,
    /// SMTP port; by default 587 (STARTTLS), 465 (TLS) or 25 (none).
    #[serde(default)]
    pub port: Option<u16>,
    /// How the connection is secured.
    #[serde(default)]
    pub security: SmtpSecurity,
    /// Login name, if the server wants one.
    #[serde(default)]
    pub username: Option<String>,
    /// Password, with `username`.
    #[serde(default)]
    pub password: Option<SecretString>,
    /// The sender address.
    pub from: String,
    /// The recipients.
    pub to: Recipients,
}
