//! Routines: round trips, uniqueness, due queries.

use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

use cairn_core::routine::{Routine, RoutineRun, RoutineSpec, RunStatus, SpecFormat};
use cairn_store::{RoutineWrite, StoreError};

use crate::fixture::Fixture;

pub fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_790_000_000 + secs, 0).unwrap()
}

pub fn routine(user: &str, name: &str) -> Routine {
    let yaml = format!(
        "name: {name}\ndescription: test routine\ntrigger: {{type: cron, schedule: '0 9 * * MON-FRI'}}\n\
         action: {{type: lightweight, prompt: check things, context_paths: [context/a.md], max_tokens: 512}}\n\
         guardrails: {{cooldown: 60s, max_concurrent: 2}}\nnotify: {{channel: terminal, on_success: true}}\n\
         timezone: Europe/Paris\n"
    );
    let spec = RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap();
    spec.validate().unwrap();
    Routine::new(spec, user, at(0))
}

pub fn run_for(r: &Routine, slot: Option<DateTime<Utc>>, started: DateTime<Utc>) -> RoutineRun {
    RoutineRun {
        id: uuid::Uuid::now_v7(),
        routine_id: r.id,
        trigger_type: if slot.is_some() { "cron" } else { "manual" }.to_string(),
        trigger_detail: None,
        scheduled_for: slot,
        started_at: started,
        completed_at: None,
        status: RunStatus::Running,
        result_summary: None,
        tokens_used: None,
        job_id: None,
        owner: Some("proc-a".to_string()),
        lease_until: Some(started + Duration::seconds(60)),
        notification_id: None,
        skip_reason: None,
        dedup_key: None,
        attempt: 1,
    }
}

/// Who re-runs what a test's reaps interrupt.
pub fn rerunner(owner: &str, now: DateTime<Utc>) -> cairn_store::Rerunner {
    cairn_store::Rerunner {
        owner: owner.to_string(),
        lease_until: now + Duration::seconds(60),
        global_max: Some(100),
    }
}

pub async fn routine_round_trips(fx: &Fixture) {
    let mut r = routine("ada", "daily-check");
    r.runtime.next_fire_at = Some(at(3600));
    r.runtime.state = json!({"seen": ["a", "b"], "count": 3});
    fx.store.create_routine(&r).await.unwrap();
    assert_eq!(fx.store.get_routine(r.id).await.unwrap().as_ref(), Some(&r));
    assert_eq!(
        fx.store
            .find_routine("ada", "daily-check")
            .await
            .unwrap()
            .as_ref(),
        Some(&r)
    );
    assert_eq!(
        fx.store.find_routine("bob", "daily-check").await.unwrap(),
        None
    );

    r.spec.description = "changed".into();
    r.spec.enabled = false;
    r.spec.agent = Some("family".into());
    r.runtime.consecutive_failures = 2;
    r.runtime.last_run_at = Some(at(10));
    r.updated_at = at(20);
    fx.store.update_routine(&r).await.unwrap();
    assert_eq!(fx.store.get_routine(r.id).await.unwrap().as_ref(), Some(&r));

    // The agent it runs as is kept as written, created or replaced.
    let mut other = routine("ada", "family-check");
    other.spec.agent = Some("family".into());
    fx.store.create_routine(&other).await.unwrap();
    let stored = fx.store.find_routine("ada", "family-check").await.unwrap();
    assert_eq!(stored.unwrap().spec.agent.as_deref(), Some("family"));
    other.spec.agent = None;
    fx.store.update_routine(&other).await.unwrap();
    assert_eq!(
        fx.store
            .get_routine(other.id)
            .await
            .unwrap()
            .unwrap()
            .spec
            .agent,
        None
    );
}

