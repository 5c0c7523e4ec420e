//! The routine engine: fires routines exactly when they should, exactly once
//! across processes, under their guardrails, and records every run.
//!
//! - **Time**: one timer sleeps until the earliest `next_fire_at` of any
//!   enabled routine (the store's index), then claims every due slot in one
//!   transaction. No fixed polling of the routines table: a second loop only
//!   reads one counter (`Store::routines_version`) every
//!   [`EngineSettings::change_poll`], so a routine changed by the CLI, a tool
//!   or another process is live within that time.
//! - **Exactly once**: a slot is taken by the store's compare-and-set on
//!   `next_fire_at` together with the unique `(routine, scheduled_for)` key,
//!   so of several engines on one database one runs each slot. Guardrails
//!   are checked in the same transaction ([`cairn_store::Admission`]).
//! - **Crash safety**: runs carry this engine's lease, renewed while it lives;
//!   a run whose engine died is reaped as `interrupted` by any engine.
//! - **Every refusal is a run**: a fire a guardrail holds back is recorded
//!   `skipped` with the reason.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_core::clock::Clock;
use cairn_core::notification::{NewNotification, Priority};
use cairn_core::routine::{Routine, RoutineRun, RunStatus, Trigger};
use cairn_core::schedule::Schedule;
use cairn_store::{Admission, Admitted, RunOutcome, SlotMove, Store, StoreError};
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
use super::plan::{SlotPlan, plan};
use super::webhook::{self, WebhookError};
use crate::notify::Notifier;

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
    /// Runs of all routines at once (`routines.max_concurrent`).
    pub max_concurrent: u32,
    /// The user's zone, for routines without their own.
    pub user_zone: Tz,
    /// How often the routines' change counter is read.
    pub change_poll: Duration,
    /// Due routines claimed per transaction.
    pub batch: u32,
    /// A slot later than this counts as missed (for `catch_up`).
    pub late_grace: Duration,
    /// At shutdown, how long running runs may take before they are interrupted.
    pub shutdown_grace: Duration,
}

impl EngineSettings {
    /// Defaults for an engine identified by `owner`.
    pub fn new(owner: impl Into<String>, user_zone: Tz) -> Self {
        Self {
            owner: owner.into(),
            lease: Duration::from_secs(60),
            max_concurrent: 10,
            user_zone,
            change_poll: Duration::from_secs(1),
            batch: 500,
            late_grace: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

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
    env: BTreeMap<String, String>,
    wake: Notify,
    triggered: RwLock<Triggered>,
    tasks: TaskTracker,
    stop_runs: CancellationToken,
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
        Self {
            inner: Arc::new(Inner {
                store,
                clock,
                executor,
                notifier,
                settings,
                env: std::env::vars().collect(),
                wake: Notify::new(),
                triggered: RwLock::new(Triggered::default()),
                tasks: TaskTracker::new(),
                stop_runs: CancellationToken::new(),
            }),
        }
    }

    /// Replaces the environment webhook secrets (`${VAR}`) are read from.
    pub fn with_env(self, env: BTreeMap<String, String>) -> Self {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => {
                inner.env = env;
                Self {
                    inner: Arc::new(inner),
                }
            }
            Err(inner) => Self { inner },
        }
    }

