//! The self-repair and memory-hygiene system routines through the real
//! engine and store: what each does shows as its run's summary.

use std::sync::Arc;

use cairn_agent::memory::hygiene::HygieneSettings;
use cairn_automation::routines::action::{ActionOutcome, ActionRequest};
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_automation::routines::system::{SystemTask, ensure_system_routines};
use cairn_automation::routines::upkeep::{MEMORY_HYGIENE, MemoryHygiene, SELF_REPAIR, SelfRepair};
use cairn_core::clock::{Clock, FixedClock};
use cairn_core::routine::RunStatus;
use cairn_store::{MemoryCategory, NewMemory, Store};
use chrono::{DateTime, Duration, TimeZone, Utc};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

fn hygiene() -> HygieneSettings {
    HygieneSettings {
        enabled: true,
        archive_after_days: 7,
        purge_after_days: 30,
        conversation_retention_days: 30,
        snapshot: true,
    }
}

#[tokio::test]
async fn self_repair_and_memory_hygiene_run_as_routines_and_say_what_they_did() {
    let db = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(&format!("sqlite://{}/cairn.db", db.path().display()))
        .await
        .unwrap();
    let clock = Arc::new(FixedClock::new(t0() - Duration::days(10)));
    // Ten days ago: a daily note and a core fact.
    for (content, category) in [
        ("standup notes", MemoryCategory::Daily),
        ("Ada takes her coffee black", MemoryCategory::Core),
    ] {
        store
            .store_memory(
                &NewMemory {
                    user_id: "ada".into(),
                    agent: cairn_store::MAIN_AGENT.into(),
                    key: None,
                    content: content.into(),
                    category,
                    source: "test".into(),
                    shared: false,
                },
                clock.now(),
            )
            .await
            .unwrap();
    }
    // A tool that failed five times in a row.
    for _ in 0..5 {
        store
            .record_tool_failure("flaky", "HTTP 503", Some(5), clock.now())
            .await
            .unwrap();
    }
    clock.set(t0());
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let actions = AgentActions::new(store.clone(), workspace.path(), dyn_clock.clone())
        .with_system_task(
            SELF_REPAIR,
            Arc::new(SelfRepair::new(store.clone(), None, dyn_clock.clone())),
        )
        .with_system_task(
            MEMORY_HYGIENE,
            Arc::new(MemoryHygiene::new(
                store.clone(),
                "ada",
                hygiene(),
                workspace.path(),
                dyn_clock.clone(),
            )),
        );
    let engine = RoutineEngine::new(
        store.clone(),
        dyn_clock,
        Arc::new(actions),
        None,
        EngineSettings::new("a", chrono_tz::UTC),
    );
    ensure_system_routines(
        &store,
        "ada",
        &[SelfRepair::routine(), MemoryHygiene::routine(&hygiene())],
        chrono_tz::UTC,
        clock.now(),
    )
    .await
    .unwrap();
    // A day later both have fired (self-repair once per slot round).
    clock.set(t0() + Duration::days(1));
    engine.tick(clock.now()).await.unwrap();
    engine.idle().await;

    let summary = |name: &'static str| {
        let store = store.clone();
        async move {
            let r = store.find_routine("ada", name).await.unwrap().unwrap();
            let runs = store.list_runs(r.id, 10).await.unwrap();
            let run = runs
                .iter()
                .find(|r| r.status != RunStatus::Skipped)
                .unwrap();
            assert_eq!(run.status, RunStatus::Ok, "{run:?}");
            run.result_summary.clone().unwrap()
        }
    };
    let repair = summary(SELF_REPAIR).await;
    assert!(
        repair.contains("tool flaky disabled after 5 failures in a row (HTTP 503)"),
        "{repair}"
    );
    assert!(repair.contains("cairn tool enable flaky"), "{repair}");
    let tidy = summary(MEMORY_HYGIENE).await;
    assert!(tidy.starts_with("archived 1, purged 0 archived"), "{tidy}");
    let snapshot = tokio::fs::read_to_string(workspace.path().join("MEMORY_SNAPSHOT.md"))
        .await
        .unwrap();
    assert!(
        snapshot.contains("Ada takes her coffee black"),
        "{snapshot}"
    );
}