pub async fn routine_names_are_unique_per_user(fx: &Fixture) {
    fx.store
        .create_routine(&routine("ada", "same"))
        .await
        .unwrap();
    let err = fx
        .store
        .create_routine(&routine("ada", "same"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    assert!(err.to_string().contains("\"same\""), "{err}");
    fx.store
        .create_routine(&routine("bob", "same"))
        .await
        .unwrap();

    // Renaming onto a taken name is a conflict too.
    let mut other = routine("ada", "other");
    fx.store.create_routine(&other).await.unwrap();
    other.spec.name = "same".into();
    assert!(matches!(
        fx.store.update_routine(&other).await,
        Err(StoreError::Conflict(_))
    ));

    let names: Vec<_> = fx
        .store
        .list_routines(Some("ada"))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.spec.name)
        .collect();
    assert_eq!(names, ["other", "same"]);
    assert_eq!(fx.store.list_routines(None).await.unwrap().len(), 3);
}

pub async fn update_and_delete_missing_routine(fx: &Fixture) {
    let r = routine("ada", "ghost");
    assert!(matches!(
        fx.store.update_routine(&r).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(!fx.store.delete_routine(r.id).await.unwrap());
    assert!(
        !fx.store
            .set_routine_enabled(r.id, false, at(1))
            .await
            .unwrap()
    );
}

pub async fn enable_disable(fx: &Fixture) {
    let r = routine("ada", "toggle");
    fx.store.create_routine(&r).await.unwrap();
    assert!(
        fx.store
            .set_routine_enabled(r.id, false, at(5))
            .await
            .unwrap()
    );
    let got = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert!(!got.spec.enabled);
    assert_eq!(got.updated_at, at(5));
    assert!(
        fx.store
            .set_routine_enabled(r.id, true, at(6))
            .await
            .unwrap()
    );
    assert!(
        fx.store
            .get_routine(r.id)
            .await
            .unwrap()
            .unwrap()
            .spec
            .enabled
    );
}

pub async fn routines_are_counted_with_the_enabled_ones(fx: &Fixture) {
    assert_eq!(fx.store.count_routines().await.unwrap(), (0, 0));
    for name in ["one", "two", "three"] {
        fx.store
            .create_routine(&routine("ada", name))
            .await
            .unwrap();
    }
    let off = routine("bob", "off");
    fx.store.create_routine(&off).await.unwrap();
    fx.store
        .set_routine_enabled(off.id, false, at(5))
        .await
        .unwrap();
    assert_eq!(fx.store.count_routines().await.unwrap(), (4, 3));
}

pub async fn due_routines_in_order(fx: &Fixture) {
    assert_eq!(fx.store.earliest_fire_at().await.unwrap(), None);
    let mut ids = Vec::new();
    for (name, next, enabled) in [
        ("late", Some(300), true),
        ("early", Some(100), true),
        ("off", Some(50), false),
        ("never", None, true),
        ("future", Some(900), true),
    ] {
        let mut r = routine("ada", name);
        r.runtime.next_fire_at = next.map(at);
        r.spec.enabled = enabled;
        fx.store.create_routine(&r).await.unwrap();
        ids.push(r.id);
    }
    let due: Vec<_> = fx
        .store
        .due_routines(at(300), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.spec.name)
        .collect();
    assert_eq!(due, ["early", "late"]);
    assert_eq!(fx.store.due_routines(at(300), 1).await.unwrap().len(), 1);
    assert_eq!(fx.store.earliest_fire_at().await.unwrap(), Some(at(100)));
    assert!(
        fx.store
            .set_next_fire_at(ids[1], Some(at(1000)), at(2))
            .await
            .unwrap()
    );
    assert_eq!(fx.store.earliest_fire_at().await.unwrap(), Some(at(300)));
}

pub async fn delete_cascades_to_runs(fx: &Fixture) {
    let r = routine("ada", "doomed");
    fx.store.create_routine(&r).await.unwrap();
    let run = run_for(&r, None, at(1));
    fx.store.start_run(&run).await.unwrap();
    assert!(fx.store.delete_routine(r.id).await.unwrap());
    assert_eq!(fx.store.get_run(run.id).await.unwrap(), None);
    assert_eq!(fx.store.get_routine(r.id).await.unwrap(), None);
}

/// `routine apply` of a directory: every routine written or none, and one
/// change of the version for the engines.
pub async fn saving_several_routines_is_all_or_nothing(fx: &Fixture) {
    let taken = routine("ada", "taken");
    fx.store.create_routine(&taken).await.unwrap();
    let before = fx.store.routines_version().await.unwrap();

    let mut changed = taken.clone();
    changed.spec.description = "new words".into();
    let writes = [
        RoutineWrite::Create(routine("ada", "fresh")),
        RoutineWrite::Update(changed.clone()),
        RoutineWrite::Create(routine("ada", "taken")),
    ];
    let err = fx.store.save_routines(&writes).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err}");
    assert!(
        fx.store
            .find_routine("ada", "fresh")
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        fx.store
            .get_routine(taken.id)
            .await
            .unwrap()
            .unwrap()
            .spec
            .description,
        taken.spec.description,
        "the update was rolled back"
    );
    assert_eq!(fx.store.routines_version().await.unwrap(), before);

    fx.store.save_routines(&writes[..2]).await.unwrap();
    assert!(
        fx.store
            .find_routine("ada", "fresh")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        fx.store
            .get_routine(taken.id)
            .await
            .unwrap()
            .unwrap()
            .spec
            .description,
        "new words"
    );
    assert_eq!(fx.store.routines_version().await.unwrap(), before + 1);
}