    /// The store it runs on.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Its settings.
    pub fn settings(&self) -> &EngineSettings {
        &self.inner.settings
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
        loop {
            let now = self.inner.clock.now();
            let mut full = false;
            match self.tick(now).await {
                Ok(report) => {
                    full = report.started + report.skipped + report.taken
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
            let sleep = async {
                match next {
                    Some(at) => self.inner.clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cancel.cancelled() => break,
                () = self.inner.wake.notified() => {}
                () = sleep => {}
            }
        }
        drop(upkeep);
        self.shutdown().await;
    }

    /// The loop beside the timer: the change counter every `change_poll`,
    /// orphan reaping every third of the lease. (Each run renews its own
    /// lease, so runs made by `routine fire` or a chat are covered too.)
    async fn upkeep(&self, cancel: CancellationToken) {
        let s = &self.inner.settings;
        let reap_every = (s.lease / 3).max(Duration::from_millis(100));
        let poll = s.change_poll.max(Duration::from_millis(10));
        let mut last_reap = self.inner.clock.now();
        loop {
            let now = self.inner.clock.now();
            let at = now + chrono::Duration::from_std(poll).unwrap_or_default();
            tokio::select! {
                () = cancel.cancelled() => return,
                () = self.inner.clock.sleep_until(at) => {}
            }
            match self.refresh_triggered().await {
                Ok(true) => self.poke(),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "routine engine: cannot read routine changes"),
            }
            let now = self.inner.clock.now();
            if (now - last_reap).to_std().unwrap_or_default() >= reap_every {
                last_reap = now;
                match self.inner.store.reap_orphans(now).await {
                    Ok(ids) if !ids.is_empty() => {
                        tracing::warn!(
                            runs = ids.len(),
                            "routine runs whose process stopped marked interrupted"
                        );
                        self.poke();
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "routine engine: cannot reap orphaned runs")
                    }
                }
            }
        }
    }

    /// Renews `run_id`'s lease every third of the lease, for as long as it is awaited.
    async fn keep_lease(&self, run_id: Uuid) -> std::convert::Infallible {
        let lease = self.inner.settings.lease;
        let every = chrono::Duration::from_std((lease / 3).max(Duration::from_millis(100)))
            .unwrap_or_default();
        loop {
            let at = self.inner.clock.now() + every;
            self.inner.clock.sleep_until(at).await;
            let until =
                self.inner.clock.now() + chrono::Duration::from_std(lease).unwrap_or_default();
            if let Err(e) = self.inner.store.renew_run_lease(run_id, until).await {
                tracing::warn!(run = %run_id, error = %e, "cannot renew a routine run's lease");
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
        let reason =
            format!("interrupted: the daemon stopped and the run did not finish within {grace}");
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
    }

    /// One timer round at `now`: reaps orphans, then claims and starts every
    /// due slot (a batch at a time).
    pub async fn tick(&self, now: DateTime<Utc>) -> Result<TickReport, StoreError> {
        let inner = &self.inner;
        let mut report = TickReport {
            reaped: inner.store.reap_orphans(now).await?.len(),
            ..TickReport::default()
        };
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
                        // Missed slots caught up with `all` run one after another.
                        for run in runs.into_iter().filter(|r| r.status == RunStatus::Running) {
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
                    });
                }
                Admitted::Skipped(reason) => {
                    report.skipped += runs.len();
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
                let zone = zone_of(routine, inner.settings.user_zone);
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
            global_max: Some(inner.settings.max_concurrent),
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

    fn new_run(
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
        }
    }

    /// Fires a routine now, outside its schedule: `routine fire`, the API, a
    /// tool. Cooldown does not apply; concurrency limits do. `run_id`
    /// chooses the run's id (a caller that printed it already).
    pub async fn fire_manual(
        &self,
        routine: &Routine,
        payload: Option<serde_json::Value>,
        run_id: Option<Uuid>,
    ) -> Result<Fired, FireError> {
        if !routine.spec.enabled {
            return Err(FireError::Disabled(routine.spec.name.clone()));
        }
        let fire = Unscheduled {
            trigger_type: "manual",
            detail: "fired by hand".to_string(),
            payload,
            cooled: false,
            depth: 0,
        };
        self.fire_unscheduled(routine, fire, run_id).await
    }

    /// [`offer_message`](Self::offer_message) in a task of this engine, so
    /// the chat's answer does not wait and [`shutdown`](Self::shutdown)
    /// still waits for the fires.
    pub fn offer_in_background(&self, channel: &str, text: &str) {
        let (engine, channel, text) = (self.clone(), channel.to_string(), text.to_string());
        self.inner.tasks.spawn(async move {
            let fired = engine.offer_message(&channel, &text).await;
            if !fired.is_empty() {
                tracing::info!(routines = fired.len(), "chat message fired event routines");
            }
        });
    }

    /// Offers an inbound chat message to the event routines; returns what fired.
    pub async fn offer_message(&self, channel: &str, text: &str) -> Vec<Fired> {
        // One counter read: a routine applied a moment ago already matches.
        if let Err(e) = self.refresh_triggered().await {
            tracing::warn!(error = %e, "cannot refresh event routines");
        }
        let matcher = Arc::clone(&self.inner.triggered.read().await.matcher);
        let ids = matcher.matches(channel, text);
        let mut fired = Vec::new();
        for id in ids {
            let routine = match self.inner.store.get_routine(id).await {
                Ok(Some(r)) if r.spec.enabled => r,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "event routine lookup failed");
                    continue;
                }
            };
            let fire = Unscheduled {
                trigger_type: "event",
                detail: format!("message on {channel}: {}", clip(text, 200)),
                payload: Some(serde_json::json!({ "channel": channel, "text": text })),
                cooled: true,
                depth: 0,
            };
            match self.fire_unscheduled(&routine, fire, None).await {
                Ok(f) => fired.push(f),
                Err(e) => {
                    tracing::warn!(routine = %routine.spec.name, error = %e, "event fire failed")
                }
            }
        }
        fired
    }

