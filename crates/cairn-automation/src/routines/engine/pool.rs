//! The engine's bounded pool: admitted runs wait in one queue, in slot
//! order, and at most [`RunPool::size`] of them are carried out at once by
//! workers started on demand (none while nothing waits). A burst of ten
//! thousand due runs is a queue of records, not ten thousand tasks each
//! holding an action's buffers; memory in flight is bounded by the pool.
//!
//! This is the engine's own bound, under `routines.max_concurrent`: every
//! run in the queue is already admitted (recorded `running`, its place
//! taken), so the global limit keeps its meaning. A queued run's lease is
//! held while it waits (see [`RoutineEngine::keep_queued_leases`]), so a
//! long queue is never taken for a crash.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::execute::Start;
use super::*;

/// Runs carried out at once per core: they mostly wait on I/O (the store,
/// an HTTP call, a model), so many per core.
const PER_CORE: usize = 128;
/// Bounds of the pool's size, whatever the machine says. At least two
/// group commits of run ends: with one, every worker waits on the commit
/// of its end while no run goes on, and runs and commits take turns
/// (2,000 due in one second: done p99 79-90 ms with 256 workers, 73-76 ms
/// with 512 on 2 cores; docs/performance.md).
const MIN_SIZE: usize = 2 * super::admit::MAX_BATCH;
const MAX_SIZE: usize = 1024;
/// Queue places kept once a burst has drained: a heap keeps the capacity
/// its largest burst gave it (10,000 due left 16,384 places after they
/// were all done). Past this many places the emptied queue lets go.
const KEEP_PLACES: usize = 256;

/// The pool's size on this machine.
pub(super) fn machine_size() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    (cores * PER_CORE).clamp(MIN_SIZE, MAX_SIZE)
}

/// A queued run, ordered by its slot (else its start), then arrival.
/// Boxed: the heap moves its entries at each push and pop, a dozen times
/// an entry in a queue of thousands, and a run's records are a kilobyte.
struct Queued {
    key: (i64, u64),
    start: Box<Start>,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

#[derive(Default)]
struct State {
    waiting: BinaryHeap<Reverse<Queued>>,
    /// Workers running now.
    workers: usize,
    /// Whether a task keeps the queued runs' leases.
    keeper: bool,
    /// Arrivals so far (ties between equal slots keep arrival order).
    arrivals: u64,
}

impl State {
    /// Gives back the places a burst left in the (empty) queue.
    fn release_burst(&mut self) {
        if self.waiting.capacity() > KEEP_PLACES {
            self.waiting = BinaryHeap::new();
        }
    }
}

/// What [`RunPool::push`] asks the engine to start.
pub(super) struct Needs {
    pub(super) worker: bool,
    pub(super) keeper: bool,
}

pub(super) struct RunPool {
    size: usize,
    state: std::sync::Mutex<State>,
    /// Told when the queue empties, so the lease keeper ends at once.
    emptied: tokio::sync::Notify,
}

impl RunPool {
    pub(super) fn new(size: usize) -> Self {
        Self {
            size: size.max(1),
            state: std::sync::Mutex::default(),
            emptied: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `start`; says whether a worker (and a lease keeper) must start.
    pub(super) fn push(&self, start: Start) -> Needs {
        let slot = start.run.scheduled_for.unwrap_or(start.run.started_at);
        let mut state = self.lock();
        state.arrivals += 1;
        let key = (slot.timestamp_micros(), state.arrivals);
        state.waiting.push(Reverse(Queued {
            key,
            start: Box::new(start),
        }));
        let worker = state.workers < self.size;
        if worker {
            state.workers += 1;
        }
        let keeper = !state.keeper;
        state.keeper = true;
        Needs { worker, keeper }
    }

    /// The next run for a worker; `None` ends the worker (counted out in
    /// the same lock, so a run pushed meanwhile gets a worker of its own).
    pub(super) fn next(&self) -> Option<Start> {
        let mut state = self.lock();
        let next = state.waiting.pop().map(|Reverse(q)| *q.start);
        if next.is_none() {
            state.workers -= 1;
        } else if state.waiting.is_empty() {
            state.release_burst();
            if state.keeper {
                self.emptied.notify_one();
            }
        }
        next
    }

    /// Takes run `id` out of the queue (a later slot replaced it); whether it was there.
    pub(super) fn remove(&self, id: Uuid) -> bool {
        let mut state = self.lock();
        let before = state.waiting.len();
        state.waiting.retain(|Reverse(q)| q.start.run.id != id);
        if state.waiting.is_empty() {
            state.release_burst();
            if state.keeper {
                self.emptied.notify_one();
            }
        }
        state.waiting.len() != before
    }

    /// The queued runs' ids.
    fn queued(&self) -> Vec<Uuid> {
        let state = self.lock();
        state
            .waiting
            .iter()
            .map(|Reverse(q)| q.start.run.id)
            .collect()
    }

    /// Counts the lease keeper out when nothing waits; whether it did.
    fn retire_if_empty(&self) -> bool {
        let mut state = self.lock();
        if state.waiting.is_empty() {
            state.keeper = false;
        }
        !state.keeper
    }

    /// How many runs wait (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().waiting.len()
    }

    /// How many runs the queue has room for without growing (tests).
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.lock().waiting.capacity()
    }
}

impl RoutineEngine {
    /// A worker: carries out queued runs, earliest slot first, until none waits.
    pub(super) async fn work(&self) {
        while let Some(start) = self.inner.pool.next() {
            if self.inner.stop_runs.is_cancelled() {
                // Shutting down: the store recorded it interrupted with the rest.
                continue;
            }
            let Start {
                routine,
                run,
                fire,
                depth,
                note,
            } = start;
            self.execute(routine, run, fire, depth, note).await;
        }
    }

