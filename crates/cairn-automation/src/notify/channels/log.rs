//! `type = "log"`: one structured log line, nothing else.

use async_trait::async_trait;
use cairn_core::notification::Notification;

use crate::notify::channel::{Channel, DeliveryError, Receipt};

/// Writes each notification as one `tracing` event (target
/// `cairn::notify`) and confirms it: the log is the receiver.
#[derive(Debug, Clone, Copy, Default)]
pub struct Log;

#[async_trait]
impl Channel for Log {
    fn kind(&self) -> &'static str {
        "log"
    }

    async fn deliver(&self, n: &Notification) -> Result<Receipt, DeliveryError> {
        tracing::info!(
            target: "cairn::notify",
            id = %n.id,
            user = %n.user_id,
            channel = %n.channel,
            priority = %n.priority,
            source = %n.source,
            tags = ?n.tags,
            // Debug-quoted: a line break in the text must not split the line.
            title = ?n.headline(),
            body = ?n.body,
            "notification"
        );
        Ok(Receipt {
            detail: "logged".to_string(),
        })
    }
}