    /// Announces a system event to the `system_event` routines; returns what fired.
    pub async fn emit(&self, event: SystemEvent) -> Vec<Fired> {
        if event.depth > MAX_EVENT_DEPTH {
            tracing::warn!(event = %event.name, depth = event.depth, "system event chain cut: routines may be firing each other");
            return Vec::new();
        }
        let routines: Vec<Routine> = self
            .inner
            .triggered
            .read()
            .await
            .system
            .iter()
            .filter(|r| r.spec.enabled && event.fires(&r.spec.trigger))
            .cloned()
            .collect();
        let mut fired = Vec::new();
        for routine in routines {
            let fire = Unscheduled {
                trigger_type: "system_event",
                detail: event.name.clone(),
                payload: Some(event.payload()),
                cooled: true,
                depth: event.depth + 1,
            };
            match self.fire_unscheduled(&routine, fire, None).await {
                Ok(f) => fired.push(f),
                Err(e) => {
                    tracing::warn!(routine = %routine.spec.name, error = %e, "system event fire failed")
                }
            }
        }
        fired
    }

    /// Emits `job.finished` and `notification.failed` as they happen, until `cancel`.
    pub fn forward_events(
        &self,
        mut jobs: Option<tokio::sync::broadcast::Receiver<cairn_core::job::JobRecord>>,
        mut given_up: Option<tokio::sync::broadcast::Receiver<crate::notify::GivenUp>>,
        cancel: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        use tokio::sync::broadcast::error::RecvError;
        let engine = self.clone();
        tokio::spawn(async move {
            async fn next<T: Clone>(
                rx: &mut Option<tokio::sync::broadcast::Receiver<T>>,
            ) -> Option<T> {
                let Some(r) = rx.as_mut() else {
                    return std::future::pending().await;
                };
                loop {
                    match r.recv().await {
                        Ok(item) => return Some(item),
                        Err(RecvError::Lagged(n)) => {
                            tracing::warn!(
                                missed = n,
                                "system events were dropped: too many at once"
                            );
                        }
                        Err(RecvError::Closed) => {
                            *rx = None;
                            return std::future::pending().await;
                        }
                    }
                }
            }
            loop {
                let event = tokio::select! {
                    () = cancel.cancelled() => return,
                    Some(job) = next(&mut jobs) => SystemEvent::job_finished(&job),
                    Some(n) = next(&mut given_up) => SystemEvent::notification_failed(&n),
                };
                engine.emit(event).await;
            }
        })
    }

    /// The webhook routine at `path` (its `path`, else its id), if any.
    pub async fn webhook_routine(&self, path: &str) -> Option<Routine> {
        let triggered = self.inner.triggered.read().await;
        triggered
            .webhooks
            .iter()
            .find(|r| match &r.spec.trigger {
                Trigger::Webhook { path: Some(p), .. } => {
                    p.trim_matches('/') == path.trim_matches('/')
                }
                _ => false,
            })
            .or_else(|| triggered.webhooks.iter().find(|r| r.id.to_string() == path))
            .cloned()
    }

