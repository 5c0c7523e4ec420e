//! Scheduled fires: the timer's round, catch-up and backoff, the slot claim.

use cairn_store::{AsRead, OverlapRule};

use super::ahead::ClaimedAhead;
use super::execute::Start;
use super::*;
use crate::routines::define;
use crate::routines::plan::MissedWhile;

/// How long after a full queue refused it a one-shot is tried again.
const QUEUE_RETRY: chrono::Duration = chrono::Duration::seconds(10);

/// Whether `run` was refused by the full global queue.
pub(super) fn is_queue_full(run: &RoutineRun) -> bool {
    run.status == RunStatus::Skipped
        && run
            .skip_reason
            .as_deref()
            .is_some_and(|r| r.contains(cairn_store::QUEUE_FULL))
}

impl RoutineEngine {
    /// One timer round at `now`: reaps orphans (when a lease can have
    /// lapsed) and starts the waiting slots now free, then claims every due
    /// slot (a batch at a time) and starts the runs its routine's `overlap`
    /// lets start.
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<TickReport, StoreError> {
        let inner = &self.inner;
        let mut report = TickReport::default();
        if self.lease_may_have_lapsed(now) {
            report.reaped = self.reap(now).await?;
        } else {
            // A wake after a resume or a backfill comes here (a reap sweeps too).
            self.start_waiting(None).await;
        }
        let due = inner.store.due_routines(now, inner.settings.batch).await?;
        self.fire_due(&due, now, None, &mut report).await?;
        Ok(report)
    }

    /// Claims the slots of `due` routines at `now` and starts the runs
    /// their `overlap` lets start, counting what became of them in
    /// `report`. Claimed `ahead` of their slot (`now` is then the slot),
    /// routines are taken only while still as read and with nothing going,
    /// and their runs are kept there to start at the slot.
    pub(super) async fn fire_due(
        &self,
        due: &[Routine],
        now: DateTime<Utc>,
        mut ahead: Option<&mut ClaimedAhead>,
        report: &mut TickReport,
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        if due.is_empty() {
            return Ok(());
        }
        let mut fires = Vec::with_capacity(due.len());
        let mut plans = Vec::with_capacity(due.len());
        for routine in due {
            let Some(slot) = routine.runtime.next_fire_at else {
                continue;
            };
            let (mut admission, runs, note) = self.plan_slot(routine, slot, now).await?;
            if let Some(claimed) = ahead.as_deref()
                && let Some(slot) = admission.slot.as_mut()
            {
                slot.as_read = Some(AsRead {
                    updated_at: routine.updated_at,
                    consecutive_failures: routine.runtime.consecutive_failures,
                    state: routine.runtime.state.clone(),
                    ahead: Some(claimed.id),
                });
            }
            fires.push((admission, runs));
            plans.push((routine, note));
        }
        let rounds = inner.store.admit_rounds(&fires).await?;
        let mut queued = false;
        // Refused by a full queue: told once for the whole batch.
        let mut refused: Option<(&Routine, u64, String)> = None;
        for ((routine, note), round) in plans.into_iter().zip(rounds) {
            if round.admitted == Admitted::Taken {
                report.taken += 1;
                continue;
            }
            let offset = routine.jitter();
            for run in round.runs.iter().filter(|r| is_queue_full(r)) {
                let reason = run.skip_reason.clone().unwrap_or_default();
                let (_, n, last) = refused.get_or_insert((routine, 0, String::new()));
                *n += 1;
                *last = reason;
            }
            queued |= round.runs.iter().any(|r| r.status == RunStatus::Waiting);
            for run in &round.runs {
                match run.status {
                    RunStatus::Running => report.started += 1,
                    RunStatus::Waiting => report.waiting += 1,
                    _ => report.skipped += 1,
                }
                let label = if run.status == RunStatus::Running {
                    "started"
                } else {
                    run.status.as_str()
                };
                metrics::counter!("cairn_routine_fires_total", "status" => label).increment(1);
                let fires_at = run.scheduled_for.map_or(run.started_at, |s| s + offset);
                let lateness = (run.started_at - fires_at).num_milliseconds();
                // Claimed ahead, a run's lateness is known when it starts.
                if run.status == RunStatus::Running && ahead.is_none() {
                    metrics::histogram!("cairn_routine_fire_lateness_seconds")
                        .record(lateness.max(0) as f64 / 1000.0);
                }
                tracing::info!(
                    routine = %routine.spec.name,
                    slot = %run.scheduled_for.map(rfc3339).unwrap_or_default(),
                    status = %run.status,
                    reason = run.skip_reason.as_deref().unwrap_or(""),
                    lateness_ms = lateness,
                    "routine fired"
                );
            }
            self.stop_cancelled(&round.cancelled).await;
            for run in round.runs {
                if run.status != RunStatus::Running {
                    continue;
                }
                let start = Start::recorded(routine.clone(), run, note.clone());
                match ahead.as_deref_mut() {
                    Some(claimed) => claimed.starts.push(start),
                    None => self.start(start),
                }
            }
        }
        if let Some((routine, n, reason)) = refused {
            self.note_queue_full(routine, n, &reason);
        }
        if queued && ahead.is_none() {
            // A run queued while places are free (others were queued
            // first) starts now, in its turn.
            self.start_waiting(None).await;
        }
        Ok(())
    }

