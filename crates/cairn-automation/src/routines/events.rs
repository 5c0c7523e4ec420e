//! cairn's own events, which `system_event` routines fire on.

use std::collections::BTreeMap;

use cairn_core::routine::Trigger;

/// A routine run ended; fields `routine`, `status`, `run_id`.
pub const ROUTINE_FINISHED: &str = "routine.finished";
/// A background job ended; fields `job_id`, `status`, `title`.
pub const JOB_FINISHED: &str = "job.finished";
/// A notification was given up on and left in the inbox; fields `id`, `channel`, `error`.
pub const NOTIFICATION_FAILED: &str = "notification.failed";
/// The daemon started; field `owner`.
pub const DAEMON_STARTED: &str = "daemon.started";

/// Longest chain of system-event firings: a routine fired by the end of a
/// routine fired by the end of a routine… stops here, so routines that
/// watch each other cannot loop.
pub const MAX_EVENT_DEPTH: u32 = 3;

/// Something cairn reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemEvent {
    /// The event's name, such as [`ROUTINE_FINISHED`].
    pub name: String,
    /// Its fields, compared exactly with a routine's filters.
    pub fields: BTreeMap<String, String>,
    /// How many system-event firings led to it (0 for events from outside the chain).
    pub depth: u32,
}

impl SystemEvent {
    /// An event with these fields, at depth 0.
    pub fn new<K: Into<String>, V: Into<String>>(
        name: &str,
        fields: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            name: name.to_string(),
            fields: fields
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            depth: 0,
        }
    }

    /// `job.finished` for a job that ended.
    pub fn job_finished(job: &cairn_core::job::JobRecord) -> Self {
        Self::new(
            JOB_FINISHED,
            [
                ("job_id", job.id.to_string()),
                ("status", job.state.as_str().to_string()),
                ("title", job.title.clone()),
            ],
        )
    }

    /// `notification.failed` for a notification given up on.
    pub fn notification_failed(given_up: &crate::notify::GivenUp) -> Self {
        Self::new(
            NOTIFICATION_FAILED,
            [
                ("id", given_up.id.to_string()),
                ("channel", given_up.channel.clone()),
                ("error", given_up.error.clone()),
            ],
        )
    }

    /// Whether a routine with this trigger fires on the event.
    pub fn fires(&self, trigger: &Trigger) -> bool {
        match trigger {
            Trigger::SystemEvent { event, filters } => {
                *event == self.name
                    && filters
                        .iter()
                        .all(|(k, v)| self.fields.get(k).is_some_and(|f| f == v))
            }
            _ => false,
        }
    }

    /// The event as the JSON payload handed to the action.
    pub fn payload(&self) -> serde_json::Value {
        serde_json::json!({ "event": self.name, "fields": self.fields })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_must_all_match_exactly() {
        let ev = SystemEvent::new(
            ROUTINE_FINISHED,
            [("routine", "backup"), ("status", "failed")],
        );
        let trigger = |filters: &[(&str, &str)]| Trigger::SystemEvent {
            event: ROUTINE_FINISHED.into(),
            filters: filters
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        assert!(ev.fires(&trigger(&[])));
        assert!(ev.fires(&trigger(&[("status", "failed")])));
        assert!(!ev.fires(&trigger(&[("status", "ok")])));
        assert!(!ev.fires(&trigger(&[("missing", "x")])));
        assert!(!ev.fires(&Trigger::SystemEvent {
            event: JOB_FINISHED.into(),
            filters: BTreeMap::new()
        }));
    }
}
