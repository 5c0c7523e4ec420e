//! What makes a routine fire.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// When a routine fires. Written in files as `trigger: { type: cron, schedule: "…" }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Trigger {
    /// A recurring schedule: a cron expression or a human phrase ("every weekday at 9am").
    Cron {
        /// The schedule text as written.
        schedule: String,
    },
    /// A single fire at one instant: `in 20m`, `tomorrow at 9am`, an ISO 8601 time.
    Once {
        /// The time text as written (resolved to an instant when the routine is created).
        at: String,
    },
    /// A chat message whose text matches a regular expression.
    Event {
        /// Only messages from this channel (any channel when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        channel: Option<String>,
        /// Regular expression matched against the message text.
        pattern: String,
    },
    /// Something cairn itself reports: a job finishing, a routine failing, the daemon starting.
    SystemEvent {
        /// The event name, such as `job.completed` or `routine.failed`.
        event: String,
        /// Fields the event must carry with these exact values.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        filters: BTreeMap<String, String>,
    },
    /// An HTTP POST to `/hooks/routine/{path or id}`, optionally HMAC-signed.
    Webhook {
        /// Path suffix (defaults to the routine id).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        /// HMAC-SHA256 secret, usually a `${ENV_VAR}` reference rather than the secret itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        secret: Option<String>,
    },
    /// Fires only when asked: `cairn routine fire`, the API or a tool call.
    Manual,
}

impl Trigger {
    /// The trigger's type name as written in files (`cron`, `webhook`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Trigger::Cron { .. } => "cron",
            Trigger::Once { .. } => "once",
            Trigger::Event { .. } => "event",
            Trigger::SystemEvent { .. } => "system_event",
            Trigger::Webhook { .. } => "webhook",
            Trigger::Manual => "manual",
        }
    }
}
