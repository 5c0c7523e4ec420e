//! Reaping and attempts: an interrupted slot is re-run once as its attempt
//! 2 when its routine allows it, never twice, and every reaped run says why.

use std::sync::Arc;

use cairn_core::routine::{Routine, RoutineRun, RoutineSpec, RunStatus, SpecFormat};
use cairn_store::{Reaped, RunOutcome, Store, StoreError};

use crate::admission::ended;
use crate::fixture::Fixture;
use crate::routines::{at, rerunner, routine, run_for};

fn spec_routine(name: &str, action: &str, guardrails: &str) -> Routine {
    let yaml = format!(
        "name: {name}\ntrigger: {{type: cron, schedule: 'every 1m'}}\naction: {action}\nguardrails: {guardrails}\n"
    );
    let spec = RoutineSpec::parse(&yaml, SpecFormat::Yaml).unwrap();
    spec.validate().unwrap();
    Routine::new(spec, "ada", at(0))
}

/// A slot's first run, held by `owner` until `lease` (seconds).
fn held(r: &Routine, slot: i64, owner: &str, lease: i64) -> RoutineRun {
    let mut run = run_for(r, Some(at(slot)), at(slot));
    run.owner = Some(owner.to_string());
    run.lease_until = Some(at(lease));
    run
}

/// Reaps at `secs` as process `by`.
async fn reap(store: &Store, secs: i64, by: &str) -> Vec<Reaped> {
    store
        .reap_orphans(at(secs), &rerunner(by, at(secs)))
        .await
        .unwrap()
}

fn ok_at(secs: i64) -> RunOutcome {
    RunOutcome {
        status: RunStatus::Ok,
        summary: Some("done".into()),
        tokens_used: None,
        completed_at: at(secs),
        notification_id: None,
        state: None,
        retain: None,
    }
}

pub async fn an_interrupted_slot_is_rerun_once_as_attempt_two(fx: &Fixture) {
    let r = routine("ada", "rerun");
    fx.store.create_routine(&r).await.unwrap();
    let first = held(&r, 60, "proc-dead", 90);
    fx.store.start_run(&first).await.unwrap();

    let reaped = reap(&fx.store, 100, "proc-b").await;
    assert_eq!(reaped.len(), 1);
    let again = reaped[0].rerun.clone().expect("re-run");
    assert_eq!(reaped[0].routine.as_ref().map(|r| r.id), Some(r.id));
    assert_eq!(
        (again.attempt, again.status, again.scheduled_for),
        (2, RunStatus::Running, Some(at(60)))
    );
    assert_eq!(again.owner.as_deref(), Some("proc-b"));
    assert_eq!(again.lease_until, Some(at(160)));
    let detail = again.trigger_detail.clone().unwrap();
    assert!(
        detail.contains("attempt 2") && detail.contains("crash of proc-dead"),
        "{detail}"
    );
    let got = fx.store.get_run(first.id).await.unwrap().unwrap();
    assert_eq!((got.status, got.attempt), (RunStatus::Interrupted, 1));
    assert_eq!(
        got.owner.as_deref(),
        Some("proc-dead"),
        "whose crash it was"
    );
    assert_eq!(
        got.result_summary.as_deref(),
        Some(
            format!(
                "interrupted by a crash of proc-dead; re-run as attempt 2 (run {})",
                again.id
            )
            .as_str()
        )
    );
    assert_eq!(
        fx.store.get_run(again.id).await.unwrap().as_ref(),
        Some(&again)
    );
    // The re-run is not a new fire: the routine's run count stays.
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.run_count, 1);
    assert_eq!(fx.store.count_running(Some(r.id)).await.unwrap(), 1);
    // Nothing else to reap; a third attempt of the slot is refused by the key.
    assert!(reap(&fx.store, 101, "proc-c").await.is_empty());
    let mut dup = held(&r, 60, "proc-x", 200);
    dup.attempt = 2;
    assert!(matches!(
        fx.store.start_run(&dup).await,
        Err(StoreError::Conflict(_))
    ));

    // An attempt 2 cut short in turn is not re-run again.
    let reaped = reap(&fx.store, 200, "proc-c").await;
    assert_eq!(reaped.len(), 1);
    assert_eq!(reaped[0].run.id, again.id);
    assert_eq!(reaped[0].rerun, None);
    assert_eq!(
        reaped[0].run.result_summary.as_deref(),
        Some("interrupted by a crash of proc-b; not re-run again (it was attempt 2)")
    );
    let runs = fx.store.list_runs(r.id, 10).await.unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.status == RunStatus::Interrupted));

    // A completed attempt 2 is the slot's one completed run.
    let r2 = routine("ada", "rerun-ok");
    fx.store.create_routine(&r2).await.unwrap();
    fx.store
        .start_run(&held(&r2, 60, "proc-dead", 90))
        .await
        .unwrap();
    let reaped = reap(&fx.store, 100, "proc-b").await;
    let again = reaped[0].rerun.clone().unwrap();
    assert!(fx.store.finish_run(again.id, &ok_at(101)).await.unwrap());
    let completed: Vec<_> = fx
        .store
        .list_runs(r2.id, 10)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.status == RunStatus::Ok)
        .map(|r| (r.scheduled_for, r.attempt))
        .collect();
    assert_eq!(completed, vec![(Some(at(60)), 2)]);
}

