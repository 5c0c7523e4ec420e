//! The self-repair and memory-hygiene system routines through the real
//! engine and store: what each does shows as its run's summary.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::sync::Arc;

use cairn_agent::memory::hygiene::HygieneSettings;
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_automation::routines::system::ensure_system_routines;
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
                    key: None,
                    content: content.into(),
                    category,
                    source: "test".into(),
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