    /// Fires the webhook routine at `path` with `body`. A routine with a
    /// secret needs `signature` (the `X-Signature-256` header) to match;
    /// one without needs the caller to have checked a bearer token
    /// (`bearer_ok`).
    pub async fn fire_webhook(
        &self,
        path: &str,
        body: &[u8],
        signature: Option<&str>,
        bearer_ok: bool,
    ) -> Result<Fired, WebhookFireError> {
        self.refresh_triggered().await.map_err(FireError::from)?;
        let routine = self
            .webhook_routine(path)
            .await
            .ok_or_else(|| WebhookError::Unknown(path.to_string()))?;
        if !routine.spec.enabled {
            return Err(WebhookError::Disabled(routine.spec.name.clone()).into());
        }
        match &routine.spec.trigger {
            Trigger::Webhook {
                secret: Some(secret),
                ..
            } => {
                let secret = webhook::resolve_secret(&routine.spec.name, secret, &self.inner.env)?;
                webhook::verify(&secret, body, signature)?;
            }
            _ if bearer_ok => {}
            _ => return Err(WebhookError::MissingSignature.into()),
        }
        let payload = serde_json::from_slice::<serde_json::Value>(body).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(body).into_owned())
        });
        let fire = Unscheduled {
            trigger_type: "webhook",
            detail: format!("webhook {path} ({} bytes)", body.len()),
            payload: Some(payload),
            cooled: true,
            depth: 0,
        };
        Ok(self.fire_unscheduled(&routine, fire, None).await?)
    }

    /// Admits and starts an unscheduled fire (`run_id` chooses the run's id).
    async fn fire_unscheduled(
        &self,
        routine: &Routine,
        unscheduled: Unscheduled,
        run_id: Option<Uuid>,
    ) -> Result<Fired, FireError> {
        let Unscheduled {
            trigger_type,
            detail,
            payload,
            cooled,
            depth,
        } = unscheduled;
        let mut run = self.new_run(routine, trigger_type, None, self.inner.clock.now());
        if let Some(id) = run_id {
            run.id = id;
        }
        run.trigger_detail = Some(detail);
        let fire = FireContext {
            trigger_type: trigger_type.to_string(),
            detail: run.trigger_detail.clone(),
            payload,
            scheduled_for: None,
        };
        let g = &routine.spec.guardrails;
        if cooled && g.dedup_window.is_some() {
            run.dedup_key = fire.payload.as_ref().map(dedup_key);
        }
        let admission = Admission {
            dedup_window: if cooled { g.dedup_window } else { None },
            cooldown: if cooled { Some(g.cooldown) } else { None },
            max_concurrent: Some(g.max_concurrent),
            global_max: Some(self.inner.settings.max_concurrent),
            max_runs: g.max_runs,
            ..Admission::default()
        };
        let admitted = self
            .inner
            .store
            .admit_runs(&[(admission, vec![run.clone()])])
            .await?
            .pop()
            .unwrap_or(Admitted::Taken);
        match &admitted {
            Admitted::Started => {
                tracing::info!(routine = %routine.spec.name, trigger = %run.trigger_type, "routine fired");
                let engine = self.clone();
                let routine_owned = routine.clone();
                let run_owned = run.clone();
                self.inner.tasks.spawn(async move {
                    engine
                        .execute(routine_owned, run_owned, fire, depth, None)
                        .await;
                });
            }
            Admitted::Skipped(reason) => {
                tracing::info!(routine = %routine.spec.name, %reason, "routine fire skipped");
            }
            Admitted::Taken => return Err(FireError::Gone(routine.spec.name.clone())),
        }
        Ok(Fired {
            routine_id: routine.id,
            routine: routine.spec.name.clone(),
            run_id: run.id,
            admitted,
        })
    }

    /// Carries out an admitted run: the action under the timeout, the
    /// notification, the record, the `routine.finished` event, retention.
    ///
    /// Boxed, because it can fire system-event routines whose runs execute
    /// the same way: the future's type would otherwise contain itself.
    fn execute(
        &self,
        routine: Routine,
        run: RoutineRun,
        fire: FireContext,
        depth: u32,
        note: Option<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>> {
        let engine = self.clone();
        Box::pin(async move { engine.execute_now(routine, run, fire, depth, note).await })
    }

    async fn execute_now(
        &self,
        routine: Routine,
        run: RoutineRun,
        fire: FireContext,
        depth: u32,
        note: Option<String>,
    ) {
        let inner = &self.inner;
        let cancel = inner.stop_runs.child_token();
        let request = ActionRequest {
            routine: routine.clone(),
            run_id: run.id,
            fire,
            cancel: cancel.clone(),
        };
        let executed = inner.executor.execute(request);
        let action = async {
            tokio::select! {
                outcome = executed => outcome,
                never = self.keep_lease(run.id) => match never {},
            }
        };
        let mut outcome = match routine.spec.guardrails.timeout {
            Some(limit) => {
                let deadline =
                    inner.clock.now() + chrono::Duration::from_std(limit).unwrap_or_default();
                tokio::select! {
                    outcome = action => outcome,
                    () = inner.clock.sleep_until(deadline) => {
                        cancel.cancel();
                        ActionOutcome::failed(format!(
                            "timed out after {}",
                            cairn_core::duration::format(limit)
                        ))
                    }
                }
            }
            None => action.await,
        };
        if let Some(note) = note {
            outcome.summary = Some(match outcome.summary.take() {
                Some(s) => format!("{note}\n{s}"),
                None => note,
            });
        }
        let notification_id = self.notify(&routine, &run, &outcome).await;
        let now = inner.clock.now();
        let record = RunOutcome {
            status: outcome.status,
            summary: outcome.summary.clone(),
            tokens_used: outcome.tokens_used,
            completed_at: now,
            notification_id,
            state: outcome.state.clone(),
            retain: Some(routine.spec.guardrails.retention),
        };
        match inner.store.finish_run(run.id, &record).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(routine = %routine.spec.name, run = %run.id, "run had already been marked interrupted; its late outcome was not recorded")
            }
            Err(e) => {
                tracing::error!(routine = %routine.spec.name, run = %run.id, error = %e, "cannot record the run's outcome")
            }
        }
        tracing::info!(
            routine = %routine.spec.name,
            run = %run.id,
            status = %outcome.status,
            "routine run finished"
        );
        let mut event = SystemEvent::new(
            events::ROUTINE_FINISHED,
            [
                ("routine", routine.spec.name.clone()),
                ("status", outcome.status.to_string()),
                ("run_id", run.id.to_string()),
            ],
        );
        event.depth = depth;
        if !inner.triggered.read().await.system.is_empty() {
            self.emit(event).await;
        }
    }

    /// Sends what the run's outcome and the routine's notify settings call for.
    async fn notify(
        &self,
        routine: &Routine,
        run: &RoutineRun,
        outcome: &ActionOutcome,
    ) -> Option<Uuid> {
        let notifier = self.inner.notifier.as_ref()?;
        let n = &routine.spec.notify;
        let name = &routine.spec.name;
        let (title, body, priority) = match &outcome.notice {
            Some(notice) => (
                notice.title.clone().unwrap_or_else(|| name.clone()),
                notice.body.clone(),
                Priority::Normal,
            ),
            None => {
                let wanted = match outcome.status {
                    RunStatus::Attention => n.on_attention,
                    RunStatus::Failed => n.on_failure,
                    RunStatus::Ok => n.on_success,
                    _ => false,
                };
                if !wanted {
                    return None;
                }
                let title = match outcome.status {
                    RunStatus::Failed => format!("{name} failed"),
                    RunStatus::Attention => format!("{name} needs attention"),
                    _ => format!("{name}: nothing to report"),
                };
                let priority = if outcome.status == RunStatus::Failed {
                    Priority::High
                } else {
                    Priority::Normal
                };
                let body = outcome
                    .summary
                    .clone()
                    .unwrap_or_else(|| format!("run {} ended {}", run.id, outcome.status));
                (title, body, priority)
            }
        };
        let new = NewNotification {
            user_id: n.user.clone().unwrap_or_else(|| routine.user_id.clone()),
            channel: n.channel.clone(),
            title,
            body,
            priority,
            tags: vec!["routine".into(), outcome.status.to_string()],
            data: Some(serde_json::json!({
                "routine": name,
                "routine_id": routine.id,
                "run_id": run.id,
                "status": outcome.status,
                "trigger": run.trigger_type,
                "scheduled_for": run.scheduled_for,
            })),
            source: format!("routine:{}", run.id),
        };
        match notifier.send(new, self.inner.clock.now()).await {
            Ok(sent) => Some(sent.id),
            Err(e) => {
                tracing::error!(routine = %name, error = %e, "cannot record the run's notification");
                None
            }
        }
    }

    /// Reloads the event, system-event and webhook routines if the
    /// routines changed; returns whether they had.
    pub async fn refresh_triggered(&self) -> Result<bool, StoreError> {
        let version = self.inner.store.routines_version().await?;
        if self.inner.triggered.read().await.version == Some(version) {
            return Ok(false);
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
        Ok(true)
    }
}

/// A fire that is not a scheduled slot.
struct Unscheduled {
    /// `manual`, `event`, `system_event` or `webhook`.
    trigger_type: &'static str,
    /// The run's trigger detail.
    detail: String,
    /// What the action is handed.
    payload: Option<serde_json::Value>,
    /// Whether cooldown and dedup apply (not to manual fires).
    cooled: bool,
    /// Links of system-event firings that led here.
    depth: u32,
}

/// Why a webhook fire failed.
#[derive(Debug, thiserror::Error)]
pub enum WebhookFireError {
    /// Verification failed (unknown routine, signature).
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// Recording failed.
    #[error(transparent)]
    Fire(#[from] FireError),
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

/// The zone a routine's schedule is read in: its own, else the user's.
pub fn zone_of(routine: &Routine, user_zone: Tz) -> Tz {
    routine
        .spec
        .timezone
        .as_deref()
        .and_then(|z| z.parse().ok())
        .unwrap_or(user_zone)
}

fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}
