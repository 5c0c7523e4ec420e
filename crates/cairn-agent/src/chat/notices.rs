//! Notices for a conversation: finished background tasks (in the
//! execution-primitives format) and notifications addressed to it (channel
//! `conversation:<session id>`: reminders, watcher updates, routines
//! scheduled from the chat).
//!
//! A notice is taken from the store and marked delivered (or read) in one
//! statement ([`cairn_store::Store::take_undelivered_tasks`],
//! [`cairn_store::Store::take_conversation_notices`]), so it reaches the
//! conversation once: before the next model call of a running turn, or as a
//! turn of its own when the session is idle (`cairn chat` and the WebSocket
//! poll for them). Until then a notification waits unread in the inbox.

use cairn_store::{BackgroundTask, Store, StoreError, TaskStatus};
use chrono::{DateTime, Utc};

/// Most characters of a result a notice carries; `background_result` has the rest.
pub const NOTICE_RESULT_CHARS: usize = 2_000;

/// The notice for a finished task:
///
/// ```text
/// [BACKGROUND TASK COMPLETED] task_id=bg-a1b2c3d4, tool=http_get, elapsed=45.2s
/// Result: {"success": true, ...}
/// ```
///
/// or `[BACKGROUND TASK FAILED] …` with `Error: …`. Results over
/// [`NOTICE_RESULT_CHARS`] are cut, with the total size and a pointer to
/// `background_result`.
pub fn task_notice(task: &BackgroundTask) -> String {
    let elapsed = task
        .finished_at
        .map(|end| (end - task.started_at).num_milliseconds().max(0))
        .unwrap_or(0);
    // Tenths of a second, rounded, without float formatting surprises.
    let tenths = (elapsed + 50) / 100;
    let head = |what: &str| {
        format!(
            "[BACKGROUND TASK {what}] task_id={}, tool={}, elapsed={}.{}s",
            task.id,
            task.tool,
            tenths / 10,
            tenths % 10
        )
    };
    match task.status {
        TaskStatus::Completed => {
            let text = task
                .result
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_else(|| "null".into());
            let total = text.chars().count();
            if total > NOTICE_RESULT_CHARS {
                let cut: String = text.chars().take(NOTICE_RESULT_CHARS).collect();
                format!(
                    "{}\nResult (truncated): {cut}... ({total} chars total)\nUse background_result(task_id=\"{}\") to get the full output.",
                    head("COMPLETED"),
                    task.id
                )
            } else {
                format!("{}\nResult: {text}", head("COMPLETED"))
            }
        }
        _ => {
            let error = task.error.as_deref().unwrap_or("unknown error");
            let error: String = error.chars().take(NOTICE_RESULT_CHARS).collect();
            format!("{}\nError: {error}", head("FAILED"))
        }
    }
}

/// The notices of several tasks, one block each.
pub fn notices_text(tasks: &[BackgroundTask]) -> String {
    tasks
        .iter()
        .map(task_notice)
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Whether anything waits for session `session_id`'s conversation: two cheap reads.
pub async fn waiting(store: &Store, session_id: &str) -> Result<bool, StoreError> {
    Ok(store.has_undelivered_tasks(session_id).await?
        || store.has_conversation_notices(session_id).await?)
}

/// Takes everything waiting for session `session_id`'s conversation, as one
/// text (tasks first, then notifications, each oldest first); `None` when
/// nothing waits. What was taken before a failed read is still returned, so
/// nothing taken is lost.
pub async fn take(
    store: &Store,
    session_id: &str,
    now: DateTime<Utc>,
) -> Result<Option<String>, StoreError> {
    let tasks = store.take_undelivered_tasks(session_id, now).await?;
    let mut blocks: Vec<String> = tasks.iter().map(task_notice).collect();
    match store.take_conversation_notices(session_id, now).await {
        Ok(notes) => blocks.extend(notes.iter().map(|n| n.conversation_text())),
        Err(e) if !blocks.is_empty() => {
            tracing::warn!(error = %e, "could not take the conversation's notifications; they wait for the next look");
        }
        Err(e) => return Err(e),
    }
    Ok((!blocks.is_empty()).then(|| blocks.join("\n\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone, Utc};
    use serde_json::json;

    fn task(status: TaskStatus) -> BackgroundTask {
        let start = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
        BackgroundTask {
            id: "bg-a1b2c3d4".into(),
            owner: "p".into(),
            lease_until: None,
            session_id: "s".into(),
            thread_id: None,
            tool: "http_get".into(),
            params: json!({}),
            status,
            result: Some(json!({"success": true, "data": "ok"})),
            error: Some("Connection refused".into()),
            started_at: start,
            finished_at: Some(start + Duration::milliseconds(45_240)),
            delivered_at: None,
        }
    }

    #[test]
    fn completed_and_failed_notices_follow_the_seed_format() {
        assert_eq!(
            task_notice(&task(TaskStatus::Completed)),
            "[BACKGROUND TASK COMPLETED] task_id=bg-a1b2c3d4, tool=http_get, elapsed=45.2s\nResult: {\"data\":\"ok\",\"success\":true}"
        );
        assert_eq!(
            task_notice(&task(TaskStatus::Failed)),
            "[BACKGROUND TASK FAILED] task_id=bg-a1b2c3d4, tool=http_get, elapsed=45.2s\nError: Connection refused"
        );
    }

    #[test]
    fn large_results_are_cut_at_2000_chars_with_a_pointer() {
        let mut t = task(TaskStatus::Completed);
        t.result = Some(json!("é".repeat(5_000)));
        let notice = task_notice(&t);
        assert!(notice.contains("Result (truncated): "));
        assert!(notice.contains("... (5002 chars total)"));
        assert!(
            notice.ends_with(
                "Use background_result(task_id=\"bg-a1b2c3d4\") to get the full output."
            )
        );
        let cut = notice.split("Result (truncated): ").nth(1).unwrap();
        assert_eq!(
            cut.split("...").next().unwrap().chars().count(),
            NOTICE_RESULT_CHARS
        );
    }
}
