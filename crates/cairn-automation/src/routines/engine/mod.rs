//! The routine engine: fires routines exactly when they should, exactly once
//! across processes, under their guardrails, and records every run.
//!
//! - **Time**: one timer sleeps until the earliest `next_fire_at` of any
//!   enabled routine (the store's index), then claims every due slot in one
//!   transaction; a crowded slot's routines are claimed a little ahead of it
//!   (`ahead.rs`). Nothing polls: a second loop waits on the store's change
//!   signal ([`Topic::Routines`]), so a routine changed by the CLI, a tool or
//!   another process wakes the timer at once, and reaps orphaned runs only
//!   when a lease can have lapsed (the earliest lease end of a running run).
//! - **Exactly once**: a slot is taken by the store's compare-and-set on
//!   `next_fire_at` together with the unique `(routine, scheduled_for)` key,
//!   so of several engines on one database one runs each slot. Guardrails
//!   are checked in the same transaction ([`cairn_store::Admission`]).
//! - **Crash safety**: runs carry this engine's lease, renewed while it lives;
//!   a run whose engine died is reaped as `interrupted` by any engine (at
//!   once by the next daemon of the same home). That is not the routine's
//!   failure, and a slot safe to repeat is re-run once by the reaper.
//! - **Every refusal is a run**: a fire a guardrail holds back is recorded
//!   `skipped` with the reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cairn_core::clock::Clock;
use cairn_core::notification::{NewNotification, Notification};
use cairn_core::routine::{Routine, RoutineRun, RunStatus, Trigger};
use cairn_store::{
    Admission, Admitted, AutoPause, FinishRun, Finished, RunOutcome, SlotMove, Store, StoreError,
    Topic,
};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use sha2::{Digest, Sha256};
use tokio::sync::{Notify, RwLock};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use super::action::{ActionExecutor, ActionOutcome, ActionRequest, FireContext};
use super::event_matcher::{EventMatcher, EventPattern};
use super::events::{self, MAX_EVENT_DEPTH, SystemEvent};
use super::plan::plan;
use super::webhook::{self, Delivery, WebhookError};
use crate::notify::Notifier;

mod admit;
mod ahead;
mod execute;
mod fire;
mod pool;
mod queue_full;
mod reap;
mod timed;
mod tries;
mod waiting;

pub use fire::{QUIET_REFUSALS, REPLAY_REASON, WebhookFireError};
/// Waits after consecutive failures before the next scheduled fire is
/// attempted: 30 s, 1 min, 5 min, 15 min, then 60 min.
pub const BACKOFF: [Duration; 5] = [
    Duration::from_secs(30),
    Duration::from_secs(60),
    Duration::from_secs(300),
    Duration::from_secs(900),
    Duration::from_secs(3600),
];

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// This engine's id in run leases (unique per process).
    pub owner: String,
    /// How long a run's lease lasts; renewed every third of it.
    pub lease: Duration,
    /// Runs of all routines at once (`routines.max_concurrent`); more wait
    /// in the global queue.
    pub max_concurrent: u32,
    /// Runs that may wait in the global queue (`routines.max_waiting`);
    /// more are refused, and the person is told.
    pub max_waiting: u32,
    /// Whether this engine starts every routine's waiting runs (its own
    /// and other processes'): a daemon's does. A one-off command's
    /// (`routine fire`, `backfill`) starts only those of the routine it
    /// runs and leaves the rest to a daemon, since it stops when it is done.
    pub starts_waiting: bool,
    /// The user's zone, for routines without their own.
    pub user_zone: Tz,
    /// Due routines claimed per transaction.
    pub batch: u32,
    /// Runs this engine carries out at once (its own bound under
    /// `max_concurrent`; more wait in its queue, in slot order). Sized to the
    /// machine by [`EngineSettings::new`].
    pub pool: usize,
    /// A slot later than this counts as missed (for `catch_up`).
    pub late_grace: Duration,
    /// At shutdown, how long running runs may take before they are interrupted.
    pub shutdown_grace: Duration,
    /// The start of every owner id of this home's daemons, when this engine
    /// is one (it holds the home's lock): at start, runs held by other
    /// owners starting with it are reaped at once.
    pub home_prefix: Option<String>,
    /// The environment read at start-up (webhook secrets written `${VAR}`).
    pub env: cairn_core::config::Environment,
}