/// Several processes reaping the same orphans at once: each slot gets one
/// attempt 2, whoever records it.
pub async fn concurrent_reapers_record_one_attempt_two_per_slot(fx: &Fixture) {
    let mut routines = Vec::new();
    for i in 0..8 {
        let r = routine("ada", &format!("crowd-{i}"));
        fx.store.create_routine(&r).await.unwrap();
        fx.store
            .start_run(&held(&r, 60, "proc-dead", 90))
            .await
            .unwrap();
        routines.push(r);
    }
    let mut stores = vec![fx.store.clone()];
    for _ in 0..3 {
        stores.push(Store::connect(&fx.url).await.unwrap());
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let store = stores[i % stores.len()].clone();
        tasks.spawn(async move {
            store
                .reap_orphans(at(100), &rerunner(&format!("reaper-{i}"), at(100)))
                .await
                .unwrap()
        });
    }
    let reaped: Vec<_> = tasks.join_all().await.into_iter().flatten().collect();
    assert_eq!(reaped.len(), 8, "each orphan reaped once");
    assert_eq!(reaped.iter().filter(|r| r.rerun.is_some()).count(), 8);
    let routines = Arc::new(routines);
    for r in routines.iter() {
        let runs = fx.store.list_runs(r.id, 10).await.unwrap();
        let mut attempts: Vec<u32> = runs.iter().map(|r| r.attempt).collect();
        attempts.sort_unstable();
        assert_eq!(attempts, [1, 2], "{runs:?}");
    }
    for s in &stores[1..] {
        s.close().await;
    }
}

pub async fn slots_that_are_not_safe_to_repeat_say_why_they_are_not_rerun(fx: &Fixture) {
    let tool = spec_routine("tool", "{type: tool_call, tool: shell}", "{}");
    let job = spec_routine(
        "job",
        "{type: full_job, title: t, description: d}",
        "{idempotent: true}",
    );
    let quiet = spec_routine(
        "quiet",
        "{type: notification, message: hi}",
        "{on_interrupt: skip}",
    );
    let stopped = spec_routine("stopped", "{type: notification, message: hi}", "{}");
    let manual = routine("ada", "by-hand");
    for r in [&tool, &job, &quiet, &stopped, &manual] {
        fx.store.create_routine(r).await.unwrap();
    }
    let runs = [
        held(&tool, 60, "proc-dead", 90),
        held(&job, 60, "proc-dead", 90),
        held(&quiet, 60, "proc-dead", 90),
        held(&stopped, 60, "proc-dead", 90),
    ];
    for run in &runs {
        fx.store.start_run(run).await.unwrap();
    }
    let mut by_hand = run_for(&manual, None, at(60));
    by_hand.owner = None;
    by_hand.lease_until = None;
    fx.store.start_run(&by_hand).await.unwrap();
    fx.store
        .set_routine_enabled(stopped.id, false, at(70))
        .await
        .unwrap();

    let reaped = reap(&fx.store, 100, "proc-b").await;
    assert_eq!(reaped.len(), 5);
    let summary = |id| {
        let r = reaped.iter().find(|r| r.run.id == id).unwrap();
        (r.rerun.is_some(), r.run.result_summary.clone().unwrap())
    };
    assert_eq!(
        summary(runs[0].id),
        (
            false,
            "interrupted by a crash of proc-dead; not re-run (on_interrupt: skip)".into()
        )
    );
    // `idempotent: true` makes a job safe to repeat.
    assert!(summary(runs[1].id).0);
    assert_eq!(
        summary(runs[2].id),
        (
            false,
            "interrupted by a crash of proc-dead; not re-run (on_interrupt: skip)".into()
        )
    );
    assert_eq!(
        summary(runs[3].id),
        (
            false,
            "interrupted by a crash of proc-dead; not re-run (the routine is disabled)".into()
        )
    );
    assert_eq!(
        summary(by_hand.id),
        (
            false,
            "interrupted by a crash of an unknown process; not re-run (a manual fire is not a scheduled slot)"
                .into()
        )
    );
    for r in [&tool, &quiet, &stopped] {
        assert_eq!(fx.store.list_runs(r.id, 10).await.unwrap().len(), 1);
    }
}

