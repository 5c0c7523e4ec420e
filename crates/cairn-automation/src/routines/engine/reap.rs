//! Runs whose process is gone: reaped as `interrupted` (never the
//! routine's failure), and the slots whose routine allows it re-run here at
//! once as their attempt 2 (the store decides and records both in one
//! transaction; see `cairn_store::Store::reap_orphans`).

use cairn_store::{Reaped, Rerunner};

use super::execute::Start;
use super::*;

impl RoutineEngine {
    /// This engine as the one taking on the runs a store call starts (what
    /// its reaps interrupt, waiting slots).
    pub(super) fn rerunner(&self, now: DateTime<Utc>) -> Rerunner {
        let lease = chrono::Duration::from_std(self.inner.settings.lease).unwrap_or_default();
        Rerunner {
            owner: self.inner.settings.owner.clone(),
            lease_until: now + lease,
            global_max: Some(self.max_concurrent()),
        }
    }

    /// Reaps the runs whose lease lapsed before `now` and starts the slots'
    /// re-runs, then the waiting slots now free to start; returns how many
    /// runs were reaped.
    pub(super) async fn reap(&self, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let reaped = self
            .inner
            .store
            .reap_orphans(now, &self.rerunner(now))
            .await?;
        let count = self.after_reap(reaped);
        self.start_waiting(None).await;
        Ok(count)
    }

    /// At start: reaps at once, whatever their lease, the runs that earlier
    /// daemons of this home left ([`EngineSettings::home_prefix`]; this
    /// process holds the home's lock, so none of them is alive), so a
    /// restart neither waits for their leases nor counts them toward
    /// `max_concurrent` meanwhile.
    pub(super) async fn reap_predecessors(&self) {
        let Some(prefix) = self.inner.settings.home_prefix.as_deref() else {
            return;
        };
        let now = self.inner.clock.now();
        match self
            .inner
            .store
            .reap_predecessors(prefix, now, &self.rerunner(now))
            .await
        {
            Ok(reaped) => {
                self.after_reap(reaped);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot reap the runs earlier daemons of this home left")
            }
        }
    }

    /// Reports what a reap did and starts the re-runs it recorded.
    fn after_reap(&self, reaped: Vec<Reaped>) -> usize {
        let mut reruns = 0u64;
        for r in &reaped {
            tracing::info!(
                routine_id = %r.run.routine_id,
                run = %r.run.id,
                summary = r.run.result_summary.as_deref().unwrap_or(""),
                "routine run interrupted"
            );
            let (Some(again), Some(routine)) = (&r.rerun, &r.routine) else {
                continue;
            };
            if again.status != RunStatus::Running {
                continue;
            }
            reruns += 1;
            self.start(Start::recorded(routine.clone(), again.clone(), None));
        }
        if !reaped.is_empty() {
            tracing::warn!(
                runs = reaped.len(),
                reruns,
                "routine runs whose process stopped marked interrupted; slots safe to repeat re-run"
            );
        }
        metrics::counter!("cairn_routine_runs_interrupted_total").increment(reaped.len() as u64);
        metrics::counter!("cairn_routine_reruns_total").increment(reruns);
        reaped.len()
    }
}