impl EngineSettings {
    /// Defaults for an engine identified by `owner`.
    pub fn new(owner: impl Into<String>, user_zone: Tz) -> Self {
        Self {
            owner: owner.into(),
            lease: Duration::from_secs(60),
            max_concurrent: 10,
            max_waiting: 10_000,
            starts_waiting: true,
            user_zone,
            batch: 500,
            pool: pool::machine_size(),
            late_grace: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            home_prefix: None,
            env: cairn_core::config::Environment::default(),
        }
    }
}

/// [`Inner::lease_hint`] when no run is running.
const NO_LEASE: i64 = i64::MAX;
/// [`Inner::lease_hint`] before the upkeep read it.
const LEASE_UNKNOWN: i64 = i64::MIN;

/// What became of a fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    /// The routine.
    pub routine_id: Uuid,
    /// Its name.
    pub routine: String,
    /// The run recorded for it (running, or skipped with the reason).
    pub run_id: Uuid,
    /// `Started`, or `Skipped` with the guardrail's reason.
    pub admitted: Admitted,
}

/// Why a fire could not even be recorded.
#[derive(Debug, thiserror::Error)]
pub enum FireError {
    /// The routine is disabled.
    #[error("routine \"{0}\" is disabled; enable it first")]
    Disabled(String),
    /// The routine is paused (the reason says by whom, when, why).
    #[error("routine \"{0}\" is {1}; resume it first")]
    Paused(String, String),
    /// The routine was deleted meanwhile.
    #[error("routine \"{0}\" no longer exists")]
    Gone(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one timer round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Runs started.
    pub started: usize,
    /// Runs recorded as skipped.
    pub skipped: usize,
    /// Slots another engine had taken first.
    pub taken: usize,
    /// Slots recorded waiting their turn (`overlap: buffer_*`, catch-up,
    /// the global queue).
    pub waiting: usize,
    /// Orphaned runs reaped.
    pub reaped: usize,
}

/// The routines fired by something other than time, cached per change.
#[derive(Default)]
struct Triggered {
    version: Option<i64>,
    matcher: Arc<EventMatcher>,
    system: Vec<Routine>,
    webhooks: Vec<Routine>,
}

struct Inner {
    store: Store,
    clock: Arc<dyn Clock>,
    executor: Arc<dyn ActionExecutor>,
    notifier: Option<Notifier>,
    settings: EngineSettings,
    /// `settings.max_concurrent`, changeable while running (a reload).
    max_concurrent: std::sync::atomic::AtomicU32,
    /// `settings.max_waiting`, changeable while running.
    max_waiting: std::sync::atomic::AtomicU32,
    /// Runs refused by a full queue, not yet told to the person.
    queue_full: queue_full::QueueFullNotices,
    env: cairn_core::config::Environment,
    wake: Notify,
    triggered: RwLock<Triggered>,
    tasks: TaskTracker,
    stop_runs: CancellationToken,
    admissions: admit::AdmitQueue,
    finishes: admit::FinishQueue,
    /// Serialises reads of the change counter (see `refresh_triggered`).
    refresh_gate: tokio::sync::Mutex<()>,
    /// Counter reads started so far, numbered from 1.
    refresh_started: AtomicU64,
    /// The number of the latest counter read that completed.
    refresh_served: AtomicU64,
    /// The earliest lease end of a running run as the upkeep last read it
    /// (microseconds; [`NO_LEASE`] when none runs, [`LEASE_UNKNOWN`]
    /// before the first read). Leases only move later and new runs end
    /// later, so a stale value can only cause an extra reap, never a missed one.
    lease_hint: std::sync::atomic::AtomicI64,
    /// Told of each run's start and end on the run's own task.
    runs: cairn_core::watchers::Watchers<RunEvent>,
    /// The runs this engine is carrying out, to stop one `cancel_other` replaced.
    live: execute::LiveRuns,
    /// The admitted runs waiting for, and being carried out by, the pool.
    pool: pool::RunPool,
}

/// A run started or finished, for live observers (the gateway's event
/// stream, the `on_routine_run` hooks): see [`RoutineEngine::watch_runs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEvent {
    /// An admitted run began executing.
    Started {
        /// The routine's name.
        routine: String,
        /// The run.
        run_id: Uuid,
        /// What fired it (`cron`, `webhook`, `manual`, …).
        trigger: String,
    },
    /// A run ended.
    Finished {
        /// The routine's name.
        routine: String,
        /// The run.
        run_id: Uuid,
        /// How it ended.
        status: RunStatus,
        /// The outcome's summary.
        summary: Option<String>,
    },
}

