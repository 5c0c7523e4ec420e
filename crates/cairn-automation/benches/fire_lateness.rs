//! Fire lateness of the routine engine on SQLite, in real time: 100,000
//! routines stored, 10,000 of them due within one minute (then all in the
//! same second); how late each run's action began after its slot
//! (`action_began`), the recorded lateness (`started_at - scheduled_for`,
//! 0 by construction for a crowded slot claimed ahead of it), slots left
//! without a run (`missing`), the slot to the last action begun
//! (`drain_secs`), the engine's start-up time and the process's RSS.
//!
//! Progress goes to stderr; stdout gets one JSON object.
//! `cargo bench -p cairn-automation --bench fire_lateness`, with:
//! - `FIRE_LATENESS_TOTAL` / `FIRE_LATENESS_DUE` (100000 / 10000): routines
//!   stored and due; smaller for a quick look;
//! - `FIRE_LATENESS_BATCH`: the engine's claim batch (500);
//! - `FIRE_LATENESS_SAME_ROUNDS=N`: N one-second bursts, each after 25 s
//!   idle, for figures less at the mercy of one noisy moment;
//! - `FIRE_LATENESS_SPREAD=0`: leaves out the minute-long spread;
//! - `FIRE_LATENESS_LIMIT=10`: runs under the default global run limit, so
//!   all but ten runs wait in the queue (none to speak of by default);
//! - `FIRE_LATENESS_POOL=N`: the engine's pool (runs carried out at once;
//!   sized to the machine by default). A pool as large as the burst is how
//!   the engine ran before it had one: a task per due run.
//!
//! `done` is each run's recorded end after its slot (`completed_at -
//! scheduled_for`), the figure the targets name.
//!
//! The engine's rounds read only the due routines (`due_routines`, a claim
//! batch at a time); its cache holds only the routines fired by something
//! other than time (events, system events, webhooks), none of the cron
//! routines stored here. The figures move by up to 2x with the machine's
//! state, so compare builds run in turn. Targets and the latest figures, each
//! with its variables, are in docs/performance.md.
#![expect(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    reason = "a benchmark: set-up unwraps, /proc via std::fs"
)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use cairn_automation::routines::action::{ActionExecutor, ActionOutcome, ActionRequest};
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_core::clock::{Clock, SystemClock};
use cairn_core::routine::{Routine, RoutineSpec, SpecFormat};
use cairn_store::Store;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// When a run's action began, and its slot.
type Began = HashMap<Uuid, (DateTime<Utc>, Option<DateTime<Utc>>)>;

/// The real executor, noting when each action actually began (the run's
/// recorded `started_at` is the engine's round time, taken before the claim).
struct Stamped {
    real: AgentActions,
    began: Mutex<Began>,
}

#[async_trait]
impl ActionExecutor for Stamped {
    async fn execute(&self, request: ActionRequest) -> ActionOutcome {
        let at = Utc::now();
        self.began
            .lock()
            .unwrap()
            .insert(request.run_id, (at, request.fire.scheduled_for));
        self.real.execute(request).await
    }
}

impl Stamped {
    fn count(&self) -> usize {
        self.began.lock().unwrap().len()
    }
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| (kb / 1024.0 * 10.0).round() / 10.0)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The global run limit the engine runs under: `FIRE_LATENESS_LIMIT`
/// (`10` is the default configuration's: the rest wait in the queue), else
/// none to speak of.
fn limit() -> u32 {
    env_usize("FIRE_LATENESS_LIMIT", 100_000) as u32
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 100.0).round() / 100.0
}

/// p50/p99/max/min of lateness in ms (nearest rank).
fn stats(mut ms: Vec<f64>) -> Value {
    if ms.is_empty() {
        return json!({ "count": 0 });
    }
    ms.sort_by(f64::total_cmp);
    let rank = |p: f64| ms[((p * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
    let r = |x: f64| (x * 10.0).round() / 10.0;
    json!({
        "count": ms.len(),
        "p50_ms": r(rank(0.50)),
        "p99_ms": r(rank(0.99)),
        "max_ms": r(ms[ms.len() - 1]),
        "min_ms": r(ms[0]),
    })
}

/// `t` on a whole second, as schedules' slots are (and the store keeps microseconds).
fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(t.timestamp(), 0).unwrap_or(t)
}

fn spec(name: &str) -> RoutineSpec {
    // Weekly cron: after its slot each routine moves to next week.
    let yaml = format!(
        "name: {name}\ntrigger: {{type: cron, schedule: '0 0 * * 1'}}\naction: {{type: notification, message: ping}}\n"
    );
    let spec = RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap();
    spec.validate().unwrap();
    spec
}

/// Stores routines `from..to` (named `r{i}`), the slot of each from `slot(i)`,
/// with a few writers at once; returns their ids.
async fn store_routines(
    store: &Store,
    from: usize,
    to: usize,
    slot: impl Fn(usize) -> DateTime<Utc> + Send + Sync + 'static,
) -> Vec<Uuid> {
    let slot = Arc::new(slot);
    let writers = 4;
    let mut handles = Vec::new();
    for w in 0..writers {
        let store = store.clone();
        let slot = slot.clone();
        handles.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            let now = Utc::now();
            for i in (from + w..to).step_by(writers) {
                let mut r = Routine::new(spec(&format!("r{i}")), "ada", now);
                r.runtime.next_fire_at = Some(slot(i));
                store.create_routine(&r).await.unwrap();
                ids.push(r.id);
            }
            ids
        }));
    }
    let mut ids = Vec::new();
    for h in handles {
        ids.extend(h.await.unwrap());
    }
    ids
}

