//! Several engines on one database: each slot runs once.

use super::*;

/// Two engines (own connection pools, one database), 200 routines due
/// every second for 30 s; the first stops half-way.
async fn two_engines_share_the_slots(url: &str) {
    let (store_a, _) = Store::open(url).await.unwrap();
    let (store_b, _) = Store::open(url).await.unwrap();
    let start = Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap();
    let clock = Arc::new(ManualClock::new(start));
    let script = Arc::new(Script::default());
    let mut ids = Vec::new();
    for i in 0..200 {
        let spec = RoutineSpec::parse(
            &format!("name: r{i}\ntrigger: {{type: cron, schedule: 'every 1s'}}\naction: {{type: notification, message: x}}\n"),
            SpecFormat::Yaml,
        )
        .unwrap();
        let mut r = Routine::new(spec, "ada", start);
        r.runtime.next_fire_at = Some(start + chrono::Duration::seconds(1));
        store_a.create_routine(&r).await.unwrap();
        ids.push(r.id);
    }
    let engine = |store: &Store, owner: &str| {
        RoutineEngine::new(
            store.clone(),
            clock.clone(),
            script.clone(),
            None,
            settings(owner),
        )
    };
    let (a, b) = (engine(&store_a, "a"), engine(&store_b, "b"));
    let spawn = |e: &RoutineEngine| {
        let cancel = CancellationToken::new();
        let e = e.clone();
        let c = cancel.clone();
        (cancel, tokio::spawn(async move { e.run(c).await }))
    };
    let (stop_a, run_a) = spawn(&a);
    let (stop_b, run_b) = spawn(&b);
    tokio::time::sleep(Duration::from_millis(15_500)).await;
    stop_a.cancel();
    run_a.await.unwrap();
    tokio::time::sleep(Duration::from_millis(15_000)).await;
    stop_b.cancel();
    run_b.await.unwrap();

    let mut per_slot: HashMap<(uuid::Uuid, i64), usize> = HashMap::new();
    for id in &ids {
        for run in store_a.list_runs(*id, 1000).await.unwrap() {
            assert_eq!(run.status, RunStatus::Ok, "{run:?}");
            *per_slot
                .entry((*id, run.scheduled_for.unwrap().timestamp()))
                .or_default() += 1;
        }
    }
    assert!(per_slot.values().all(|n| *n == 1), "a slot ran twice");
    // Every slot from 1 s to 30 s has its run, including those after A stopped.
    assert_eq!(per_slot.len(), 200 * 30);
    for id in &ids {
        for sec in 1..=30 {
            let slot = (start + chrono::Duration::seconds(sec)).timestamp();
            assert!(
                per_slot.contains_key(&(*id, slot)),
                "slot {sec} of {id} has no run"
            );
        }
    }
}

#[tokio::test(start_paused = true, flavor = "current_thread")]
async fn two_engines_on_one_sqlite_file_run_each_slot_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    two_engines_share_the_slots(&url).await;
}

// The schema is made on a runtime of its own: this one is paused.
#[tokio::test(start_paused = true, flavor = "current_thread")]
async fn two_engines_on_one_postgres_database_run_each_slot_once() {
    let Some(pg) = cairn_test_support::postgres::PgSchema::create(
        "two_engines_on_one_postgres_database_run_each_slot_once",
    ) else {
        return;
    };
    two_engines_share_the_slots(&pg.url).await;
}
