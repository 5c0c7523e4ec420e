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

use std::sync::Arc;

use async_trait::async_trait;
use cairn_core::notification::Notification;

use super::channel::{Channel, DeliveryError, Receipt};
use super::config::ChannelSpec;

pub use http::{NOTIFICATION_ID_HEADER, REQUEST_TIMEOUT};

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
        ChannelSpec::Slack(s) => Arc::new(slack::Slack::new(s, http.clone())),
        ChannelSpec::Discord(s) => Arc::new(discord::Discord::new(s, http.clone())),
        ChannelSpec::Telegram(s) => Arc::new(telegram::Telegram::new(s, http.clone())),
        ChannelSpec::Ntfy(s) => Arc::new(ntfy::Ntfy::new(s, http.clone())?),
        ChannelSpec::Email(s) => Arc::new(email::Email::new(s)?),
    };
    Ok(Some(channel))
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
