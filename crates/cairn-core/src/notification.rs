//! Notifications: what cairn tells the person, kept as a record before any
//! delivery is tried, with the delivery's status kept apart from whatever
//! produced it.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// How urgent a notification is; channels map it to their own notion.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Can wait.
    Low,
    /// The usual.
    #[default]
    Normal,
    /// Soon.
    High,
    /// Now.
    Urgent,
}

impl Priority {
    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Urgent => "urgent",
        }
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a priority.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown priority \"{0}\"; expected low, normal, high or urgent")]
pub struct UnknownPriority(pub String);

impl FromStr for Priority {
    type Err = UnknownPriority;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "low" => Ok(Priority::Low),
            "normal" => Ok(Priority::Normal),
            "high" => Ok(Priority::High),
            "urgent" => Ok(Priority::Urgent),
            _ => Err(UnknownPriority(s.to_string())),
        }
    }
}

/// Where a notification is in its delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Recorded; not yet confirmed by the receiver.
    Pending,
    /// The receiver confirmed it (a 2xx, an SMTP 250).
    Delivered,
    /// Every attempt failed; it is in the inbox with the reason.
    Failed,
}

impl DeliveryStatus {
    /// The lower-case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    /// Reads a stored or typed name.
    pub fn parse(name: &str) -> Option<DeliveryStatus> {
        match name {
            "pending" => Some(DeliveryStatus::Pending),
            "delivered" => Some(DeliveryStatus::Delivered),
            "failed" => Some(DeliveryStatus::Failed),
            _ => None,
        }
    }
}

/// What a producer asks to send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewNotification {
    /// Who it is for.
    pub user_id: String,
    /// The output channel's name; `None` means the configured default.
    pub channel: Option<String>,
    /// A short title.
    pub title: String,
    /// The text.
    pub body: String,
    /// How urgent.
    #[serde(default)]
    pub priority: Priority,
    /// Free labels (ntfy shows them; webhooks pass them on).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Structured data for machine receivers.
    #[serde(default)]
    pub data: Option<serde_json::Value>,
    /// What produced it: `routine:<run id>`, `heartbeat`, `watcher:<id>`,
    /// `background:<task id>`, `agent`, `cli`.
    pub source: String,
}

/// A recorded notification and its delivery state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// Unique id; every delivery carries it so receivers can drop duplicates.
    pub id: Uuid,
    /// Who it is for.
    pub user_id: String,
    /// The output channel's name (the default already applied).
    pub channel: String,
    /// A short title.
    pub title: String,
    /// The text.
    pub body: String,
    /// How urgent.
    pub priority: Priority,
    /// Free labels.
    pub tags: Vec<String>,
    /// Structured data.
    pub data: Option<serde_json::Value>,
    /// What produced it.
    pub source: String,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
    /// Delivery status.
    pub status: DeliveryStatus,
    /// Delivery attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due (pending only).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// When the receiver confirmed it.
    pub delivered_at: Option<DateTime<Utc>>,
    /// Why the last attempt failed, or why it went to the inbox.
    pub last_error: Option<String>,
    /// Whether it is in the person's inbox (its channel is the inbox, or
    /// it could not be delivered elsewhere).
    pub in_inbox: bool,
    /// When the person read it in the inbox.
    pub read_at: Option<DateTime<Utc>>,
}

/// The prefix of a channel that is a conversation: `conversation:<session id>`.
/// Such a notification waits unread in the inbox until that conversation
/// takes it (before its next model call, or as a turn of its own when the
/// person is there), so a reminder given while the person is away is kept.
pub const CONVERSATION_PREFIX: &str = "conversation:";

/// The channel that delivers into the conversation of session `session_id`.
pub fn conversation_channel(session_id: &str) -> String {
    format!("{CONVERSATION_PREFIX}{session_id}")
}

/// The session a conversation channel names; `None` for any other channel.
pub fn conversation_session(channel: &str) -> Option<&str> {
    channel
        .strip_prefix(CONVERSATION_PREFIX)
        .filter(|id| !id.trim().is_empty())
}

impl Notification {
    /// A new notification for `channel` (the default already applied),
    /// pending its first delivery attempt at `now`.
    pub fn pending(new: NewNotification, id: Uuid, channel: String, now: DateTime<Utc>) -> Self {
        Notification {
            id,
            user_id: new.user_id,
            channel,
            title: new.title,
            body: new.body,
            priority: new.priority,
            tags: new.tags,
            data: new.data,
            source: new.source,
            created_at: now,
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: Some(now),
            delivered_at: None,
            last_error: None,
            in_inbox: false,
            read_at: None,
        }
    }

