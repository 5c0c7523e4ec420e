//! The output channel interface.

use async_trait::async_trait;
use cairn_core::notification::Notification;

/// What a receiver said when it took a notification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The confirmation as received: `HTTP 200`, `250 2.0.0 Ok: queued`.
    pub detail: String,
}

/// Why a delivery did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// It may work later (a 5xx, a 429, a timeout, a refused connection).
    #[error("{0}")]
    Retryable(String),
    /// It may work later, and the receiver said not before this long (a
    /// 429's `Retry-After`, Telegram's `retry_after`): the next attempt waits
    /// at least that.
    #[error("{0}")]
    RetryAfter(String, std::time::Duration),
    /// It will not work without a change of configuration (a 4xx such as a
    /// wrong token or an unknown chat); the notification goes to the inbox.
    #[error("{0}")]
    Permanent(String),
}

/// An output channel: delivers one notification and says whether the
/// receiver confirmed it. Implementations never log or return secrets
/// (tokens, passwords, signed URLs) in their errors.
#[async_trait]
pub trait Channel: Send + Sync {
    /// The channel's type (`webhook`, `slack`, `email`, …).
    fn kind(&self) -> &'static str;

    /// Delivers `notification`; `Ok` only when the receiver confirmed it.
    async fn deliver(&self, notification: &Notification) -> Result<Receipt, DeliveryError>;
}