pub async fn a_rerun_obeys_the_concurrency_limits(fx: &Fixture) {
    let r = spec_routine(
        "single",
        "{type: notification, message: hi}",
        "{max_concurrent: 1}",
    );
    fx.store.create_routine(&r).await.unwrap();
    let dead = held(&r, 60, "proc-dead", 90);
    // The next slot's run, by a live process, is running meanwhile.
    let live = held(&r, 120, "proc-live", 500);
    fx.store.start_run(&dead).await.unwrap();
    fx.store.start_run(&live).await.unwrap();
    let reaped = reap(&fx.store, 130, "proc-b").await;
    assert_eq!(reaped.len(), 1);
    let again = reaped[0].rerun.clone().unwrap();
    assert_eq!((again.attempt, again.status), (2, RunStatus::Skipped));
    let reason = again.skip_reason.clone().unwrap();
    assert!(
        reason.starts_with("re-run of a slot whose run was interrupted by a crash of proc-dead, refused: max_concurrent"),
        "{reason}"
    );
    let summary = reaped[0].run.result_summary.clone().unwrap();
    assert!(summary.contains("was refused: max_concurrent"), "{summary}");
    assert_eq!(fx.store.count_running(Some(r.id)).await.unwrap(), 1);

    // The global limit queues the re-run (a limit delays, it never drops),
    // and it starts once a place frees.
    let other = spec_routine("other", "{type: notification, message: hi}", "{}");
    fx.store.create_routine(&other).await.unwrap();
    fx.store
        .start_run(&held(&other, 60, "proc-dead", 140))
        .await
        .unwrap();
    let mut capped = rerunner("proc-b", at(150));
    capped.global_max = Some(1);
    let reaped = fx.store.reap_orphans(at(150), &capped).await.unwrap();
    let again = reaped[0].rerun.clone().unwrap();
    assert_eq!(again.status, RunStatus::Waiting);
    assert!(
        again
            .skip_reason
            .as_deref()
            .unwrap()
            .starts_with("global limit: 1 running"),
        "{:?}",
        reaped[0]
    );
    let summary = reaped[0].run.result_summary.clone().unwrap();
    assert!(summary.contains("waits for a place"), "{summary}");
    assert!(
        fx.store
            .start_waiting(None, &capped, at(151))
            .await
            .unwrap()
            .is_empty(),
        "started while the live run holds the one place"
    );
    assert!(
        fx.store
            .finish_run(live.id, &ended(RunStatus::Ok, 160))
            .await
            .unwrap()
    );
    let started = fx
        .store
        .start_waiting(None, &capped, at(161))
        .await
        .unwrap();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].run.id, again.id);
    assert_eq!(started[0].run.status, RunStatus::Running);
    assert_eq!(started[0].run.skip_reason, None);
}