/// Counts its runs and says so on a channel (a stand-in for self-repair's
/// work: the watch decides only when the routine fires).
struct Counted(tokio::sync::mpsc::UnboundedSender<()>);

#[async_trait::async_trait]
impl SystemTask for Counted {
    async fn run(&self, _: &ActionRequest) -> ActionOutcome {
        let _ = self.0.send(());
        ActionOutcome::new(RunStatus::Ok, "counted")
    }
}

#[tokio::test]
async fn self_repair_fires_for_a_quiet_job_and_never_while_no_job_is_active() {
    use cairn_automation::routines::upkeep_watch::{REPAIR_CHECK_EVERY, watch_quiet_jobs};
    use cairn_core::job::{JobRecord, JobState};
    use std::time::Duration as StdDuration;

    let db = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(&format!("sqlite://{}/cairn.db", db.path().display()))
        .await
        .unwrap();
    let clock = Arc::new(FixedClock::new(t0()));
    let dyn_clock: Arc<dyn Clock> = clock.clone();
    let (ran, mut runs) = tokio::sync::mpsc::unbounded_channel();
    let actions = AgentActions::new(store.clone(), workspace.path(), dyn_clock.clone())
        .with_system_task(SELF_REPAIR, Arc::new(Counted(ran)));
    let engine = RoutineEngine::new(
        store.clone(),
        dyn_clock.clone(),
        Arc::new(actions),
        None,
        EngineSettings::new("a", chrono_tz::UTC),
    );
    ensure_system_routines(
        &store,
        "ada",
        &[SelfRepair::routine()],
        chrono_tz::UTC,
        t0(),
    )
    .await
    .unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let stuck_after = StdDuration::from_secs(600);
    let watch = tokio::spawn(watch_quiet_jobs(
        engine.clone(),
        dyn_clock.clone(),
        "ada".into(),
        stuck_after,
        cancel.clone(),
    ));
    // No job anywhere: hours pass, nothing fires (the watch waits for the
    // jobs signal, not the clock).
    for minutes in [1, 2, 30, 120] {
        clock.set(t0() + Duration::minutes(minutes));
        tokio::task::yield_now().await;
    }
    assert!(
        tokio::time::timeout(StdDuration::from_millis(300), runs.recv())
            .await
            .is_err(),
        "self-repair ran with no job active"
    );
    // A job running (leased) but quiet for 20 minutes: fired at once, by
    // the signal its creation published.
    let now = clock.now();
    let mut job = JobRecord::new(uuid::Uuid::now_v7(), "scrape", "scrape", "ada", now);
    job.state = JobState::InProgress;
    job.started_at = Some(now - Duration::minutes(20));
    job.last_activity_at = Some(now - Duration::minutes(20));
    job.lease_owner = Some("elsewhere".into());
    job.lease_until = Some(now + Duration::hours(1));
    store.create_job(&job).await.unwrap();
    let within = StdDuration::from_secs(10);
    tokio::time::timeout(within, runs.recv())
        .await
        .expect("self-repair fired for the quiet job")
        .unwrap();
    engine.idle().await;
    let routine = store
        .find_routine("ada", SELF_REPAIR)
        .await
        .unwrap()
        .unwrap();
    let recorded = store.list_runs(routine.id, 10).await.unwrap();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].trigger_type, "system");
    assert_eq!(
        recorded[0].trigger_detail.as_deref(),
        Some("1 job(s) without progress")
    );
    // Still quiet a check later: fired again.
    clock.set(now + chrono::Duration::from_std(REPAIR_CHECK_EVERY).unwrap());
    tokio::time::timeout(within, runs.recv())
        .await
        .expect("fired again while the job stays quiet")
        .unwrap();
    cancel.cancel();
    watch.await.unwrap();
}