/// The engine; cheap to clone (all clones are one engine).
#[derive(Clone)]
pub struct RoutineEngine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RoutineEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutineEngine")
            .field("owner", &self.inner.settings.owner)
            .finish_non_exhaustive()
    }
}

/// The content hash `dedup_window` compares.
pub fn dedup_key(payload: &serde_json::Value) -> String {
    let digest = Sha256::digest(payload.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl RoutineEngine {
    /// An engine over `store`; `notifier` tells the person about runs (none: runs are only recorded).
    pub fn new(
        store: Store,
        clock: Arc<dyn Clock>,
        executor: Arc<dyn ActionExecutor>,
        notifier: Option<Notifier>,
        settings: EngineSettings,
    ) -> Self {
        let runs_pool = pool::RunPool::new(settings.pool);
        Self {
            inner: Arc::new(Inner {
                store,
                clock,
                executor,
                notifier,
                max_concurrent: std::sync::atomic::AtomicU32::new(settings.max_concurrent),
                max_waiting: std::sync::atomic::AtomicU32::new(settings.max_waiting),
                queue_full: queue_full::QueueFullNotices::default(),
                env: settings.env.clone(),
                settings,
                wake: Notify::new(),
                triggered: RwLock::new(Triggered::default()),
                tasks: TaskTracker::new(),
                stop_runs: CancellationToken::new(),
                admissions: admit::AdmitQueue::default(),
                finishes: admit::FinishQueue::default(),
                refresh_gate: tokio::sync::Mutex::new(()),
                refresh_started: AtomicU64::new(0),
                refresh_served: AtomicU64::new(0),
                lease_hint: std::sync::atomic::AtomicI64::new(LEASE_UNKNOWN),
                runs: cairn_core::watchers::Watchers::default(),
                live: execute::LiveRuns::default(),
                pool: runs_pool,
            }),
        }
    }

    /// Tells `watcher` of every run's start and end from now on, on the
    /// run's own task (it must return at once): in place, not through a
    /// channel, so a burst's thousands of events reach it whole.
    pub fn watch_runs(&self, watcher: cairn_core::watchers::Watcher<RunEvent>) {
        self.inner.runs.add(watcher);
    }

    /// The store it runs on.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Its settings.
    pub fn settings(&self) -> &EngineSettings {
        &self.inner.settings
    }

    /// Changes the limit on runs of all routines at once (`routines.max_concurrent`
    /// reloaded); runs already admitted go on.
    pub fn set_max_concurrent(&self, max: u32) {
        self.inner
            .max_concurrent
            .store(max.max(1), Ordering::Relaxed);
        self.poke();
    }

    /// The limit on runs of all routines at once now in force.
    pub fn max_concurrent(&self) -> u32 {
        self.inner.max_concurrent.load(Ordering::Relaxed)
    }

    /// Changes how many runs may wait in the global queue
    /// (`routines.max_waiting` reloaded); runs already waiting stay.
    pub fn set_max_waiting(&self, max: u32) {
        self.inner.max_waiting.store(max, Ordering::Relaxed);
    }

    /// How many runs may wait in the global queue now.
    pub fn max_waiting(&self) -> u32 {
        self.inner.max_waiting.load(Ordering::Relaxed)
    }

    /// Wakes the timer (a routine was changed in this process).
    pub fn poke(&self) {
        self.inner.wake.notify_one();
    }

    /// Runs until `cancel`: reaps what a previous process left running,
    /// announces `daemon.started`, then fires routines as they come due.
    /// On cancel, running runs get [`EngineSettings::shutdown_grace`], then
    /// are cancelled and recorded `interrupted`.
    pub async fn run(&self, cancel: CancellationToken) {
        self.reap_predecessors().await;
        if let Err(e) = self.refresh_triggered().await {
            tracing::warn!(error = %e, "routine engine: cannot load event routines");
        }
        let owner = self.inner.settings.owner.clone();
        self.emit(SystemEvent::new(events::DAEMON_STARTED, [("owner", owner)]))
            .await;
        // Dropped with this future (an aborted daemon), the upkeep stops too.
        let upkeep = AbortOnDrop(tokio::spawn({
            let engine = self.clone();
            let cancel = cancel.clone();
            async move { engine.upkeep(cancel).await }
        }));
        let mut claimed: Option<ahead::ClaimedAhead> = None;
        // A slot whose claim ahead failed is claimed at the slot instead.
        let mut not_ahead = None;
        loop {
            let now = self.inner.clock.now();
            if let Some(slot) = claimed.take_if(|c| c.begin_at() <= now) {
                self.start_claimed(slot).await;
                // The slot's round, at once, takes what was left for it.
                continue;
            }
            let mut full = false;
            match self.tick(now).await {
                Ok(report) => {
                    full = report.started + report.skipped + report.taken + report.waiting
                        >= self.inner.settings.batch as usize
                }
                Err(e) => tracing::warn!(error = %e, "routine engine: round failed"),
            }
            if full {
                continue;
            }
            let next = match self.inner.store.earliest_fire_at().await {
                Ok(next) => next,
                Err(e) => {
                    tracing::warn!(error = %e, "routine engine: cannot read the next slot");
                    Some(now + chrono::Duration::seconds(5))
                }
            };
            // A crowded slot is claimed a little before it (see `ahead.rs`).
            let early = match next {
                Some(at) if claimed.is_none() && not_ahead != Some(at) => {
                    self.claim_ahead_at(at).await.map(|wake| (wake, at))
                }
                _ => None,
            };
            let wake = [
                early.map(|(w, _)| w),
                claimed.as_ref().map(ahead::ClaimedAhead::begin_at),
                next,
            ]
            .into_iter()
            .flatten()
            .min();
            let sleep = async {
                match wake {
                    Some(at) => self.inner.clock.sleep_until_exact(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => {
                    // Claimed is owed: started at its slot (at most a lead
                    // away), then stopped with the other runs.
                    if let Some(slot) = claimed.take() {
                        self.inner.clock.sleep_until_exact(slot.at).await;
                        self.start_claimed(slot).await;
                    }
                    break;
                }
                // Something changed: the next slot is read afresh.
                () = self.inner.wake.notified() => {}
                () = sleep => {
                    if let Some((_, at)) = early {
                        match self.claim_ahead(at).await {
                            Ok(slot) => claimed = Some(slot),
                            Err(e) => {
                                tracing::warn!(error = %e, "routine engine: cannot claim a slot ahead; claiming it at the slot");
                                not_ahead = Some(at);
                            }
                        }
                    }
                }
            }
        }
        drop(upkeep);
        self.shutdown().await;
    }

    /// The loop beside the timer, asleep until something happens: a routine
    /// changed anywhere (the store's signal) reloads the cached routines
    /// and wakes the timer; a run's lease reaching its end (the earliest
    /// among running runs, re-read when a run is admitted anywhere) reaps
    /// orphans. (Each run renews its own lease, so runs made by `routine
    /// fire` or a chat are covered too.)
    async fn upkeep(&self, cancel: CancellationToken) {
        let store = &self.inner.store;
        let clock = &self.inner.clock;
        let mut routines = store.watch(Topic::Routines);
        let mut runs = store.watch(Topic::Runs);
        let mut polled = self.inner.triggered.read().await.version;
        loop {
            let lapse = match store.earliest_run_lease_end().await {
                Ok(at) => {
                    let hint = at.map_or(NO_LEASE, |t| t.timestamp_micros());
                    self.inner.lease_hint.store(hint, Ordering::SeqCst);
                    at
                }
                Err(e) => {
                    tracing::warn!(error = %e, "routine engine: cannot read run leases");
                    self.inner.lease_hint.store(LEASE_UNKNOWN, Ordering::SeqCst);
                    Some(clock.now() + chrono::Duration::seconds(5))
                }
            };
            if let Some(at) = lapse
                && at < clock.now()
            {
                self.reap_lapsed(clock.now()).await;
            }
            // The reap's condition is `lease_until < now`: wake just after.
            let lapse_sleep = async {
                match lapse {
                    Some(at) => {
                        clock
                            .sleep_until(at + chrono::Duration::milliseconds(1))
                            .await
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => return,
                () = routines.changed() => {
                    // Its own read, compared with its own last: a webhook's
                    // refresh may have reloaded the cache, but the timer
                    // still needs the poke.
                    match self.reload_triggered().await {
                        Ok((version, _)) if Some(version) != polled => {
                            polled = Some(version);
                            self.poke();
                            tracing::debug!(version, "routine engine: routines changed; live");
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %e, "routine engine: cannot read routine changes");
                            self.poke();
                        }
                    }
                }
                // A slot set waiting elsewhere (a backfill) may start here.
                () = runs.changed() => {
                    self.start_waiting(None).await;
                }
                () = lapse_sleep => {}
            }
        }
    }

    /// Whether a running run's lease can have ended by `now` (so a timer
    /// round reaps first): unknown counts as yes.
    fn lease_may_have_lapsed(&self, now: DateTime<Utc>) -> bool {
        match self.inner.lease_hint.load(Ordering::SeqCst) {
            NO_LEASE => false,
            LEASE_UNKNOWN => true,
            end => end < now.timestamp_micros(),
        }
    }

    /// Reaps runs whose lease lapsed (see `reap.rs`), logging a failure and
    /// waiting a little before the next lease read decides again.
    async fn reap_lapsed(&self, now: DateTime<Utc>) {
        match self.reap(now).await {
            Ok(n) if n > 0 => self.poke(),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "routine engine: cannot reap orphaned runs");
                // Not at once again: the next lease read decides.
                let later = now + chrono::Duration::seconds(5);
                self.inner.clock.sleep_until(later).await;
            }
        }
    }

    /// Waits for running runs up to [`EngineSettings::shutdown_grace`],
    /// then cancels them and records them `interrupted`. [`run`](Self::run)
    /// ends with it; a process that only fired routines calls it before exit.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        inner.tasks.close();
        let deadline = inner.clock.now()
            + chrono::Duration::from_std(inner.settings.shutdown_grace).unwrap_or_default();
        tokio::select! {
            () = inner.tasks.wait() => return,
            () = inner.clock.sleep_until(deadline) => {}
        }
        let grace = cairn_core::duration::format(inner.settings.shutdown_grace);
        let reason = format!(
            "interrupted: the daemon stopped and the run did not finish within {grace}; not re-run (a stop is not a crash)"
        );
        match inner
            .store
            .interrupt_owned(&inner.settings.owner, inner.clock.now(), &reason)
            .await
        {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(runs = ids.len(), "routine runs interrupted by shutdown")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot record interrupted routine runs"),
        }
        inner.stop_runs.cancel();
        inner.live.cancel_all();
        // The actions see the cancel; their late outcomes are refused by the store.
        let brief = inner.clock.now() + chrono::Duration::seconds(2);
        tokio::select! {
            () = inner.tasks.wait() => {}
            () = inner.clock.sleep_until(brief) => {}
        }
    }

    /// Waits until every run this engine started has ended (tests, `routine fire`).
    pub async fn idle(&self) {
        // A tracker's wait needs it closed; reopen it for later runs.
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        self.inner.tasks.reopen();
        // The runs' answers come before the batch closing their busy spell,
        // which prunes what their ends put off: idle once that is written.
        self.inner.finishes.settled().await;
    }

    /// Reloads the event, system-event and webhook routines if the
    /// routines changed; returns whether they had (`false` also when a
    /// concurrent caller's read served this one).
    ///
    /// Callers arriving together share one read of the change counter: a
    /// read that started after this call began sees every change committed
    /// before it, so it answers for this call as well as its own. Under a
    /// burst of webhooks that is one statement per read's round-trip
    /// instead of one per request, and a routine changed a moment before
    /// still counts.
    pub async fn refresh_triggered(&self) -> Result<bool, StoreError> {
        let inner = &self.inner;
        let arrived = inner.refresh_started.load(Ordering::SeqCst);
        if inner.refresh_served.load(Ordering::SeqCst) > arrived {
            return Ok(false);
        }
        let _gate = inner.refresh_gate.lock().await;
        if inner.refresh_served.load(Ordering::SeqCst) > arrived {
            return Ok(false);
        }
        let read = inner.refresh_started.fetch_add(1, Ordering::SeqCst) + 1;
        let (_, changed) = self.reload_unshared().await?;
        inner.refresh_served.fetch_max(read, Ordering::SeqCst);
        Ok(changed)
    }

    /// Reads the change counter (not shared) and reloads on a change:
    /// the counter and whether the cache changed.
    async fn reload_triggered(&self) -> Result<(i64, bool), StoreError> {
        let inner = &self.inner;
        let _gate = inner.refresh_gate.lock().await;
        let read = inner.refresh_started.fetch_add(1, Ordering::SeqCst) + 1;
        let done = self.reload_unshared().await?;
        inner.refresh_served.fetch_max(read, Ordering::SeqCst);
        Ok(done)
    }

    /// The read and reload itself; the caller holds `refresh_gate`.
    async fn reload_unshared(&self) -> Result<(i64, bool), StoreError> {
        let version = self.inner.store.routines_version().await?;
        if self.inner.triggered.read().await.version == Some(version) {
            return Ok((version, false));
        }
        let routines = self.inner.store.list_triggered_routines().await?;
        let patterns: Vec<EventPattern> = routines
            .iter()
            .filter_map(EventPattern::from_routine)
            .collect();
        // Compiling thousands of patterns takes a while: off the async threads.
        let matcher = tokio::task::spawn_blocking(move || build_matcher(patterns))
            .await
            .unwrap_or_else(|_| EventMatcher::empty());
        let pick = |kind: fn(&Trigger) -> bool| -> Vec<Routine> {
            routines
                .iter()
                .filter(|r| r.spec.enabled && kind(&r.spec.trigger))
                .cloned()
                .collect()
        };
        let system = pick(|t| matches!(t, Trigger::SystemEvent { .. }));
        let webhooks = pick(|t| matches!(t, Trigger::Webhook { .. }));
        *self.inner.triggered.write().await = Triggered {
            version: Some(version),
            matcher: Arc::new(matcher),
            system,
            webhooks,
        };
        Ok((version, true))
    }
}

/// The matcher over the patterns that compile; a bad stored pattern (which
/// `routine apply` refuses) is logged and left out rather than silencing all.
fn build_matcher(patterns: Vec<EventPattern>) -> EventMatcher {
    match EventMatcher::build(patterns.clone()) {
        Ok(m) => m,
        Err(errors) => {
            let bad: Vec<Option<Uuid>> = errors.iter().map(|e| e.routine_id).collect();
            for e in &errors {
                tracing::error!(error = %e, "event routine left out of matching");
            }
            EventMatcher::build(patterns.into_iter().filter(|p| !bad.contains(&Some(p.id))))
                .unwrap_or_default()
        }
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
