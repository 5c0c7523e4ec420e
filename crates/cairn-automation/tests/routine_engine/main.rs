//! The routine engine over the real store, on tokio's paused clock: days of
//! schedules run in milliseconds and no test waits for a slot in real time.
//! Actions are scripted here (the real executors have their own tests); the
//! engine's part is when, how often, under which guardrails, and the record.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_automation::notify::{ChannelSet, Notifier, NotifySettings};
use cairn_automation::routines::action::{
    ActionExecutor, ActionOutcome, ActionRequest, FireContext, Notice,
};
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_automation::routines::events::MAX_EVENT_DEPTH;
use cairn_core::clock::{Clock, ManualClock};
use cairn_core::routine::{Routine, RoutineRun, RoutineSpec, RunStatus, SpecFormat, Trigger};
use cairn_core::schedule::Schedule;
use cairn_store::{Admitted, Store};
use chrono::{DateTime, TimeZone, Utc};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Runs each listed case on SQLite and, when `CAIRN_TEST_POSTGRES_URL` is
/// set, on PostgreSQL, both under tokio's paused time.
macro_rules! on_both_backends {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(start_paused = true, flavor = "current_thread")]
                async fn $case() {
                    let dir = tempfile::tempdir().unwrap();
                    let url = format!("sqlite://{}/cairn.db", dir.path().display());
                    super::$case(&url).await;
                }
            )*
        }
        mod postgres {
            $(
                // The schema is made on a runtime of its own: this one is paused.
                #[tokio::test(start_paused = true, flavor = "current_thread")]
                async fn $case() {
                    let Some(pg) = cairn_test_support::postgres::PgSchema::create(stringify!($case)) else {
                        return;
                    };
                    super::$case(&pg.url).await;
                }
            )*
        }
    };
}

mod ahead;
mod events;
mod guardrails;
mod interrupts;
mod queue;
mod schedule_ops;
mod schedules;
mod two_engines;

/// How a scripted routine behaves, by routine name prefix.
#[derive(Default)]
struct Script {
    /// Calls seen: routine name and fire context.
    calls: Mutex<Vec<(String, FireContext)>>,
    /// Routines named `slow*` wait for a permit (or their cancel token);
    /// `stubborn*` wait for a permit whatever their token says.
    gate: Option<Arc<Semaphore>>,
    /// The runs whose action saw its cancel token fire (one entry per try).
    cancelled: Mutex<Vec<uuid::Uuid>>,
    /// For routines named `*retry*`: how many tries of the run the store
    /// held when each call started.
    tries_seen: Mutex<Vec<usize>>,
    /// The store, to read those tries.
    store: Option<Store>,
    /// Routines named `busy*` take a second; how many run at once, and the most seen.
    busy: std::sync::atomic::AtomicUsize,
    busy_peak: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl ActionExecutor for Script {
    async fn execute(&self, request: ActionRequest) -> ActionOutcome {
        let name = request.routine.spec.name.clone();
        self.calls
            .lock()
            .unwrap()
            .push((name.clone(), request.fire.clone()));
        if name.contains("retry")
            && let Some(store) = &self.store
        {
            let seen = store.run_tries(request.run_id).await.unwrap().len();
            self.tries_seen.lock().unwrap().push(seen);
        }
        if name.starts_with("slow") {
            let gate = self.gate.clone().unwrap();
            tokio::select! {
                permit = gate.acquire() => drop(permit),
                () = request.cancel.cancelled() => {
                    self.cancelled.lock().unwrap().push(request.run_id);
                    return ActionOutcome::failed("cancelled");
                }
            }
        }
        if name.starts_with("busy") {
            use std::sync::atomic::Ordering::SeqCst;
            let now = self.busy.fetch_add(1, SeqCst) + 1;
            self.busy_peak.fetch_max(now, SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            self.busy.fetch_sub(1, SeqCst);
        }
        if name.starts_with("stubborn") {
            drop(self.gate.clone().unwrap().acquire().await);
        }
        if name.starts_with("fail") {
            return ActionOutcome::failed("the check broke");
        }
        if name.starts_with("alert") {
            return ActionOutcome::new(RunStatus::Attention, "disk 91% full");
        }
        if name.starts_with("remind") {
            let mut o = ActionOutcome::new(RunStatus::Ok, "stand up");
            o.notice = Some(Notice {
                title: Some("Reminder".into()),
                body: "stand up".into(),
            });
            return o;
        }
        ActionOutcome::new(RunStatus::Ok, "ROUTINE_OK")
    }
}

impl Script {
    fn count(&self, name: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == name)
            .count()
    }
}

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 7, 12, 0, 0).unwrap()
}