    /// Renews the leases of the runs waiting in the queue every third of a
    /// lease, until the queue is empty (it ends then, not a third of a lease
    /// later); a run no longer running (reaped, cancelled elsewhere) leaves
    /// the queue.
    pub(super) async fn keep_queued_leases(&self) {
        let every = chrono::Duration::from_std(
            (self.inner.settings.lease / 3).max(Duration::from_millis(100)),
        )
        .unwrap_or_default();
        loop {
            let at = self.inner.clock.now() + every;
            loop {
                tokio::select! {
                    () = self.inner.clock.sleep_until(at) => break,
                    () = self.inner.pool.emptied.notified() => {
                        if self.inner.pool.retire_if_empty() {
                            return;
                        }
                    }
                }
            }
            let ids = self.inner.pool.queued();
            if ids.is_empty() && self.inner.pool.retire_if_empty() {
                return;
            }
            for id in ids {
                if !self.renew(id).await && self.inner.pool.remove(id) {
                    tracing::info!(run = %id, "a queued routine run ended elsewhere; not carried out");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::routine::{RoutineSpec, SpecFormat};
    use chrono::TimeZone;

    fn start_at(slot: Option<i64>, started: i64) -> Start {
        let at = |s: i64| Utc.timestamp_opt(s, 0).unwrap();
        let spec = RoutineSpec::parse(
            "name: r\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: x}\n",
            SpecFormat::Yaml,
        )
        .unwrap();
        let routine = Routine::new(spec, "ada", at(0));
        let run = RoutineRun {
            id: Uuid::new_v4(),
            routine_id: routine.id,
            trigger_type: "cron".to_string(),
            trigger_detail: None,
            scheduled_for: slot.map(at),
            attempt: 1,
            started_at: at(started),
            completed_at: None,
            status: RunStatus::Running,
            result_summary: None,
            tokens_used: None,
            job_id: None,
            notification_id: None,
            skip_reason: None,
            dedup_key: None,
            owner: None,
            lease_until: None,
        };
        Start::recorded(routine, run, None)
    }

    #[test]
    fn runs_leave_in_slot_order_and_workers_stop_at_the_bound() {
        let pool = RunPool::new(2);
        let late = start_at(Some(300), 1);
        let early = start_at(Some(100), 2);
        let unslotted = start_at(None, 200);
        let needs: Vec<bool> = [late, early, unslotted]
            .into_iter()
            .map(|s| pool.push(s).worker)
            .collect();
        assert_eq!(needs, vec![true, true, false], "two workers at most");
        assert_eq!(pool.len(), 3);
        let order: Vec<i64> = std::iter::from_fn(|| pool.next())
            .map(|s| s.run.scheduled_for.unwrap_or(s.run.started_at).timestamp())
            .collect();
        assert_eq!(order, vec![100, 200, 300]);
        // The worker that found the queue empty left: one may start again.
        assert!(pool.push(start_at(Some(400), 3)).worker);
    }

    #[test]
    fn a_drained_burst_gives_its_places_back() {
        let pool = RunPool::new(4);
        for i in 0..2_000 {
            pool.push(start_at(Some(100), i));
        }
        assert!(pool.capacity() >= 2_000);
        while pool.next().is_some() {
            assert!(pool.capacity() >= pool.len());
        }
        assert!(
            pool.capacity() <= KEEP_PLACES,
            "{} places kept",
            pool.capacity()
        );
        // A small queue keeps its places: no allocation each time it empties.
        for i in 0..10 {
            pool.push(start_at(Some(200), i));
        }
        let small = pool.capacity();
        while pool.next().is_some() {}
        assert_eq!(pool.capacity(), small);
    }

    #[test]
    fn a_replaced_run_leaves_the_queue() {
        let pool = RunPool::new(1);
        let start = start_at(Some(100), 1);
        let id = start.run.id;
        assert!(pool.push(start).keeper);
        assert!(!pool.push(start_at(Some(200), 2)).keeper, "one keeper");
        assert!(pool.remove(id));
        assert!(!pool.remove(id));
        assert_eq!(pool.len(), 1);
    }
}
