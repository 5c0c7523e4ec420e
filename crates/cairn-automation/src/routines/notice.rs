//! What a finished run tells the person, decided in one place for every
//! channel: whether the routine's notify settings want it, the outcome
//! (shown as ✅ / 🔔 / ❌ before the title, see
//! [`cairn_core::notification::headline`]), the title, the text and the
//! priority.
//!
//! - A run without a notice notifies when `notify.on_success`,
//!   `on_attention` or `on_failure` asks for its status; its title names the
//!   routine and what happened: `NAME failed`, `NAME needs attention`,
//!   `NAME: TOOL ran`, `NAME: nothing to report`.
//! - A notice (a reminder, a watcher's update, the heartbeat's alarm) is
//!   always delivered, under its own title (the routine's name when it has
//!   none); it is for the person's attention unless the run failed.
//! - A failure is high priority; everything else normal.

use cairn_core::notification::{Outcome, Priority};
use cairn_core::routine::{RoutineAction, RoutineSpec, RunStatus};
use uuid::Uuid;

use super::action::ActionOutcome;

/// The notification a run's end calls for, before it is addressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunNotice {
    /// What happened, at a glance (becomes the notification's outcome tag).
    pub outcome: Outcome,
    /// The title, without the marker (channels add it).
    pub title: String,
    /// The text.
    pub body: String,
    /// How urgent.
    pub priority: Priority,
}

/// What run `run_id` of `spec`, which ended as `ended`, tells the person;
/// `None` when nothing (its status is not one the notify settings want).
pub fn run_notice(spec: &RoutineSpec, run_id: Uuid, ended: &ActionOutcome) -> Option<RunNotice> {
    let name = &spec.name;
    let failed = ended.status == RunStatus::Failed;
    let (outcome, title, body) = match &ended.notice {
        Some(notice) => (
            if failed {
                Outcome::Failed
            } else {
                Outcome::Attention
            },
            notice.title.clone().unwrap_or_else(|| name.clone()),
            notice.body.clone(),
        ),
        None => {
            let (wanted, outcome, title) = match ended.status {
                RunStatus::Failed => (
                    spec.notify.on_failure,
                    Outcome::Failed,
                    format!("{name} failed"),
                ),
                RunStatus::Attention => (
                    spec.notify.on_attention,
                    Outcome::Attention,
                    format!("{name} needs attention"),
                ),
                RunStatus::Ok => (
                    spec.notify.on_success,
                    Outcome::Ok,
                    match &spec.action {
                        RoutineAction::ToolCall { tool, .. } => format!("{name}: {tool} ran"),
                        _ => format!("{name}: nothing to report"),
                    },
                ),
                _ => (false, Outcome::Failed, String::new()),
            };
            if !wanted {
                return None;
            }
            let body = ended
                .summary
                .clone()
                .unwrap_or_else(|| format!("run {run_id} ended {}", ended.status));
            (outcome, title, body)
        }
    };
    Some(RunNotice {
        outcome,
        title,
        body,
        priority: if failed {
            Priority::High
        } else {
            Priority::Normal
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routines::action::Notice;
    use cairn_core::notification::headline;

    fn spec(yaml: &str) -> RoutineSpec {
        RoutineSpec::parse(yaml, cairn_core::routine::SpecFormat::Yaml).unwrap()
    }

    fn shown(notice: &RunNotice) -> String {
        headline(&notice.title, &[notice.outcome.tag().to_string()])
    }

    const TOOL: &str = "name: disk\ntrigger: {type: manual}\naction: {type: tool_call, tool: df}\n\
                        notify: {on_success: true, on_attention: true, on_failure: true}\n";

    #[test]
    fn each_status_has_its_marker_words_and_priority() {
        let s = spec(TOOL);
        let id = Uuid::nil();
        let ok = run_notice(&s, id, &ActionOutcome::new(RunStatus::Ok, "42%")).unwrap();
        assert_eq!(
            (shown(&ok), ok.body.as_str()),
            ("✅ disk: df ran".into(), "42%")
        );
        let mut attention = ActionOutcome::new(RunStatus::Attention, "93%");
        attention.summary = None;
        let a = run_notice(&s, id, &attention).unwrap();
        assert_eq!(shown(&a), "🔔 disk needs attention");
        assert_eq!(a.body, format!("run {id} ended attention"));
        let f = run_notice(&s, id, &ActionOutcome::failed("df: not found")).unwrap();
        assert_eq!(shown(&f), "❌ disk failed");
        assert_eq!((f.priority, a.priority), (Priority::High, Priority::Normal));
    }

    #[test]
    fn the_notify_settings_choose_which_statuses_tell() {
        let quiet =
            spec("name: q\ntrigger: {type: manual}\naction: {type: lightweight, prompt: p}\n");
        let id = Uuid::nil();
        // The defaults: attention and failure, not success.
        assert!(run_notice(&quiet, id, &ActionOutcome::new(RunStatus::Ok, "x")).is_none());
        assert!(run_notice(&quiet, id, &ActionOutcome::failed("x")).is_some());
        let s = spec(TOOL);
        for status in [
            RunStatus::Interrupted,
            RunStatus::Skipped,
            RunStatus::Running,
        ] {
            assert!(run_notice(&s, id, &ActionOutcome::new(status, "x")).is_none());
        }
    }

    #[test]
    fn notices_always_tell_and_ask_for_attention_unless_failed() {
        let quiet = spec(
            "name: tea\ntrigger: {type: manual}\naction: {type: notification, message: m}\n\
                          notify: {on_success: false, on_attention: false, on_failure: false}\n",
        );
        let mut ended = ActionOutcome::new(RunStatus::Ok, "m");
        ended.notice = Some(Notice {
            title: Some("[REMINDER] tea".into()),
            body: "tea".into(),
        });
        let n = run_notice(&quiet, Uuid::nil(), &ended).unwrap();
        assert_eq!(
            (shown(&n), n.body.as_str()),
            ("🔔 [REMINDER] tea".into(), "tea")
        );
        ended.status = RunStatus::Failed;
        ended.notice = Some(Notice {
            title: None,
            body: "down".into(),
        });
        let n = run_notice(&quiet, Uuid::nil(), &ended).unwrap();
        assert_eq!((shown(&n), n.priority), ("❌ tea".into(), Priority::High));
    }
}
