//! Carrying out an admitted run: the action under its timeout with the
//! lease kept, the notification, the record, the `routine.finished` event.

use super::*;
use crate::routines::notice::run_notice;

/// The runs an engine is carrying out, by id: their tokens, to stop one
/// that `overlap: cancel_other` replaced.
#[derive(Default)]
pub(super) struct LiveRuns(std::sync::Mutex<std::collections::HashMap<Uuid, LiveRun>>);

#[derive(Clone)]
struct LiveRun {
    cancel: CancellationToken,
    /// Set when a later slot replaced it: its end is already recorded.
    replaced: Arc<std::sync::atomic::AtomicBool>,
}

impl LiveRuns {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<Uuid, LiveRun>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops every run being carried out (the engine is stopping; a run
    /// that begins after sees `stop_runs` cancelled and stops itself).
    pub(super) fn cancel_all(&self) {
        for live in self.lock().values() {
            live.cancel.cancel();
        }
    }
}

/// A recorded run to carry out, with what its action is told of the fire.
pub(super) struct Start {
    pub(super) routine: Routine,
    pub(super) run: RoutineRun,
    pub(super) fire: FireContext,
    /// How deep in a chain of system events it fired.
    pub(super) depth: u32,
    /// What catch-up did, to put before its summary.
    pub(super) note: Option<String>,
}

impl Start {
    /// A run fired by the engine itself (a slot, a waiting slot, a
    /// reaper's re-run): its fire is told from the run's own record.
    pub(super) fn recorded(routine: Routine, run: RoutineRun, note: Option<String>) -> Self {
        let fire = FireContext {
            trigger_type: run.trigger_type.clone(),
            detail: run.trigger_detail.clone(),
            payload: None,
            scheduled_for: run.scheduled_for,
        };
        Start {
            routine,
            run,
            fire,
            depth: 0,
            note,
        }
    }
}

impl RoutineEngine {
    /// Carries out a recorded run through the engine's pool (see `pool.rs`),
    /// in its slot's turn.
    pub(super) fn start(&self, start: Start) {
        let needs = self.inner.pool.push(start);
        if needs.worker {
            let engine = self.clone();
            self.inner.tasks.spawn(async move { engine.work().await });
        }
        if needs.keeper {
            let engine = self.clone();
            self.inner
                .tasks
                .spawn(async move { engine.keep_queued_leases().await });
        }
    }

