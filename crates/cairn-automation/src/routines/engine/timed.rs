//! Scheduled fires: the timer's round, catch-up and backoff, the slot claim.

use super::*;
use crate::routines::define;

impl RoutineEngine {
    /// One timer round at `now`: reaps orphans (when a lease can have
    /// lapsed), then claims and starts every due slot (a batch at a time).
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<TickReport, StoreError> {
        let inner = &self.inner;
        let mut report = TickReport::default();
        if self.lease_may_have_lapsed(now) {
            report.reaped = self.reap(now).await?;
        }
        let due = inner.store.due_routines(now, inner.settings.batch).await?;
        if due.is_empty() {
            return Ok(report);
        }
        let mut fires = Vec::with_capacity(due.len());
        let mut plans = Vec::with_capacity(due.len());
        for routine in due {
            let Some(slot) = routine.runtime.next_fire_at else {
                continue;
            };
            let (admission, runs, fire_plan) = self.plan_slot(&routine, slot, now).await?;
            fires.push((admission, runs));
            plans.push((routine, fire_plan));
        }
        let admitted = inner.store.admit_runs(&fires).await?;
        for (((routine, fire_plan), (_, runs)), result) in
            plans.into_iter().zip(fires).zip(admitted)
        {
            match result {
                Admitted::Started => {
                    report.started += runs
                        .iter()
                        .filter(|r| r.status == RunStatus::Running)
                        .count();
                    report.skipped += runs
                        .iter()
                        .filter(|r| r.status == RunStatus::Skipped)
                        .count();
                    for run in &runs {
                        let lateness = run.started_at - run.scheduled_for.unwrap_or(run.started_at);
                        metrics::counter!("cairn_routine_fires_total", "status" => if run.status == RunStatus::Running { "started" } else { run.status.as_str() })
                            .increment(1);
                        metrics::histogram!("cairn_routine_fire_lateness_seconds")
                            .record(lateness.num_milliseconds().max(0) as f64 / 1000.0);
                        tracing::info!(
                            routine = %routine.spec.name,
                            slot = %run.scheduled_for.map(rfc3339).unwrap_or_default(),
                            lateness_ms = (run.started_at - run.scheduled_for.unwrap_or(run.started_at)).num_milliseconds(),
                            "routine fired"
                        );
                    }
                    let engine = self.clone();
                    let catch_up = fire_plan.note(routine.spec.guardrails.catch_up);
                    inner.tasks.spawn(async move {
                        let runs: Vec<RoutineRun> = runs
                            .into_iter()
                            .filter(|r| r.status == RunStatus::Running)
                            .collect();
                        // Missed slots caught up with `all` run one after
                        // another. Those waiting their turn keep their
                        // leases; one reaped all the same was settled by its
                        // reaper (maybe re-run) and is not run here too.
                        let waiting: Vec<Uuid> = runs.iter().skip(1).map(|r| r.id).collect();
                        let in_turn = async {
                            for (i, run) in runs.into_iter().enumerate() {
                                if i > 0 && !engine.renew(run.id).await {
                                    tracing::warn!(routine = %routine.spec.name, run = %run.id, "a caught-up run was reaped while it waited its turn; not run here");
                                    continue;
                                }
                                let fire = FireContext {
                                    trigger_type: run.trigger_type.clone(),
                                    detail: run.trigger_detail.clone(),
                                    payload: None,
                                    scheduled_for: run.scheduled_for,
                                };
                                engine
                                    .execute(routine.clone(), run, fire, 0, catch_up.clone())
                                    .await;
                            }
                        };
                        if waiting.is_empty() {
                            in_turn.await;
                        } else {
                            tokio::select! {
                                () = in_turn => {}
                                never = engine.keep_leases(&waiting) => match never {},
                            }
                        }
                    });
                }
                Admitted::Skipped(reason) | Admitted::Refused(reason) => {
                    report.skipped += runs.len();
                    metrics::counter!("cairn_routine_fires_total", "status" => "skipped")
                        .increment(runs.len() as u64);
                    tracing::info!(routine = %routine.spec.name, %reason, "routine slot skipped");
                }
                Admitted::Taken => report.taken += 1,
            }
        }
        Ok(report)
    }

    /// The admission and runs for a due timed routine.
    async fn plan_slot(
        &self,
        routine: &Routine,
        slot: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<(Admission, Vec<RoutineRun>, SlotPlan), StoreError> {
        let inner = &self.inner;
        let g = &routine.spec.guardrails;
        let mut broken = None;
        let schedule = match &routine.spec.trigger {
            Trigger::Cron { schedule } => {
                let zone = define::zone_of(&routine.spec, inner.settings.user_zone);
                // Anchored at the slot, an interval continues its grid.
                match Schedule::parse(schedule, zone, slot) {
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
            now,
            g.catch_up,
            g.catch_up_limit,
            inner.settings.late_grace,
        );
        let mut admission = Admission {
            slot: Some(SlotMove {
                expected: slot,
                next: if is_once { None } else { fire_plan.next },
                disable: is_once,
            }),
            max_concurrent: Some(g.max_concurrent),
            global_max: Some(
                inner
                    .max_concurrent
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
            max_runs: g.max_runs,
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
            run.skip_reason = fire_plan.note(g.catch_up);
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
        Ok((admission, runs, fire_plan))
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