struct Scenario {
    /// Lateness of the recorded runs (`started_at - scheduled_for`).
    recorded: Value,
    /// Lateness of the actions' real start.
    began: Value,
    /// Each run's recorded end after its slot.
    done: Value,
    /// Slots with no run at the end.
    missing: usize,
    /// Slot of the first due routine to the last run begun.
    drain_secs: f64,
    /// RSS right after the due runs ended.
    rss_mb_after: f64,
}

/// Runs an engine until every one of `due` has a run for a slot in
/// `[t0, t0 + 60 s)`, then stops it and reads the runs.
async fn scenario(
    label: &str,
    store: &Store,
    dir: &std::path::Path,
    due: &[Uuid],
    t0: DateTime<Utc>,
) -> Scenario {
    let stamped = Arc::new(Stamped {
        real: AgentActions::new(store.clone(), dir, Arc::new(SystemClock)),
        began: Mutex::new(HashMap::new()),
    });
    let mut settings = EngineSettings::new(format!("bench-{label}"), chrono_tz::UTC);
    settings.max_concurrent = limit();
    settings.batch = env_usize("FIRE_LATENESS_BATCH", settings.batch as usize) as u32;
    settings.pool = env_usize("FIRE_LATENESS_POOL", settings.pool);
    let engine = RoutineEngine::new(
        store.clone(),
        Arc::new(SystemClock),
        stamped.clone(),
        None,
        settings,
    );
    let cancel = CancellationToken::new();
    let handle = tokio::spawn({
        let engine = engine.clone();
        let cancel = cancel.clone();
        async move { engine.run(cancel).await }
    });
    let left = (t0 - Utc::now()).num_milliseconds();
    eprintln!("[{label}] engine running; first slot in {left} ms");
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut last = 0;
    while stamped.count() < due.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let n = stamped.count();
        if n != last && (n - last >= 1000 || n == due.len()) {
            eprintln!("[{label}] {n}/{} runs begun", due.len());
            last = n;
        }
    }
    let drain = stamped
        .began
        .lock()
        .unwrap()
        .values()
        .map(|(at, _)| *at)
        .max()
        .map_or(0.0, |end| (end - t0).num_milliseconds() as f64 / 1000.0);
    // Let the runs record their outcomes, then stop.
    tokio::time::timeout(Duration::from_secs(120), engine.idle())
        .await
        .ok();
    let rss_mb_after = rss_mb();
    cancel.cancel();
    handle.await.unwrap();

    let window_end = t0 + chrono::Duration::seconds(60);
    let mut recorded = Vec::with_capacity(due.len());
    let mut done = Vec::with_capacity(due.len());
    let mut missing = 0;
    for id in due {
        let runs = store.list_runs(*id, 10).await.unwrap();
        let run = runs
            .iter()
            .find(|r| r.scheduled_for.is_some_and(|s| s >= t0 && s < window_end));
        match run {
            Some(run) => {
                let slot = run.scheduled_for.unwrap();
                recorded.push((run.started_at - slot).num_microseconds().unwrap() as f64 / 1000.0);
                if let Some(end) = run.completed_at {
                    done.push((end - slot).num_microseconds().unwrap() as f64 / 1000.0);
                }
            }
            None => missing += 1,
        }
    }
    let began: Vec<f64> = stamped
        .began
        .lock()
        .unwrap()
        .values()
        .filter_map(|(at, slot)| {
            slot.map(|s| (*at - s).num_microseconds().unwrap() as f64 / 1000.0)
        })
        .collect();
    Scenario {
        recorded: stats(recorded),
        began: stats(began),
        done: stats(done),
        missing,
        drain_secs: (drain * 100.0).round() / 100.0,
        rss_mb_after,
    }
}

fn report(s: &Scenario) -> Value {
    let mut v = s.recorded.clone();
    v["missing"] = json!(s.missing);
    v["action_began"] = s.began.clone();
    v["done"] = s.done.clone();
    v["drain_secs"] = json!(s.drain_secs);
    v["rss_mb_after"] = json!(s.rss_mb_after);
    v
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench());
}

