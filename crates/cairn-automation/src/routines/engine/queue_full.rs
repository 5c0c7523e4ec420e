//! Telling the person when the global queue refuses runs: the queue is a
//! resource bound (`routines.max_waiting`), and a run it refuses is a
//! reminder that will not reach them. At most one attention notification a
//! minute says how many runs were refused since the last one.

use std::sync::Mutex;

use cairn_core::notification::{Outcome, Priority};

use super::*;

/// How often at most the person hears of refused runs.
const EVERY: chrono::Duration = chrono::Duration::minutes(1);

/// Refusals not yet told, and when the person was last told.
#[derive(Default)]
pub(super) struct QueueFullNotices(Mutex<Pending>);

#[derive(Default)]
struct Pending {
    refused: u64,
    /// Who to tell: the owner of the first routine refused.
    user: Option<String>,
    /// The reason the latest refusal gave.
    reason: String,
    last_sent: Option<DateTime<Utc>>,
    /// A notice is due (a task waits to send it).
    due: bool,
}

impl QueueFullNotices {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl RoutineEngine {
    /// Counts `runs` of `routine` refused by a full queue, with `reason`,
    /// and makes sure a notice goes out: now, or a minute after the last.
    pub(super) fn note_queue_full(&self, routine: &Routine, runs: u64, reason: &str) {
        tracing::warn!(routine = %routine.spec.name, runs, %reason, "routine runs refused: the global queue is full");
        metrics::counter!("cairn_routine_queue_refused_total").increment(runs);
        let now = self.inner.clock.now();
        let at = {
            let mut pending = self.inner.queue_full.lock();
            pending.refused += runs;
            pending.reason = reason.to_string();
            if pending.user.is_none() {
                let owner = routine.spec.notify.user.clone();
                pending.user = Some(owner.unwrap_or_else(|| routine.user_id.clone()));
            }
            if pending.due {
                return;
            }
            pending.due = true;
            pending
                .last_sent
                .map_or(now, |last| (last + EVERY).max(now))
        };
        let engine = self.clone();
        // Not one of the engine's tracked tasks: a shutdown sends it at once
        // rather than waiting out the minute.
        tokio::spawn(async move {
            tokio::select! {
                () = engine.inner.clock.sleep_until(at) => {}
                () = engine.inner.stop_runs.cancelled() => {}
            }
            engine.send_queue_full().await;
        });
    }

    /// Sends the notice for the refusals counted so far.
    async fn send_queue_full(&self) {
        let now = self.inner.clock.now();
        let (refused, user, reason) = {
            let mut pending = self.inner.queue_full.lock();
            pending.due = false;
            pending.last_sent = Some(now);
            (
                std::mem::take(&mut pending.refused),
                pending.user.take(),
                std::mem::take(&mut pending.reason),
            )
        };
        let (Some(notifier), Some(user_id), true) = (&self.inner.notifier, user, refused > 0)
        else {
            return;
        };
        let new = NewNotification {
            user_id,
            channel: None,
            title: format!("{refused} routine run(s) refused: the queue is full"),
            body: format!(
                "{refused} routine run(s) could not even wait for a place and did not run ({reason}). \
                 Raise routines.max_concurrent or routines.max_waiting, or spread the schedules; \
                 `cairn routine runs NAME` shows each refusal, and a one-shot refused this way is tried again."
            ),
            priority: Priority::High,
            tags: vec![
                "routine".into(),
                Outcome::Attention.tag().into(),
                "queue-full".into(),
            ],
            data: Some(serde_json::json!({ "refused": refused, "reason": reason })),
            source: "routines:queue-full".to_string(),
        };
        let n = notifier.prepare(new, now);
        match self.inner.store.insert_notification(&n).await {
            Ok(()) => notifier.recorded(Arc::new(n)),
            Err(e) => tracing::error!(error = %e, refused, "cannot record the queue-full notice"),
        }
    }
}