    /// The text a conversation reads: a title that already carries its own
    /// bracketed header (`[WATCHER UPDATE] …`, `[REMINDER] …`) is kept as
    /// the first line; any other gets `[NOTIFICATION]` before it.
    pub fn conversation_text(&self) -> String {
        let head = if self.title.starts_with('[') {
            self.title.clone()
        } else {
            format!("[NOTIFICATION] {}", self.title)
        };
        if self.body.trim().is_empty() {
            head
        } else {
            format!("{head}\n{}", self.body)
        }
    }
}

/// What a notification reports, shown at a glance before its title by
/// every channel (the routines seed's markers). It travels as one of the
/// notification's tags (`ok`, `attention`, `failed`: the run statuses), so
/// any producer, the agent's `send_notification` included, can set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// It went well: ✅.
    Ok,
    /// Something needs the person: 🔔.
    Attention,
    /// Something failed: ❌.
    Failed,
}

impl Outcome {
    /// The marker shown before the title.
    pub fn marker(self) -> &'static str {
        match self {
            Outcome::Ok => "✅",
            Outcome::Attention => "🔔",
            Outcome::Failed => "❌",
        }
    }

    /// The tag that carries it.
    pub fn tag(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Attention => "attention",
            Outcome::Failed => "failed",
        }
    }

    /// The outcome `tags` carry; the gravest wins when there are several.
    pub fn from_tags(tags: &[String]) -> Option<Outcome> {
        [Outcome::Failed, Outcome::Attention, Outcome::Ok]
            .into_iter()
            .find(|o| tags.iter().any(|t| t.trim().eq_ignore_ascii_case(o.tag())))
    }
}

/// The title as receivers show it: the outcome's marker, a space, the
/// title (trimmed); the title alone when `tags` carry no outcome, the marker
/// alone when the title is empty. The one place a shown title is decided.
pub fn headline(title: &str, tags: &[String]) -> String {
    let title = title.trim();
    match Outcome::from_tags(tags) {
        Some(outcome) if title.is_empty() => outcome.marker().to_string(),
        Some(outcome) => format!("{} {title}", outcome.marker()),
        None => title.to_string(),
    }
}

impl Notification {
    /// The title as every channel shows it (see [`headline`]).
    pub fn headline(&self) -> String {
        headline(&self.title, &self.tags)
    }
}

/// One delivery attempt, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryAttempt {
    /// 1-based attempt number.
    pub attempt: u32,
    /// When it was made.
    pub at: DateTime<Utc>,
    /// Whether the receiver confirmed it.
    pub delivered: bool,
    /// What the receiver said (status line, SMTP reply) or why it failed.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_channels_name_their_session() {
        assert_eq!(conversation_channel("s-1"), "conversation:s-1");
        assert_eq!(conversation_session("conversation:s-1"), Some("s-1"));
        assert_eq!(conversation_session("conversation: "), None);
        assert_eq!(conversation_session("inbox"), None);
    }

    #[test]
    fn headlines_start_with_the_outcome_marker() {
        let tags = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            headline(" backup failed ", &tags(&["routine", "failed"])),
            "❌ backup failed"
        );
        assert_eq!(headline("disk", &tags(&["Attention"])), "🔔 disk");
        assert_eq!(
            headline("x: nothing to report", &tags(&["ok"])),
            "✅ x: nothing to report"
        );
        assert_eq!(headline("both", &tags(&["ok", "failed"])), "❌ both");
        assert_eq!(headline("", &tags(&["ok"])), "✅");
        assert_eq!(headline(" plain ", &tags(&["disk", "okay"])), "plain");
        for o in [Outcome::Ok, Outcome::Attention, Outcome::Failed] {
            assert_eq!(Outcome::from_tags(&tags(&[o.tag()])), Some(o));
        }
    }

    #[test]
    fn priorities_parse_and_print() {
        for p in [
            Priority::Low,
            Priority::Normal,
            Priority::High,
            Priority::Urgent,
        ] {
            assert_eq!(p.as_str().parse::<Priority>(), Ok(p));
        }
        assert_eq!(" HIGH ".parse::<Priority>(), Ok(Priority::High));
        assert_eq!(
            "loud".parse::<Priority>().unwrap_err().to_string(),
            "unknown priority \"loud\"; expected low, normal, high or urgent"
        );
    }

    #[test]
    fn statuses_round_trip() {
        for s in [
            DeliveryStatus::Pending,
            DeliveryStatus::Delivered,
            DeliveryStatus::Failed,
        ] {
            assert_eq!(DeliveryStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(DeliveryStatus::parse("sent"), None);
    }
}