/// A daemon holding its home's lock reaps, at once and whatever their
/// lease, the runs of its home's earlier daemons, and nobody else's.
pub async fn a_home_reaps_its_predecessors_and_nothing_else(fx: &Fixture) {
    let r = spec_routine(
        "homes",
        "{type: notification, message: hi}",
        "{max_concurrent: 100}",
    );
    fx.store.create_routine(&r).await.unwrap();
    let owners = [
        "daemon-a1b2-pid10-0001", // an earlier daemon of this home
        "daemon-a1b2-pid11-0002", // this daemon
        "daemon-c3d4-pid12-0003", // another home's live daemon
        "daemon-a1b2x-pid13-0004",
        "DAEMON-A1B2-pid14-0005",
        "pid15-0006", // a CLI process of any home
    ];
    let mut ids = Vec::new();
    for (i, owner) in owners.iter().enumerate() {
        let run = held(&r, 60 * (i as i64 + 1), owner, 10_000);
        fx.store.start_run(&run).await.unwrap();
        ids.push(run.id);
    }
    let me = rerunner("daemon-a1b2-pid11-0002", at(500));
    let reaped = fx
        .store
        .reap_predecessors("daemon-a1b2-", at(500), &me)
        .await
        .unwrap();
    let got: Vec<_> = reaped.iter().map(|r| r.run.id).collect();
    assert_eq!(got, vec![ids[0]]);
    let summary = reaped[0].run.result_summary.clone().unwrap();
    assert!(
        summary
            .starts_with("interrupted by a crash of daemon-a1b2-pid10-0001; re-run as attempt 2"),
        "{summary}"
    );
    assert_eq!(
        reaped[0].rerun.as_ref().and_then(|r| r.owner.as_deref()),
        Some("daemon-a1b2-pid11-0002")
    );
    for id in &ids[1..] {
        let run = fx.store.get_run(*id).await.unwrap().unwrap();
        assert_eq!(run.status, RunStatus::Running, "{run:?}");
    }
    assert!(matches!(
        fx.store.reap_predecessors("", at(500), &me).await,
        Err(StoreError::Conflict(_))
    ));
}

/// Runs recorded before attempts existed become first attempts, and the
/// slot key still holds for them.
pub async fn the_attempt_migration_keeps_runs_as_first_attempts(fx: &Fixture) {
    let old = fx.sibling().await;
    old.store.migrate_up_to(11).await.unwrap();
    let r = routine("ada", "old");
    let run = run_for(&r, Some(at(60)), at(61));
    let raw = sqlx::AnyPool::connect(&old.url).await.unwrap();
    // The routine as that schema held it (today's writes name later columns).
    sqlx::query(
        "INSERT INTO routines (id, user_id, name, trigger_type, trigger_config, action_type, \
         action_config, guardrails, notify, created_at, updated_at) \
         VALUES ($1, 'ada', 'old', 'cron', $2, 'notification', $3, $4, $5, 0, 0)",
    )
    .bind(r.id.to_string())
    .bind(serde_json::to_string(&r.spec.trigger).unwrap())
    .bind(serde_json::to_string(&r.spec.action).unwrap())
    .bind(serde_json::to_string(&r.spec.guardrails).unwrap())
    .bind(serde_json::to_string(&r.spec.notify).unwrap())
    .execute(&raw)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO routine_runs (id, routine_id, trigger_type, scheduled_for, started_at, status, owner, lease_until) \
         VALUES ($1, $2, 'cron', $3, $4, 'running', 'proc-old', $5)",
    )
    .bind(run.id.to_string())
    .bind(r.id.to_string())
    .bind(at(60).timestamp_micros())
    .bind(at(61).timestamp_micros())
    .bind(at(90).timestamp_micros())
    .execute(&raw)
    .await
    .unwrap();
    raw.close().await;
    let report = old.store.migrate_up_to(i64::MAX).await.unwrap();
    let last = cairn_store::MIGRATIONS.last().unwrap().version;
    assert_eq!(report.applied, (12..=last).collect::<Vec<_>>());
    let got = old.store.get_run(run.id).await.unwrap().unwrap();
    assert_eq!((got.attempt, got.status), (1, RunStatus::Running));
    assert!(matches!(
        old.store
            .start_run(&run_for(&r, Some(at(60)), at(62)))
            .await,
        Err(StoreError::Conflict(_))
    ));
    let reaped = reap(&old.store, 100, "proc-new").await;
    assert_eq!(reaped[0].rerun.as_ref().map(|r| r.attempt), Some(2));
    old.cleanup().await;
}
