//! `send_notification`: the agent tells the person something through an
//! output channel, via the notification router. An unknown channel puts the
//! notification in the inbox, and the result says so; a configured channel
//! that keeps failing ends in the inbox too, after the router's retries.

use std::sync::LazyLock;

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::args::nonblank;
use cairn_agent::tools::{
    CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema,
};
use cairn_core::notification::{DeliveryStatus, NewNotification, Priority};
use cairn_core::text::error_chain;
use serde_json::{Value, json};

use crate::notify::Notifier;

/// Longest message accepted.
pub const MAX_MESSAGE_CHARS: usize = 10_000;

/// `send_notification`.
pub struct SendNotificationTool {
    notifier: Notifier,
    user_id: String,
}

impl SendNotificationTool {
    /// The tool, sending for `user_id` through `notifier`.
    pub fn new(notifier: Notifier, user_id: impl Into<String>) -> Self {
        Self {
            notifier,
            user_id: user_id.into(),
        }
    }
}

fn priority_of(args: &Value) -> Result<Priority, ToolError> {
    match args.get("priority").and_then(Value::as_str) {
        None => Ok(Priority::Normal),
        // The seed's name for the top level.
        Some(p) if p.eq_ignore_ascii_case("critical") => Ok(Priority::Urgent),
        Some(p) => p
            .parse()
            .map_err(|e: cairn_core::notification::UnknownPriority| {
                ToolError::InvalidArguments(e.to_string())
            }),
    }
}

/// Read-only: it only reaches the person, as the agent's replies do.
static SEND_NOTIFICATION: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        "send_notification",
        RiskLevel::ReadOnly,
        "Notify the person through an output channel; unknown or failing channels fall back to the inbox.",
    )
    .params(schema::object(
        json!({
            "channel": {"type": "string"},
            "message": {"type": "string"},
            "title": {"type": "string"},
            "priority": {"enum": ["low", "normal", "high", "critical"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "structured_data": {"type": "object"}
        }),
        &["channel", "message"],
    ))
    .not_reusable()
});

#[async_trait]
impl Tool for SendNotificationTool {
    fn spec(&self) -> &ToolSpec {
        &SEND_NOTIFICATION
    }

    async fn execute(&self, args: Value, ctx: &ToolContext, _: &Authorized) -> CallOutcome {
        let channel = nonblank(&args, "channel")?;
        let message = nonblank(&args, "message")?;
        if message.chars().count() > MAX_MESSAGE_CHARS {
            return Err(ToolError::InvalidArguments(format!(
                "`message` is longer than {MAX_MESSAGE_CHARS} characters"
            )));
        }
        let tags = match args.get("tags") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|t| {
                    t.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| ToolError::InvalidArguments("`tags` must be strings".into()))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(ToolError::InvalidArguments(
                    "`tags` must be an array".into(),
                ));
            }
        };
        let data = match args.get("structured_data") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(m)) if !m.is_empty() => Some(v.clone()),
            Some(Value::Object(_)) => None,
            Some(_) => {
                return Err(ToolError::InvalidArguments(
                    "`structured_data` must be an object".into(),
                ));
            }
        };
        let new = NewNotification {
            user_id: self.user_id.clone(),
            channel: Some(channel.to_string()),
            title: args
                .get("title")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            body: message.to_string(),
            priority: priority_of(&args)?,
            tags,
            data,
            source: "agent".into(),
        };
        let n = self
            .notifier
            .send(new, ctx.now())
            .await
            .map_err(|e| ToolError::Failed(error_chain(&e)))?;
        let view = match (n.status, n.in_inbox) {
            (DeliveryStatus::Failed, true) => json!({
                "notification_id": n.id,
                "channel": n.channel,
                "status": "inbox",
                "fallback": "inbox",
                "note": n.last_error,
            }),
            (_, true) => {
                json!({"notification_id": n.id, "channel": n.channel, "status": "delivered", "note": "kept in the inbox"})
            }
            _ => json!({
                "notification_id": n.id,
                "channel": n.channel,
                "status": "pending",
                "note": "queued for delivery; if the channel keeps failing it goes to the inbox",
            }),
        };
        ToolOutput::json(&view)
    }
}
