//! Carrying out an admitted run: the action under its timeout with the
//! lease kept, the notification, the record, the `routine.finished` event.

use super::*;
use crate::routines::notice::run_notice;

impl RoutineEngine {
    /// Renews the leases of `run_ids` (those still running) every third of
    /// the lease, for as long as it is awaited.
    pub(super) async fn keep_leases(&self, run_ids: &[Uuid]) -> std::convert::Infallible {
        let lease = self.inner.settings.lease;
        let every = chrono::Duration::from_std((lease / 3).max(Duration::from_millis(100)))
            .unwrap_or_default();
        loop {
            let at = self.inner.clock.now() + every;
            self.inner.clock.sleep_until(at).await;
            for run_id in run_ids {
                self.renew(*run_id).await;
            }
        }
    }

    /// Renews one run's lease; `false` when it is no longer running (reaped).
    pub(super) async fn renew(&self, run_id: Uuid) -> bool {
        let lease = chrono::Duration::from_std(self.inner.settings.lease).unwrap_or_default();
        let until = self.inner.clock.now() + lease;
        match self.inner.store.renew_run_lease(run_id, until).await {
            Ok(held) => held,
            Err(e) => {
                // Go on: if it was reaped meanwhile, its end is refused.
                tracing::warn!(run = %run_id, error = %e, "cannot renew a routine run's lease");
                true
            }
        }
    }

    /// Carries out an admitted run: the action under the timeout, the
    /// notification, the record, the `routine.finished` event, retention.
    ///
    /// Boxed, because it can fire system-event routines whose runs execute
    /// the same way: the future's type would otherwise contain itself.
    pub(super) fn execute(
        &self,
        routine: Routine,
        run: RoutineRun,
        fire: FireContext,
        depth: u32,
        note: Option<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>> {
        let engine = self.clone();
        Box::pin(async move { engine.execute_now(routine, run, fire, depth, note).await })
    }

    async fn execute_now(
        &self,
        routine: Routine,
        run: RoutineRun,
        fire: FireContext,
        depth: u32,
        note: Option<String>,
    ) {
        let inner = &self.inner;
        // No receivers is not an error: nobody is watching.
        let _ = inner.runs.send(RunEvent::Started {
            routine: routine.spec.name.clone(),
            run_id: run.id,
            trigger: run.trigger_type.clone(),
        });
        let cancel = inner.stop_runs.child_token();
        let request = ActionRequest {
            routine: routine.clone(),
            run_id: run.id,
            fire,
            cancel: cancel.clone(),
        };
        let executed = inner.executor.execute(request);
        let action = async {
            tokio::select! {
                outcome = executed => outcome,
                never = self.keep_leases(std::slice::from_ref(&run.id)) => match never {},
            }
        };
        let mut outcome = match routine.spec.guardrails.timeout {
            Some(limit) => {
                let deadline =
                    inner.clock.now() + chrono::Duration::from_std(limit).unwrap_or_default();
                tokio::select! {
                    outcome = action => outcome,
                    () = inner.clock.sleep_until(deadline) => {
                        cancel.cancel();
                        ActionOutcome::failed(format!(
                            "timed out after {}",
                            cairn_core::duration::format(limit)
                        ))
                    }
                }
            }
            None => action.await,
        };
        if let Some(note) = note {
            outcome.summary = Some(match outcome.summary.take() {
                Some(s) => format!("{note}\n{s}"),
                None => note,
            });
        }
        let notification = self.notice(&routine, &run, &outcome);
        let now = inner.clock.now();
        let record = RunOutcome {
            status: outcome.status,
            summary: outcome.summary.clone(),
            tokens_used: outcome.tokens_used,
            completed_at: now,
            notification_id: notification.as_ref().map(|n| n.id),
            state: outcome.state.clone(),
            retain: Some(routine.spec.guardrails.retention),
        };
        // The notification and the run's end in one transaction, shared with
        // the other runs ending meanwhile (group commit).
        let finish = FinishRun {
            run_id: run.id,
            routine_id: routine.id,
            outcome: record.clone(),
            notification: notification.clone(),
        };
        let finished = match inner.finishes.finish(&inner.store, finish).await {
            Ok(finished) => {
                if let (Some(n), Some(notifier)) = (&notification, &inner.notifier) {
                    notifier.recorded(n);
                }
                Ok(finished)
            }
            Err(e) => {
                // Keep the notification apart from a run end that cannot be recorded.
                tracing::warn!(routine = %routine.spec.name, run = %run.id, error = %e, "cannot end the run with its notification; recording them apart");
                self.finish_apart(&routine, run.id, record, notification)
                    .await
            }
        };
        match finished {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(routine = %routine.spec.name, run = %run.id, "run had already been marked interrupted; its late outcome was not recorded")
            }
            Err(e) => {
                tracing::error!(routine = %routine.spec.name, run = %run.id, error = %e, "cannot record the run's outcome")
            }
        }
        metrics::counter!("cairn_routine_runs_finished_total", "status" => outcome.status.as_str())
            .increment(1);
        tracing::info!(
            routine = %routine.spec.name,
            run = %run.id,
            status = %outcome.status,
            "routine run finished"
        );
        let _ = inner.runs.send(RunEvent::Finished {
            routine: routine.spec.name.clone(),
            run_id: run.id,
            status: outcome.status,
            summary: outcome.summary.clone(),
        });
        let mut event = SystemEvent::new(
            events::ROUTINE_FINISHED,
            [
                ("routine", routine.spec.name.clone()),
                ("status", outcome.status.to_string()),
                ("run_id", run.id.to_string()),
            ],
        );
        event.depth = depth;
        if !inner.triggered.read().await.system.is_empty() {
            self.emit(event).await;
        }
    }

    /// Records the notification (if any) and then the run's end, each on
    /// its own: the fallback when they cannot be recorded together.
    async fn finish_apart(
        &self,
        routine: &Routine,
        run_id: Uuid,
        mut record: RunOutcome,
        notification: Option<Notification>,
    ) -> Result<bool, StoreError> {
        let inner = &self.inner;
        if let (Some(n), Some(notifier)) = (notification, &inner.notifier) {
            match inner.store.insert_notification(&n).await {
                Ok(()) => notifier.recorded(&n),
                Err(e) => {
                    tracing::error!(routine = %routine.spec.name, error = %e, "cannot record the run's notification");
                    record.notification_id = None;
                }
            }
        }
        inner.store.finish_run(run_id, &record).await
    }

    /// The notification the run's outcome and the routine's notify settings
    /// call for, not yet recorded.
    fn notice(
        &self,
        routine: &Routine,
        run: &RoutineRun,
        outcome: &ActionOutcome,
    ) -> Option<Notification> {
        let notifier = self.inner.notifier.as_ref()?;
        let n = &routine.spec.notify;
        let name = &routine.spec.name;
        let told = run_notice(&routine.spec, run.id, outcome)?;
        let new = NewNotification {
            user_id: n.user.clone().unwrap_or_else(|| routine.user_id.clone()),
            channel: n.channel.clone(),
            title: told.title,
            body: told.body,
            priority: told.priority,
            tags: vec!["routine".into(), told.outcome.tag().into()],
            data: Some(serde_json::json!({
                "routine": name,
                "routine_id": routine.id,
                "run_id": run.id,
                "status": outcome.status,
                "trigger": run.trigger_type,
                "scheduled_for": run.scheduled_for,
            })),
            source: format!("routine:{}", run.id),
        };
        Some(notifier.prepare(new, self.inner.clock.now()))
    }
}
