//! How long each start-up step took, logged once every part runs: what
//! the `startup` bench and `scripts/soak.sh` print as the ready time (from
//! then on `/healthz` answers) and the started time, with each step's.

use std::time::Instant;

/// The steps timed so far, from the daemon's start.
pub(super) struct Phases {
    start: Instant,
    last: Instant,
    /// When `/healthz` began to answer.
    ready: Option<Instant>,
    done: Vec<(&'static str, f64)>,
}

impl Phases {
    pub(super) fn start() -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            ready: None,
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

    /// `/healthz` answers from the end of the last step on.
    pub(super) fn ready(&mut self) {
        self.ready = Some(self.last);
    }

    /// Logs the steps and both totals, as `ready_ms=… started_ms=…
    /// phases="lock 0.2 ms, …"`. Without a gateway, ready is started.
    pub(super) fn log_started(&self) {
        let phases: Vec<String> = self
            .done
            .iter()
            .map(|(name, ms)| format!("{name} {ms:.2} ms"))
            .collect();
        let since = |t: Instant| t.duration_since(self.start).as_secs_f64() * 1e3;
        let started = since(self.last);
        let ready = self.ready.map_or(started, since);
        tracing::info!(
            ready_ms = format!("{ready:.2}"),
            started_ms = format!("{started:.2}"),
            phases = phases.join(", "),
            "daemon started: every part runs"
        );
    }
}