    /// Stops the runs an admission cancelled (`overlap: cancel_other`): ours
    /// at once through their tokens; another process's see it when they
    /// next renew their lease, and the job such a run started is asked to
    /// stop through the store now.
    pub(super) async fn stop_cancelled(&self, runs: &[RoutineRun]) {
        for run in runs {
            let live = self.inner.live.lock().get(&run.id).cloned();
            match live {
                Some(live) => {
                    live.replaced.store(true, Ordering::SeqCst);
                    live.cancel.cancel();
                }
                // Still waiting in the pool: it never begins.
                None if self.inner.pool.remove(run.id) => {}
                None => {
                    if let Some(job) = run.job_id {
                        let now = self.inner.clock.now();
                        if let Err(e) = self.inner.store.request_job_cancel(job, now).await {
                            tracing::warn!(run = %run.id, %job, error = %e, "cannot ask a cancelled run's job to stop");
                        }
                    }
                }
            }
            tracing::info!(run = %run.id, routine_id = %run.routine_id, "routine run cancelled: a later slot replaced it (overlap: cancel_other)");
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
        Box::pin(self.clone().execute_now(routine, run, fire, depth, note))
    }

    /// Every run's future is written and moved whole at each step, so what
    /// few runs need (a fallback, a waiting run, routines listening) is
    /// boxed where it is awaited, not carried in every run's future
    /// (8.5 KB a run before, most of it for those).
    async fn execute_now(
        self,
        routine: Routine,
        run: RoutineRun,
        fire: FireContext,
        depth: u32,
        note: Option<String>,
    ) {
        let inner = &self.inner;
        // Shared with each try's request rather than copied into it.
        let routine = Arc::new(routine);
        inner.runs.tell(|| RunEvent::Started {
            routine: routine.spec.name.clone(),
            run_id: run.id,
            trigger: run.trigger_type.clone(),
        });
        // A token of its own, not a child of `stop_runs`: a child joins and
        // leaves its parent's list under the parent's lock, one lock every
        // run of a burst took twice. The engine's stop cancels the live
        // runs' tokens one by one instead (`LiveRuns::cancel_all`); a run
        // put in the list after that sees `stop_runs` here.
        let live = LiveRun {
            cancel: CancellationToken::new(),
            replaced: Arc::default(),
        };
        inner.live.lock().insert(run.id, live.clone());
        if inner.stop_runs.is_cancelled() {
            live.cancel.cancel();
        }
        let carried = self.carry_out(&routine, &run, &fire, &live.cancel).await;
        inner.live.lock().remove(&run.id);
        let replaced = live.replaced.load(Ordering::SeqCst)
            || (carried.lost && self.was_cancelled(run.id).await);
        if replaced {
            // Recorded `cancelled` by the admission that replaced it: no
            // outcome, no notification (the person wanted the later slot).
            tracing::info!(routine = %routine.spec.name, run = %run.id, "routine run stopped: a later slot replaced it");
            inner.runs.tell(|| RunEvent::Finished {
                routine: routine.spec.name.clone(),
                run_id: run.id,
                status: RunStatus::Cancelled,
                summary: None,
            });
            return;
        }
        let mut outcome = carried.outcome;
        if let Some(note) = note {
            outcome.summary = Some(match outcome.summary.take() {
                Some(s) => format!("{note}\n{s}"),
                None => note,
            });
        }
        self.record_outcome(&routine, &run, &outcome).await;
        self.announce_finished(&routine, &run, &outcome, depth)
            .await;
    }

    /// Ends the run in the store with its outcome, its notification and any
    /// auto-pause, then does what follows a recorded end.
    async fn record_outcome(&self, routine: &Routine, run: &RoutineRun, outcome: &ActionOutcome) {
        let inner = &self.inner;
        let notification = self.notice(routine, run, outcome).map(Arc::new);
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
        let auto_pause = self.auto_pause(routine, outcome, now);
        // The notification and the run's end in one transaction, shared with
        // the other runs ending meanwhile (group commit).
        let finish = FinishRun {
            run_id: run.id,
            routine_id: routine.id,
            outcome: record.clone(),
            notification: notification.clone(),
            auto_pause: auto_pause.clone(),
        };
        let finished = match inner.finishes.finish(&inner.store, finish.clone()).await {
            Ok(finished) => Ok(finished),
            Err(e) => {
                // Keep the notification apart from a run end that cannot be recorded.
                tracing::warn!(routine = %routine.spec.name, run = %run.id, error = %e, "cannot end the run with its notification; recording them apart");
                Box::pin(self.finish_apart(routine, finish)).await
            }
        };
        match finished {
            Ok(finished) => {
                self.after_finish(routine, run, finished, notification, auto_pause)
                    .await
            }
            Err(e) => {
                tracing::error!(routine = %routine.spec.name, run = %run.id, error = %e, "cannot record the run's outcome")
            }
        }
    }

    /// Counts and logs the run's end, tells the run watchers and fires the
    /// routines waiting for it.
    async fn announce_finished(
        &self,
        routine: &Routine,
        run: &RoutineRun,
        outcome: &ActionOutcome,
        depth: u32,
    ) {
        let inner = &self.inner;
        metrics::counter!("cairn_routine_runs_finished_total", "status" => outcome.status.as_str())
            .increment(1);
        tracing::info!(
            routine = %routine.spec.name,
            run = %run.id,
            status = %outcome.status,
            "routine run finished"
        );
        inner.runs.tell(|| RunEvent::Finished {
            routine: routine.spec.name.clone(),
            run_id: run.id,
            status: outcome.status,
            summary: outcome.summary.clone(),
        });
        // Built only when a routine listens: most runs' ends have none.
        if !inner.triggered.read().await.system.is_empty() {
            let mut event = SystemEvent::new(
                events::ROUTINE_FINISHED,
                [
                    ("routine", routine.spec.name.clone()),
                    ("status", outcome.status.to_string()),
                    ("run_id", run.id.to_string()),
                ],
            );
            event.depth = depth;
            Box::pin(self.emit(event)).await;
        }
    }

    /// Whether the store recorded the run `cancelled` (another engine's
    /// `cancel_other` replaced it).
    async fn was_cancelled(&self, run_id: Uuid) -> bool {
        matches!(
            self.inner.store.get_run(run_id).await,
            Ok(Some(run)) if run.status == RunStatus::Cancelled
        )
    }

    /// What a run's end reports: the notification that was recorded, the
    /// pause it made, the slots now free to start.
    async fn after_finish(
        &self,
        routine: &Routine,
        run: &RoutineRun,
        finished: Finished,
        notification: Option<Arc<Notification>>,
        auto_pause: Option<AutoPause>,
    ) {
        if !finished.ended {
            tracing::warn!(routine = %routine.spec.name, run = %run.id, "run had already ended (interrupted or cancelled); its late outcome was not recorded");
        }
        let sent = if finished.paused {
            let note = auto_pause.as_ref().and_then(|a| a.pause.note.clone());
            tracing::warn!(routine = %routine.spec.name, note = note.as_deref().unwrap_or(""), "routine paused after failures");
            auto_pause.and_then(|a| a.notification).map(Arc::new)
        } else {
            notification
        };
        if let (Some(n), Some(notifier)) = (sent, &self.inner.notifier) {
            notifier.recorded(n);
        }
        if finished.waiting {
            // The place this run held goes to any routine's run, oldest
            // first; a one-off command's engine starts only its routine's.
            let scope = (!self.inner.settings.starts_waiting).then_some(routine.id);
            Box::pin(self.start_waiting(scope)).await;
        }
    }

    /// `pause_after_failures` for a failed run's end: the pause to make if
    /// the streak reaches the bound, and the one notification saying so.
    fn auto_pause(
        &self,
        routine: &Routine,
        outcome: &ActionOutcome,
        now: DateTime<Utc>,
    ) -> Option<AutoPause> {
        let after = routine.spec.guardrails.pause_after_failures?;
        if outcome.status != RunStatus::Failed {
            return None;
        }
        let name = &routine.spec.name;
        let error = outcome.summary.as_deref().unwrap_or("no error given");
        let note = format!(
            "paused after {after} failures in a row: {}",
            clip(error, 500)
        );
        let notification = self.inner.notifier.as_ref().map(|notifier| {
            let new = NewNotification {
                user_id: routine
                    .spec
                    .notify
                    .user
                    .clone()
                    .unwrap_or_else(|| routine.user_id.clone()),
                channel: routine.spec.notify.channel.clone(),
                title: format!("{name} paused"),
                body: format!("{note}\n`cairn routine resume {name}` starts it again."),
                priority: cairn_core::notification::Priority::High,
                // It stands for the failed run it replaces: shown as a failure.
                tags: vec![
                    "routine".into(),
                    cairn_core::notification::Outcome::Failed.tag().into(),
                    "paused".into(),
                ],
                data: Some(serde_json::json!({
                    "routine": name,
                    "routine_id": routine.id,
                    "paused_after_failures": after,
                })),
                source: format!("routine:{}:paused", routine.id),
            };
            notifier.prepare(new, now)
        });
        Some(AutoPause {
            after,
            pause: cairn_core::routine::Pause {
                at: now,
                by: "cairn".to_string(),
                note: Some(note),
            },
            notification,
        })
    }

    /// Records the notification (if any) and then the run's end, each on
    /// its own: the fallback when they cannot be recorded together.
    async fn finish_apart(
        &self,
        routine: &Routine,
        mut finish: FinishRun,
    ) -> Result<Finished, StoreError> {
        let inner = &self.inner;
        if let (Some(n), Some(notifier)) = (finish.notification.take(), &inner.notifier) {
            match inner.store.insert_notification(&n).await {
                Ok(()) => notifier.recorded(n),
                Err(e) => {
                    tracing::error!(routine = %routine.spec.name, error = %e, "cannot record the run's notification");
                    finish.outcome.notification_id = None;
                }
            }
        }
        let done = inner
            .store
            .finish_runs(std::slice::from_ref(&finish))
            .await?;
        Ok(done.first().copied().unwrap_or(Finished {
            ended: false,
            paused: false,
            waiting: false,
        }))
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