async fn bench() {
    let total = env_usize("FIRE_LATENESS_TOTAL", 100_000);
    let due_n = env_usize("FIRE_LATENESS_DUE", 10_000).min(total);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    let rss_mb_start = rss_mb();

    // The idle ones first (their slot does not depend on how long storing takes).
    let week = Utc::now() + chrono::Duration::days(7);
    let started = Instant::now();
    store_routines(&store, due_n, total, move |i| {
        week + chrono::Duration::seconds((i % 86_400) as i64)
    })
    .await;
    let idle_secs = started.elapsed();
    eprintln!(
        "stored {} idle routines in {:.1} s",
        total - due_n,
        idle_secs.as_secs_f64()
    );
    // T0 ~25 s after the engine starts: the due ones' storing time estimated from the rate so far.
    let per = idle_secs.as_secs_f64() / (total - due_n).max(1) as f64;
    let lead = Duration::from_secs_f64(per * due_n as f64 * 1.2 + 25.0);
    let t0 = whole_second(Utc::now() + chrono::Duration::from_std(lead).unwrap());
    let due = store_routines(&store, 0, due_n, move |i| {
        t0 + chrono::Duration::seconds((i % 60) as i64)
    })
    .await;
    let insert_secs = started.elapsed();
    eprintln!(
        "stored {total} routines in {:.1} s",
        insert_secs.as_secs_f64()
    );

    // Idle engine over all of them: start-up (the first round, which reads
    // the due routines only, and the first load of its cache of triggered
    // routines) and RSS.
    let stamped = Arc::new(Stamped {
        real: AgentActions::new(store.clone(), dir.path(), Arc::new(SystemClock)),
        began: Mutex::new(HashMap::new()),
    });
    let mut settings = EngineSettings::new("bench-idle", chrono_tz::UTC);
    settings.max_concurrent = 100_000;
    let probe = RoutineEngine::new(
        store.clone(),
        Arc::new(SystemClock),
        stamped,
        None,
        settings,
    );
    let clock = SystemClock;
    let timer = Instant::now();
    probe.tick(clock.now()).await.unwrap();
    let first_tick_ms = timer.elapsed().as_secs_f64() * 1000.0;
    let rss_mb_before_cache = rss_mb();
    let timer = Instant::now();
    probe.refresh_triggered().await.unwrap();
    let refresh_ms = timer.elapsed().as_secs_f64() * 1000.0;
    let timer = Instant::now();
    let earliest = store.earliest_fire_at().await.unwrap();
    let earliest_ms = timer.elapsed().as_secs_f64() * 1000.0;
    let rss_mb_idle = rss_mb();
    drop(probe);
    // What that cache load read: the triggered routines only.
    let cached = store.list_triggered_routines().await.unwrap().len();
    eprintln!(
        "idle engine: first tick (due routines only) {first_tick_ms:.1} ms, triggered-routine cache load ({cached} of {total} routines: the event/webhook ones) {refresh_ms:.0} ms, RSS {rss_mb_idle} MB, next slot {earliest:?}"
    );

    let spread = if env_usize("FIRE_LATENESS_SPREAD", 1) == 0 {
        None
    } else {
        let spread = scenario("spread", &store, dir.path(), &due, t0).await;
        eprintln!("spread: {}", report(&spread));
        Some(report(&spread))
    };

    // The same routines again, all due in one second (as many rounds as asked).
    let mut same = Vec::new();
    for round in 0..env_usize("FIRE_LATENESS_SAME_ROUNDS", 1).max(1) {
        let t1 = whole_second(Utc::now() + chrono::Duration::seconds(25));
        let timer = Instant::now();
        for id in &due {
            store
                .set_next_fire_at(*id, Some(t1), Utc::now())
                .await
                .unwrap();
        }
        eprintln!(
            "moved {} routines to one slot in {:.1} s",
            due.len(),
            timer.elapsed().as_secs_f64()
        );
        let label = format!("same-second-{}", round + 1);
        let s = report(&scenario(&label, &store, dir.path(), &due, t1).await);
        eprintln!("same second, round {}: {s}", round + 1);
        same.push(s);
    }

    let out = json!({
        "routines_stored": total,
        "due": due.len(),
        "max_concurrent": limit(),
        "pool": env_usize("FIRE_LATENESS_POOL", EngineSettings::new("", chrono_tz::UTC).pool),
        "insert_secs": secs(insert_secs),
        "insert_how": "one create_routine transaction per routine (no batch API), 4 writers",
        "spread": spread,
        "same_second": same[0],
        "same_second_rounds": same,
        "rss_mb_start": rss_mb_start,
        "rss_mb_idle": rss_mb_idle,
        "rss_mb_before_cache_load": rss_mb_before_cache,
        "engine_start": {
            "first_tick_ms": (first_tick_ms * 10.0).round() / 10.0,
            "triggered_cache_load_ms": refresh_ms.round(),
            "triggered_routines_cached": cached,
            "earliest_fire_at_ms": (earliest_ms * 100.0).round() / 100.0,
        },
        "lateness": "p50/p99/max of started_at - scheduled_for of the recorded runs (a slot claimed ahead records the slot itself: 0); action_began: of the executor's real start, the figure to read",
    });
    println!("{out}");
}