struct Setup {
    store: Store,
    url: String,
    clock: Arc<ManualClock>,
    script: Arc<Script>,
    _dir: Option<tempfile::TempDir>,
}

async fn setup(start: DateTime<Utc>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let mut s = setup_on(&url, start).await;
    s._dir = Some(dir);
    s
}

/// A setup on the database at `url` (SQLite or PostgreSQL).
async fn setup_on(url: &str, start: DateTime<Utc>) -> Setup {
    let (store, _) = Store::open(url).await.unwrap();
    let script = Arc::new(Script {
        gate: Some(Arc::new(Semaphore::new(0))),
        store: Some(store.clone()),
        ..Script::default()
    });
    Setup {
        store,
        url: url.to_string(),
        clock: Arc::new(ManualClock::new(start)),
        script,
        _dir: None,
    }
}

fn settings(owner: &str) -> EngineSettings {
    let mut s = EngineSettings::new(owner, chrono_tz::UTC);
    s.lease = Duration::from_secs(3600);
    s.max_concurrent = 1000;
    s
}

impl Setup {
    /// Runs `write` (a change by another process) and returns once this
    /// store's signal has heard it, holding tokio's paused clock meanwhile
    /// (the signal arrives in real time, from the store's own runtime) and
    /// failing after 15 real seconds.
    async fn heard<F: std::future::Future>(
        &self,
        topic: cairn_store::Topic,
        write: F,
    ) -> F::Output {
        assert!(
            self.store
                .signal_ready(Duration::from_secs(15))
                .await
                .is_push()
        );
        let mut watch = self.store.watch(topic);
        let out = write.await;
        tokio::task::spawn_blocking(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            rt.block_on(tokio::time::timeout(
                Duration::from_secs(15),
                watch.changed(),
            ))
            .expect("the change was heard");
        })
        .await
        .unwrap();
        out
    }

    /// Watches this thread's log for the engine's "routines changed; live"
    /// (its upkeep reloaded a change and woke the timer); see [`LiveLines`].
    fn live_lines(&self) -> LiveLines {
        use tracing_subscriber::layer::SubscriberExt as _;
        // tracing caches each log line's interest process-wide, decided on
        // the thread that first reaches it: a sibling test's engine on a
        // thread with no subscriber would cache "never" and hide the line
        // from this thread's layer. An inert global subscriber keeps every
        // thread interested.
        static GLOBAL: std::sync::Once = std::sync::Once::new();
        GLOBAL.call_once(|| {
            let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let guard =
            tracing::subscriber::set_default(tracing_subscriber::registry().with(LiveLayer(tx)));
        LiveLines {
            lines: Arc::new(Mutex::new(rx)),
            _guard: guard,
        }
    }

    fn engine(&self, owner: &str) -> RoutineEngine {
        self.engine_with(settings(owner))
    }

    fn engine_with(&self, settings: EngineSettings) -> RoutineEngine {
        let notifier = Notifier::new(
            self.store.clone(),
            Arc::new(ChannelSet::new()),
            NotifySettings::default(),
        );
        RoutineEngine::new(
            self.store.clone(),
            self.clock.clone(),
            self.script.clone(),
            Some(notifier),
            settings,
        )
    }

    /// Stores a routine from YAML, with its first slot computed from the clock.
    async fn routine(&self, yaml: &str) -> Routine {
        let spec = RoutineSpec::parse(yaml, SpecFormat::Yaml).unwrap();
        spec.validate().unwrap();
        let now = self.clock.now();
        let mut r = Routine::new(spec, "ada", now);
        let zone = r
            .spec
            .timezone
            .as_deref()
            .map(|z| z.parse().unwrap())
            .unwrap_or(chrono_tz::UTC);
        r.runtime.next_fire_at = match &r.spec.trigger {
            Trigger::Cron { schedule } | Trigger::Once { at: schedule } => {
                Schedule::parse(schedule, zone, now)
                    .unwrap()
                    .next_after(now)
            }
            _ => None,
        };
        self.store.create_routine(&r).await.unwrap();
        r
    }

    async fn runs(&self, r: &Routine) -> Vec<RoutineRun> {
        let mut runs = self.store.list_runs(r.id, 10_000).await.unwrap();
        runs.sort_by_key(|r| (r.scheduled_for, r.started_at));
        runs
    }

    fn spawn(&self, engine: &RoutineEngine) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let cancel = CancellationToken::new();
        let handle = tokio::spawn({
            let engine = engine.clone();
            let cancel = cancel.clone();
            async move { engine.run(cancel).await }
        });
        (cancel, handle)
    }
}

