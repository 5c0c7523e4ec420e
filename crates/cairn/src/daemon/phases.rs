//! How long each start-up step took, logged once the gateway serves
//! (`/healthz` answers from then on): what the `startup` bench and
//! `scripts/soak.sh` print as the ready time per phase.

use std::time::Instant;

/// The steps timed so far, from the daemon's start.
pub(super) struct Phases {
    start: Instant,
    last: Instant,
    done: Vec<(&'static str, f64)>,
}

impl Phases {
    pub(super) fn start() -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            done: Vec::new(),
        }
    }

    /// Ends step `name` now.
    pub(super) fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done
            .push((name, now.duration_since(self.last).as_secs_f64() * 1e3));
        self.last = now;
    }

    /// Logs the steps and the total, as `ready_ms=… phases="lock 0.2 ms, …"`.
    pub(super) fn log_ready(&self) {
        let phases: Vec<String> = self
            .done
            .iter()
            .map(|(name, ms)| format!("{name} {ms:.2} ms"))
            .collect();
        let total = self.last.duration_since(self.start).as_secs_f64() * 1e3;
        tracing::info!(
            ready_ms = format!("{total:.2}"),
            phases = phases.join(", "),
            "daemon ready: the gateway serves"
        );
    }
}
