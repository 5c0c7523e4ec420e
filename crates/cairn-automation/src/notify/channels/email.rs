//! `type = "email"`: SMTP with STARTTLS, TLS, or (for local relays) neither.

use std::fmt;

use async_trait::async_trait;
use cairn_core::notification::{Notification, Priority};
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::http::REQUEST_TIMEOUT;
use crate::notify::channel::{Channel, DeliveryError, Receipt};

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

impl SmtpSecurity {
    /// The usual port for this kind of connection.
    pub fn default_port(self) -> u16 {
        match self {
            SmtpSecurity::Starttls => 587,
            SmtpSecurity::Tls => 465,
            SmtpSecurity::None => 25,
        }
    }
}

/// An SMTP channel. The connection settings are checked once here; each
/// delivery opens its own connection (notifications are rare).
#[derive(Clone)]
pub struct Email {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    to: Vec<Mailbox>,
    /// `host:port`, for errors and Debug (never the login).
    server: String,
}

impl fmt::Debug for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Email")
            .field("server", &self.server)
            .field("from", &self.from.to_string())
            .field("to", &self.to.len())
            .finish_non_exhaustive()
    }
}

impl Email {
    /// A channel for `spec`; `Err` names the field that cannot work (an
    /// address that does not parse, a host TLS cannot be set up for).
    pub fn new(spec: &EmailSpec) -> Result<Self, String> {
        let from: Mailbox = spec
            .from
            .parse()
            .map_err(|e| format!("from: \"{}\" is not an address: {e}", spec.from))?;
        let to = spec
            .to
            .list()
            .into_iter()
            .map(|a| {
                a.parse::<Mailbox>()
                    .map_err(|e| format!("to: \"{a}\" is not an address: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if to.is_empty() {
            return Err("to: needs at least one address".to_string());
        }
        let port = spec.port.unwrap_or(spec.security.default_port());
        let builder = match spec.security {
            SmtpSecurity::Starttls => {
                AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&spec.host)
                    .map_err(|e| format!("host: cannot set up STARTTLS: {e}"))?
            }
            SmtpSecurity::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&spec.host)
                .map_err(|e| format!("host: cannot set up TLS: {e}"))?,
            SmtpSecurity::None => {
                AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&spec.host)
            }
        };
        let mut builder = builder.port(port).timeout(Some(REQUEST_TIMEOUT));
        if let Some(username) = &spec.username {
            let password = spec
                .password
                .as_ref()
                .map(|p| p.expose_secret().to_string())
                .unwrap_or_default();
            builder = builder.credentials(Credentials::new(username.clone(), password));
        }
        Ok(Email {
            transport: builder.build(),
            from,
            to,
            server: format!("{}:{port}", spec.host),
        })
    }

    /// The message for `n`: subject = headline (outcome marker and title), plain-text body, and
    /// `Message-ID: <id@cairn>` so receivers can drop duplicates.
    pub fn message(&self, n: &Notification) -> Result<Message, DeliveryError> {
        let mut builder = Message::builder()
            .from(self.from.clone())
            .subject(n.headline())
            .message_id(Some(format!("<{}@cairn>", n.id)))
            .raw_header(HeaderValue::new(
                HeaderName::new_from_ascii_str("X-Priority"),
                x_priority(n.priority).to_string(),
            ))
            .header(ContentType::TEXT_PLAIN);
        for to in &self.to {
            builder = builder.to(to.clone());
        }
        builder
            .body(n.body.clone())
            .map_err(|e| DeliveryError::Permanent(format!("cannot build the message: {e}")))
    }
}

/// `X-Priority`: 1 (highest) to 5 (lowest), as mail clients read it.
pub fn x_priority(priority: Priority) -> &'static str {
    match priority {
        Priority::Urgent => "1 (Highest)",
        Priority::High => "2 (High)",
        Priority::Normal => "3 (Normal)",
        Priority::Low => "5 (Lowest)",
    }
}

#[async_trait]
impl Channel for Email {
    fn kind(&self) -> &'static str {
        "email"
    }

    async fn deliver(&self, n: &Notification) -> Result<Receipt, DeliveryError> {
        let message = self.message(n)?;
        // lettre returns Ok only for the server's positive reply to the data.
        match self.transport.send(message).await {
            Ok(response) => Ok(Receipt {
                detail: format!(
                    "{} {}",
                    response.code(),
                    response.message().collect::<Vec<_>>().join(" ")
                )
                .trim_end()
                .to_string(),
            }),
            Err(e) => {
                let message = format!("SMTP {}: {e}", self.server);
                // A 5xx reply will not change by itself; 4xx, connection,
                // TLS and timeouts may.
                if e.is_permanent() {
                    Err(DeliveryError::Permanent(message))
                } else {
                    Err(DeliveryError::Retryable(message))
                }
            }
        }
    }
}
