//! What ending a burst's runs costs the store's writer: 2,000 running runs
//! of 2,000 routines ended in group commits of 256 (as the engine's
//! commits take them in a burst), each end with its notification, on
//! SQLite. A burst's runs are done no sooner than the writer gets through
//! their ends, so this is the floor under `scripts/bench-burst.sh`'s done
//! p99. Each end's values are encoded first, as the engine encodes them on
//! the run's own task ([`EncodedEnd`]), and timed apart. Prints JSON:
//! microseconds per run end of the writer (median of rounds, and the
//! best) and of the encoding, each round on a fresh database. Run:
//! `cargo bench -p cairn-store --bench run_ends` (figures in
//! docs/performance.md).
#![expect(clippy::unwrap_used, reason = "a benchmark stops at the first failure")]

use std::sync::Arc;
use std::time::Instant;

use cairn_core::notification::{NewNotification, Notification, Priority};
use cairn_core::routine::{Routine, RoutineRun, RoutineSpec, RunStatus, SpecFormat};
use cairn_store::{Admission, EncodedEnd, FinishRun, RunOutcome, Store};
use chrono::{Duration, Utc};
use serde_json::json;
use sqlx::Connection;
use uuid::Uuid;

const ROUTINES: usize = 2_000;
/// The engine's group commit of run ends (`admit::MAX_BATCH`).
const COMMIT: usize = 256;
const ROUNDS: usize = 5;

fn routine(i: usize) -> Routine {
    let yaml = format!(
        "name: burst-{i:05}\ntrigger: {{type: once, at: \"2026-12-05T12:00:00Z\"}}\n\
         action: {{type: notification, message: \"burst {i:05}\"}}\n"
    );
    Routine::new(
        RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap(),
        "ada",
        Utc::now(),
    )
}

fn running(r: &Routine) -> RoutineRun {
    let now = Utc::now();
    RoutineRun {
        id: Uuid::now_v7(),
        routine_id: r.id,
        trigger_type: "once".into(),
        trigger_detail: None,
        scheduled_for: Some(now),
        started_at: now,
        completed_at: None,
        status: RunStatus::Running,
        result_summary: None,
        tokens_used: None,
        job_id: None,
        owner: Some("bench".into()),
        lease_until: Some(now + Duration::seconds(60)),
        notification_id: None,
        skip_reason: None,
        dedup_key: None,
        attempt: 1,
    }
}

/// A run's end as the engine builds it for a `notification` action.
fn end(r: &Routine, run: &RoutineRun) -> FinishRun {
    let now = Utc::now();
    let new = NewNotification {
        user_id: "ada".into(),
        channel: None,
        title: format!("Routine {}", r.spec.name),
        body: format!("burst {}", &r.spec.name[6..]),
        priority: Priority::Normal,
        tags: vec!["routine".into(), "ok".into()],
        data: Some(json!({
            "routine": r.spec.name, "routine_id": r.id, "run_id": run.id,
            "status": "ok", "trigger": "once", "scheduled_for": run.scheduled_for,
        })),
        source: format!("routine:{}", run.id),
    };
    let notification = Notification::pending(new, Uuid::now_v7(), "terminal".into(), now);
    FinishRun {
        run_id: run.id,
        routine_id: r.id,
        outcome: RunOutcome {
            status: RunStatus::Ok,
            summary: Some(format!("burst {}", &r.spec.name[6..])),
            tokens_used: None,
            completed_at: now,
            notification_id: Some(notification.id),
            state: None,
            // A burst's commits put their prunes off (the engine's
            // `finish_batch`): none here.
            retain: None,
        },
        notification: Some(Arc::new(notification)),
        auto_pause: None,
    }
}

/// Microseconds per run end over one burst on a fresh database.
async fn round(dir: &std::path::Path, n: usize) -> Round {
    let url = format!("sqlite://{}/r{n}.db", dir.display());
    let (store, _) = Store::open(&url).await.unwrap();
    let routines: Vec<Routine> = (0..ROUTINES).map(routine).collect();
    for r in &routines {
        store.create_routine(r).await.unwrap();
    }
    let runs: Vec<RoutineRun> = routines.iter().map(running).collect();
    let fires: Vec<(Admission, Vec<RoutineRun>)> = runs
        .iter()
        .map(|run| (Admission::default(), vec![run.clone()]))
        .collect();
    for chunk in fires.chunks(500) {
        store.admit_runs(chunk).await.unwrap();
    }
    let ends: Vec<FinishRun> = routines
        .iter()
        .zip(&runs)
        .map(|(r, run)| end(r, run))
        .collect();
    // The set-up's WAL checkpointed, as the daemon's listener keeps it:
    // else a commit below would checkpoint the set-up's pages itself.
    let mut other = sqlx::AnyConnection::connect(&url).await.unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut other)
        .await
        .unwrap();
    other.close().await.unwrap();
    // Each end's values encoded as the engine encodes them, on the run's
    // own task: timed apart, since that work is spread over the runtime's
    // threads rather than the one writer's.
    let started = Instant::now();
    let encoded: Vec<EncodedEnd> = ends
        .into_iter()
        .map(|e| EncodedEnd::new(e).unwrap())
        .collect();
    let encode = started.elapsed().as_secs_f64() * 1e6 / ROUTINES as f64;
    let started = Instant::now();
    for batch in encoded.chunks(COMMIT) {
        let done = store.finish_encoded(batch, &[]).await.unwrap();
        assert!(done.iter().all(|f| f.ended));
    }
    let write = started.elapsed().as_secs_f64() * 1e6 / ROUTINES as f64;
    store.close().await;
    Round { write, encode }
}

/// One round's microseconds per run end.
struct Round {
    /// The writer's: the batches' transactions.
    write: f64,
    /// Encoding the ends' values, before.
    encode: f64,
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut rounds = Vec::new();
    for n in 0..ROUNDS {
        rounds.push(round(dir.path(), n).await);
    }
    let mut write: Vec<f64> = rounds.iter().map(|r| r.write).collect();
    let mut encode: Vec<f64> = rounds.iter().map(|r| r.encode).collect();
    write.sort_by(f64::total_cmp);
    encode.sort_by(f64::total_cmp);
    let two = |x: f64| (x * 100.0).round() / 100.0;
    let out = json!({
        "bench": "run_ends",
        "runs": ROUTINES,
        "commit": COMMIT,
        "micros_per_end_median": two(write[ROUNDS / 2]),
        "micros_per_end_best": two(write[0]),
        "encode_micros_per_end_median": two(encode[ROUNDS / 2]),
    });
    println!("{out}");
}
