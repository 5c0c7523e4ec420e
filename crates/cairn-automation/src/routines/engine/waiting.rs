//! Slots waiting their turn (`overlap: buffer_*`, caught-up slots, a
//! backfill) are started by whichever engine sees them free: the one whose
//! run of the routine just ended, and every engine's timer round and
//! upkeep, which sweep them (the store decides, one engine starts each).

use super::execute::Start;
use super::*;

impl RoutineEngine {
    /// Starts, each in a task of this engine, the waiting slots (of
    /// `routine`, or of all routines) that may start now; how many.
    pub async fn start_waiting(&self, routine: Option<Uuid>) -> usize {
        let now = self.inner.clock.now();
        let started = match self
            .inner
            .store
            .start_waiting(routine, &self.rerunner(now), now)
            .await
        {
            Ok(started) => started,
            Err(e) => {
                tracing::warn!(error = %e, "routine engine: cannot start waiting slots");
                return 0;
            }
        };
        let count = started.len();
        for slot in started {
            let run = slot.run;
            tracing::info!(routine = %slot.routine.spec.name, slot = %run.scheduled_for.map(rfc3339).unwrap_or_default(), trigger = %run.trigger_type, "waiting slot started");
            metrics::counter!("cairn_routine_fires_total", "status" => "started").increment(1);
            self.start(Start::recorded(slot.routine, run, None));
        }
        count
    }
}
