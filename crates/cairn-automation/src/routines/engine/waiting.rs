//! Runs waiting their turn (`overlap: buffer_*`, caught-up slots, a
//! backfill, the global queue) are started by whichever engine sees a
//! place free: the one whose run just ended, and every engine's timer
//! round and upkeep, which hear other processes' runs end through the
//! store's signal (the store decides, one engine starts each).

use super::execute::Start;
use super::*;

impl RoutineEngine {
    /// Starts, each in a task of this engine, the waiting runs (of
    /// `routine`, or of all routines) that may start now, oldest slot
    /// first; how many. An engine that does not start every routine's
    /// waiting runs ([`EngineSettings::starts_waiting`]) starts only those
    /// of the routine it is given.
    pub async fn start_waiting(&self, routine: Option<Uuid>) -> usize {
        if routine.is_none() && !self.inner.settings.starts_waiting {
            return 0;
        }
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
            let mut start = Start::recorded(slot.routine, run, None);
            let (payload, depth) = super::fire::fire_of_queued(slot.fire.as_ref());
            start.fire.payload = payload;
            start.depth = depth;
            self.start(start);
        }
        count
    }
}