/// The engine hears a change made by another process on the store's own
/// thread, which wakes the test's watch and the engine's in no fixed order
/// (a tokio watch spreads its waiters over several lists). Once the test's
/// watch has fired, virtual time may run ahead (the runtime looks idle)
/// before the engine is even woken. So a test waits, in real time and with
/// the paused clock held, for the engine's own "live" log line: after it
/// the engine's timer is woken in this runtime and its store calls hold
/// the clock themselves.
struct LiveLines {
    lines: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl LiveLines {
    /// Waits for the next line (or one already logged); fails after 15 real seconds.
    async fn next(&self) {
        let lines = Arc::clone(&self.lines);
        tokio::task::spawn_blocking(move || {
            lines
                .lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(15))
                .expect("the engine made the change live");
        })
        .await
        .unwrap();
    }
}

/// Sends one message per "routines changed; live" event.
struct LiveLayer(std::sync::mpsc::Sender<()>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for LiveLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Live(bool);
        impl tracing::field::Visit for Live {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message"
                    && format!("{value:?}").ends_with("routines changed; live")
                {
                    self.0 = true;
                }
            }
        }
        let mut live = Live(false);
        event.record(&mut live);
        if live.0 {
            let _ = self.0.send(());
        }
    }
}

/// Claims `run`'s slot as a (now dead) process's engine did, through the
/// store's admission with the slot's compare-and-set moving the routine on
/// to `next`; asserts it was admitted.
async fn claim_as_a_dead_process(store: &Store, run: &RoutineRun, next: DateTime<Utc>) {
    let claim = cairn_store::Admission {
        slot: Some(cairn_store::SlotMove {
            expected: run.scheduled_for.unwrap(),
            next: Some(next),
            disable: false,
            as_read: None,
            retry: None,
        }),
        ..Default::default()
    };
    assert_eq!(
        store
            .admit_runs(&[(claim, vec![run.clone()])])
            .await
            .unwrap(),
        [Admitted::Started]
    );
}

fn statuses(runs: &[RoutineRun]) -> Vec<RunStatus> {
    runs.iter().map(|r| r.status).collect()
}

/// A slot's first run, `running` under `owner`'s lease until `lease_until`
/// (what a process that claimed the slot leaves if it dies).
fn slot_run(
    r: &Routine,
    slot: DateTime<Utc>,
    owner: &str,
    lease_until: DateTime<Utc>,
) -> RoutineRun {
    RoutineRun {
        id: uuid::Uuid::now_v7(),
        routine_id: r.id,
        trigger_type: "cron".into(),
        trigger_detail: None,
        scheduled_for: Some(slot),
        started_at: slot,
        completed_at: None,
        status: RunStatus::Running,
        result_summary: None,
        tokens_used: None,
        job_id: None,
        owner: Some(owner.into()),
        lease_until: Some(lease_until),
        notification_id: None,
        skip_reason: None,
        dedup_key: None,
        attempt: 1,
    }
}
