//! The action of one run, tried as its routine's `retry` allows: each try
//! under the routine's `timeout`, the run's lease held throughout.
//!
//! A try that times out is cancelled and its cancellation seen through (the
//! action returns; a job it started is stopped) before it is recorded, and
//! only then may the next try start: a try that does not stop within
//! [`STOP_GRACE`] is never followed by another, since it may still be
//! acting. Each try of a routine with `retry` is recorded beside the run
//! (`Store::record_run_try`) as it ends; the run stays one record, so the
//! slot's key and the failure streak count runs, not tries.

use cairn_core::routine::{Retry, RunTry};

use super::*;

/// How long a cancelled try has to stop before it is left for lost.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// How a run's action ended.
pub(super) struct Carried {
    /// The outcome of its last try (its summary saying which try, if several).
    pub outcome: ActionOutcome,
    /// The run's lease was lost meanwhile: it was reaped or cancelled elsewhere.
    pub lost: bool,
}

/// How one try ended.
struct TryEnd {
    outcome: ActionOutcome,
    /// The action returned (after a cancel too); `false`: it may still act.
    stopped: bool,
}

impl RoutineEngine {
    /// Renews one run's lease every third of it; returns when the run is no
    /// longer running (reaped, or cancelled by another engine).
    async fn hold_lease(&self, run_id: Uuid) {
        let lease = self.inner.settings.lease;
        let every = chrono::Duration::from_std((lease / 3).max(Duration::from_millis(100)))
            .unwrap_or_default();
        loop {
            let at = self.inner.clock.now() + every;
            self.inner.clock.sleep_until(at).await;
            if !self.renew(run_id).await {
                return;
            }
        }
    }

    /// Renews one run's lease; `false` when it is no longer running.
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

    /// Carries out the run's action with its tries; `cancel` stops it (a
    /// shutdown, or `cancel_other` replacing the run).
    pub(super) async fn carry_out(
        &self,
        routine: &Arc<Routine>,
        run: &RoutineRun,
        fire: &FireContext,
        cancel: &CancellationToken,
    ) -> Carried {
        let tries = self.tries(routine, run, fire, cancel);
        tokio::pin!(tries);
        // The action first: one that ends at its first poll (a notice, a
        // store write) never arms the lease's timer, nor listens for wall
        // clock jumps, which every run of a burst would do on shared locks.
        tokio::select! {
            biased;
            outcome = &mut tries => return Carried { outcome, lost: false },
            () = self.hold_lease(run.id) => {}
        }
        // Not ours any more: stop the action and see it through.
        cancel.cancel();
        Carried {
            outcome: tries.await,
            lost: true,
        }
    }

    async fn tries(
        &self,
        routine: &Arc<Routine>,
        run: &RoutineRun,
        fire: &FireContext,
        cancel: &CancellationToken,
    ) -> ActionOutcome {
        let retry = routine.spec.guardrails.retry;
        let max = retry.map_or(1, |r| r.max_attempts.max(1));
        let mut number = 1;
        loop {
            let started_at = self.inner.clock.now();
            let end = self.one_try(routine, run, fire, cancel.child_token()).await;
            if retry.is_some() {
                self.record_try(run.id, number, started_at, &end.outcome)
                    .await;
            }
            let again = end.outcome.status == RunStatus::Failed
                && number < max
                && end.stopped
                && !cancel.is_cancelled();
            let Some(retry) = retry.filter(|_| again) else {
                return summarized(end, number, max);
            };
            if !self.back_off(&retry, number + 1, cancel).await {
                return summarized(end, number, max);
            }
            number += 1;
        }
    }

    /// Waits before try `next`; `false` when cancelled meanwhile.
    async fn back_off(&self, retry: &Retry, next: u32, cancel: &CancellationToken) -> bool {
        let wait = chrono::Duration::from_std(retry.wait_before(next)).unwrap_or_default();
        let at = self.inner.clock.now() + wait;
        tokio::select! {
            () = self.inner.clock.sleep_until(at) => true,
            () = cancel.cancelled() => false,
        }
    }

    async fn record_try(
        &self,
        run_id: Uuid,
        number: u32,
        started_at: DateTime<Utc>,
        outcome: &ActionOutcome,
    ) {
        let record = RunTry {
            run_id,
            number,
            started_at,
            ended_at: self.inner.clock.now(),
            status: outcome.status,
            summary: outcome.summary.clone(),
        };
        if let Err(e) = self.inner.store.record_run_try(&record).await {
            tracing::warn!(run = %run_id, try_number = number, error = %e, "cannot record a try of a routine run");
        }
    }

    /// One try under the routine's timeout. On a timeout or a cancel the
    /// action's token is cancelled and the action awaited for
    /// [`STOP_GRACE`], so a job it started is stopped before anything else.
    async fn one_try(
        &self,
        routine: &Arc<Routine>,
        run: &RoutineRun,
        fire: &FireContext,
        token: CancellationToken,
    ) -> TryEnd {
        let clock = &self.inner.clock;
        let request = ActionRequest {
            routine: Arc::clone(routine),
            run_id: run.id,
            fire: fire.clone(),
            cancel: token.clone(),
        };
        // A leak found in the run is recorded as this run's (and its agent's).
        let action = cairn_agent::safety::leak::in_run(
            run.id.to_string(),
            routine.spec.agent.clone(),
            self.inner.executor.execute(request),
        );
        tokio::pin!(action);
        let limit = routine.spec.guardrails.timeout;
        let timer = async {
            match limit {
                Some(limit) => {
                    let deadline =
                        clock.now() + chrono::Duration::from_std(limit).unwrap_or_default();
                    clock.sleep_until(deadline).await;
                }
                None => std::future::pending().await,
            }
        };
        let why = tokio::select! {
            biased;
            outcome = &mut action => return TryEnd { outcome, stopped: true },
            () = timer => match limit {
                Some(limit) => format!("timed out after {}; cancelled", cairn_core::duration::format(limit)),
                None => "cancelled".to_string(),
            },
            () = token.cancelled() => "cancelled".to_string(),
        };
        token.cancel();
        let grace = clock.now() + chrono::Duration::from_std(STOP_GRACE).unwrap_or_default();
        tokio::select! {
            _ = &mut action => TryEnd { outcome: ActionOutcome::failed(why), stopped: true },
            () = clock.sleep_until(grace) => TryEnd {
                outcome: ActionOutcome::failed(format!(
                    "{why}, but it did not stop within {}; not tried again while it may still run",
                    cairn_core::duration::format(STOP_GRACE)
                )),
                stopped: false,
            },
        }
    }
}

/// The last try's outcome, its summary saying which try it was when the
/// routine retries.
fn summarized(end: TryEnd, number: u32, max: u32) -> ActionOutcome {
    let mut outcome = end.outcome;
    if max > 1 && (number > 1 || outcome.status == RunStatus::Failed) {
        let which = format!("try {number} of {max}");
        outcome.summary = Some(match outcome.summary.take() {
            Some(s) => format!("{which}: {s}"),
            None => which,
        });
    }
    outcome
}
