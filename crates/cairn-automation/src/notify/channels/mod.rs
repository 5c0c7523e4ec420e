//! The output channels, one module per service. Each module has the
//! channel's settings (`…Spec`, what a `[channels.NAME]` table holds) and
//! its delivery; [`build`] turns a spec into a ready channel.

pub mod discord;
pub mod email;
mod http;
pub mod log;
pub mod ntfy;
pub mod slack;
pub mod telegram;
mod text;
pub mod webhook;
pub mod whatsapp;

use std::sync::Arc;

use async_trait::async_trait;
use cairn_core::notification::Notification;

use super::channel::{Channel, DeliveryError, Receipt};
use super::config::ChannelSpec;

pub use http::{NOTIFICATION_ID_HEADER, REQUEST_TIMEOUT};

use serde::Deserialize;

/// User ids as strings, whether written `"123"` or `123`.
pub(crate) fn user_ids<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Text(String),
        Number(i64),
    }
    let ids = Vec::<Id>::deserialize(d)?;
    Ok(ids
        .into_iter()
        .map(|id| match id {
            Id::Text(t) => t.trim().to_string(),
            Id::Number(n) => n.to_string(),
        })
        .collect())
}

/// Builds the channel a spec describes. HTTP channels share `http` (one
/// connection pool for the process). `Ok(None)` for `inbox`, which the
/// router handles itself; `Err` names what in the spec cannot work (a
/// header that is not a header, a server URL that cannot take a topic).
pub fn build(
    spec: &ChannelSpec,
    http: &reqwest::Client,
) -> Result<Option<Arc<dyn Channel>>, String> {
    let channel: Arc<dyn Channel> = match spec {
        ChannelSpec::Inbox {} => return Ok(None),
        ChannelSpec::Log {} => Arc::new(log::Log),
        ChannelSpec::Webhook(s) => Arc::new(webhook::Webhook::new(s, http.clone())?),
        ChannelSpec::Slack(s) => match &s.webhook_url {
            Some(url) => Arc::new(slack::Slack::new(url, http.clone())),
            None => Arc::new(receives_only("slack", "webhook_url")),
        },
        ChannelSpec::Discord(s) => match &s.webhook_url {
            Some(url) => Arc::new(discord::Discord::new(url, http.clone())),
            None => Arc::new(receives_only("discord", "webhook_url")),
        },
        ChannelSpec::WhatsApp(_) => Arc::new(receives_only("whatsapp", "")),
        ChannelSpec::Telegram(s) => Arc::new(telegram::Telegram::new(s, http.clone())),
        ChannelSpec::Ntfy(s) => Arc::new(ntfy::Ntfy::new(s, http.clone())?),
        ChannelSpec::Email(s) => Arc::new(email::Email::new(s)?),
    };
    Ok(Some(channel))
}

/// A channel whose bot only answers chats: a notification sent to it
/// fails for good saying so (and waits in the inbox).
fn receives_only(kind: &'static str, needed: &str) -> Unavailable {
    let how = if needed.is_empty() {
        String::new()
    } else {
        format!("; set {needed} to post notifications")
    };
    Unavailable::new(
        kind,
        format!("this {kind} channel only answers the chats people start with its bot{how}"),
    )
}

/// A configured channel that cannot deliver (its table names an unset
/// `${VAR}`): every delivery fails for good with `reason`, so the
/// notification waits in the inbox saying why.
pub struct Unavailable {
    kind: &'static str,
    reason: String,
}

impl Unavailable {
    /// A channel of type `kind` failing with `reason` (file, line, key, variable).
    pub fn new(kind: &'static str, reason: String) -> Self {
        Self { kind, reason }
    }
}

#[async_trait]
impl Channel for Unavailable {
    fn kind(&self) -> &'static str {
        self.kind
    }

    async fn deliver(&self, _notification: &Notification) -> Result<Receipt, DeliveryError> {
        Err(DeliveryError::Permanent(self.reason.clone()))
    }
}