    /// The admission and runs for a due timed routine.
    ///
    /// Jitter shifts the routine's whole schedule: its slot `s` fires at
    /// `s + offset`, so the round is planned as the unjittered routine would
    /// be at `now - offset`. The note says what catch-up did, if anything.
    async fn plan_slot(
        &self,
        routine: &Routine,
        slot: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(Admission, Vec<RoutineRun>, Option<String>), StoreError> {
        let inner = &self.inner;
        let g = &routine.spec.guardrails;
        let mut broken = None;
        let schedule = match &routine.spec.trigger {
            Trigger::Cron { schedule } => {
                let zone = define::zone_of(&routine.spec, inner.settings.user_zone);
                // Anchored at the slot, an interval continues its grid.
                match define::schedule_at_slot(schedule, zone, slot) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        broken = Some(format!(
                            "the schedule no longer parses, so the routine stops: {e}"
                        ));
                        None
                    }
                }
            }
            _ => None,
        };
        let is_once = matches!(routine.spec.trigger, Trigger::Once { .. });
        let fire_plan = plan(
            schedule.as_ref(),
            slot,
            now - routine.jitter(),
            g.catch_up,
            g.catch_up_limit,
            inner.settings.late_grace,
        );
        // A slot older than the last resume was owed while paused.
        let missed_while = match routine.runtime.resumed_at {
            Some(resumed) if slot < resumed => MissedWhile::Paused,
            _ => MissedWhile::Down,
        };
        let note = fire_plan.note(g.catch_up, missed_while);
        let mut admission = Admission {
            slot: Some(SlotMove {
                expected: slot,
                next: if is_once { None } else { fire_plan.next },
                disable: is_once,
                as_read: None,
                // Refused by a full queue, a one-shot is tried again then.
                retry: is_once.then(|| now + QUEUE_RETRY),
            }),
            max_concurrent: Some(g.max_concurrent),
            global_max: Some(self.max_concurrent()),
            queue_max: Some(self.max_waiting()),
            max_runs: g.max_runs,
            overlap: Some(OverlapRule {
                policy: routine.spec.overlap(),
                start_first: true,
                buffer_limit: g.catch_up_limit,
            }),
            ..Admission::default()
        };
        let kind = routine.spec.trigger.kind();
        let mut runs: Vec<RoutineRun> = fire_plan
            .run
            .iter()
            .map(|s| self.new_run(routine, kind, Some(*s), now))
            .collect();
        if let Some(skip) = fire_plan.skip {
            // A skip round records one run saying why; its slots stay unrun.
            let mut run = self.new_run(routine, kind, Some(skip), now);
            run.skip_reason = note.clone();
            run.status = RunStatus::Skipped;
            run.completed_at = Some(now);
            run.owner = None;
            run.lease_until = None;
            runs.insert(0, run);
        }
        if let Some(reason) = broken {
            // Recorded once, with no next slot: it does not spin.
            admission.refuse = Some(reason);
        } else if routine.runtime.consecutive_failures > 0 {
            // Only the action's own failures count: an interrupted run
            // (a crash) touches neither the streak nor the last failure.
            let n = routine.runtime.consecutive_failures;
            let wait = BACKOFF[(n as usize - 1).min(BACKOFF.len() - 1)];
            if let Some(last) = inner.store.last_failure_at(routine.id).await? {
                let until = last + chrono::Duration::from_std(wait).unwrap_or_default();
                if now < until {
                    admission.refuse = Some(format!(
                        "backoff: {n} failure(s) in a row; no scheduled fire before {}",
                        rfc3339(until)
                    ));
                }
            }
        }
        Ok((admission, runs, note))
    }

    pub(super) fn new_run(
        &self,
        routine: &Routine,
        trigger_type: &str,
        slot: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> RoutineRun {
        let lease = chrono::Duration::from_std(self.inner.settings.lease).unwrap_or_default();
        RoutineRun {
            id: Uuid::now_v7(),
            routine_id: routine.id,
            trigger_type: trigger_type.to_string(),
            trigger_detail: slot.map(|s| format!("slot {}", rfc3339(s))),
            scheduled_for: slot,
            started_at: now,
            completed_at: None,
            status: RunStatus::Running,
            result_summary: None,
            tokens_used: None,
            job_id: None,
            owner: Some(self.inner.settings.owner.clone()),
            lease_until: Some(now + lease),
            notification_id: None,
            skip_reason: None,
            dedup_key: None,
            attempt: cairn_core::routine::FIRST_ATTEMPT,
        }
    }
}
