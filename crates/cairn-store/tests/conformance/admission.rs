//! Admission: the routine engine's guardrails, checked in the transaction
//! that records the run, so they hold across processes.

use std::time::Duration as StdDuration;

use chrono::Duration;
use serde_json::json;

use cairn_core::routine::RunStatus;
use cairn_store::{Admission, Admitted, FinishRun, RunOutcome, SlotMove};

use crate::fixture::Fixture;
use crate::routines::{at, rerunner, routine, run_for};

pub fn ended(status: RunStatus, secs: i64) -> RunOutcome {
    RunOutcome {
        status,
        summary: None,
        tokens_used: None,
        completed_at: at(secs),
        notification_id: None,
        state: None,
        retain: None,
    }
}

pub async fn admit(
    fx: &Fixture,
    admission: Admission,
    runs: Vec<cairn_core::routine::RoutineRun>,
) -> Admitted {
    fx.store
        .admit_runs(&[(admission, runs)])
        .await
        .unwrap()
        .remove(0)
}

pub async fn a_slot_is_admitted_once_and_moves_next_fire(fx: &Fixture) {
    let mut r = routine("ada", "tick");
    r.runtime.next_fire_at = Some(at(60));
    fx.store.create_routine(&r).await.unwrap();
    let slot = |next| Admission {
        slot: Some(SlotMove {
            expected: at(60),
            next: Some(next),
            disable: false,
            as_read: None,
            retry: None,
        }),
        ..Admission::default()
    };
    let first = run_for(&r, Some(at(60)), at(61));
    assert_eq!(
        admit(fx, slot(at(120)), vec![first.clone()]).await,
        Admitted::Started
    );
    let again = run_for(&r, Some(at(60)), at(62));
    assert_eq!(admit(fx, slot(at(120)), vec![again]).await, Admitted::Taken);
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.next_fire_at, Some(at(120)));
    assert_eq!(stored.runtime.run_count, 1);
    assert_eq!(stored.runtime.last_run_at, Some(at(61)));
    assert_eq!(fx.store.list_runs(r.id, 10).await.unwrap().len(), 1);
}

pub async fn a_one_shot_is_disabled_by_its_claim(fx: &Fixture) {
    let mut r = routine("ada", "once");
    r.runtime.next_fire_at = Some(at(60));
    fx.store.create_routine(&r).await.unwrap();
    let admission = Admission {
        slot: Some(SlotMove {
            expected: at(60),
            next: None,
            disable: true,
            as_read: None,
            retry: None,
        }),
        ..Admission::default()
    };
    assert_eq!(
        admit(fx, admission, vec![run_for(&r, Some(at(60)), at(60))]).await,
        Admitted::Started
    );
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert!(!stored.spec.enabled);
    assert_eq!(stored.runtime.next_fire_at, None);
    assert_eq!(fx.store.earliest_fire_at().await.unwrap(), None);
}

pub async fn catch_up_records_every_slot_of_one_claim(fx: &Fixture) {
    let mut r = routine("ada", "all");
    r.runtime.next_fire_at = Some(at(60));
    fx.store.create_routine(&r).await.unwrap();
    let admission = Admission {
        slot: Some(SlotMove {
            expected: at(60),
            next: Some(at(600)),
            disable: false,
            as_read: None,
            retry: None,
        }),
        max_concurrent: Some(1),
        ..Admission::default()
    };
    let runs = (1..=3)
        .map(|i| run_for(&r, Some(at(60 * i)), at(500)))
        .collect();
    assert_eq!(admit(fx, admission, runs).await, Admitted::Started);
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.run_count, 3);
    let mut slots: Vec<_> = fx
        .store
        .list_runs(r.id, 10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.scheduled_for)
        .collect();
    slots.sort();
    assert_eq!(slots, vec![Some(at(60)), Some(at(120)), Some(at(180))]);
}

pub async fn each_guardrail_refuses_with_a_recorded_reason(fx: &Fixture) {
    let r = routine("ada", "guarded");
    fx.store.create_routine(&r).await.unwrap();

    // max_concurrent: one running run fills a limit of 1.
    let running = run_for(&r, None, at(0));
    let limit = Admission {
        max_concurrent: Some(1),
        ..Admission::default()
    };
    assert_eq!(
        admit(fx, limit.clone(), vec![running.clone()]).await,
        Admitted::Started
    );
    let refused = run_for(&r, None, at(1));
    let Admitted::Skipped(reason) = admit(fx, limit.clone(), vec![refused.clone()]).await else {
        panic!("a second run was admitted past max_concurrent 1");
    };
    assert!(reason.starts_with("max_concurrent: 1 run(s)"), "{reason}");
    let stored = fx.store.get_run(refused.id).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Skipped);
    assert_eq!(stored.skip_reason.as_deref(), Some(reason.as_str()));
    assert_eq!(stored.completed_at, Some(at(1)));
    assert_eq!(fx.store.count_running(Some(r.id)).await.unwrap(), 1);

    // The global limit counts every routine's runs, and queues: the run
    // waits with the reason rather than being refused.
    let global = Admission {
        global_max: Some(1),
        ..Admission::default()
    };
    let queued = run_for(&r, None, at(2));
    let Admitted::Waiting(reason) = admit(fx, global, vec![queued.clone()]).await else {
        panic!("not queued behind the global limit");
    };
    assert_eq!(
        reason,
        "global limit: 1 running (routines.max_concurrent = 1)"
    );
    let stored = fx.store.get_run(queued.id).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Waiting);
    assert_eq!(stored.skip_reason.as_deref(), Some(reason.as_str()));
    assert_eq!(stored.owner, None);
    // It leaves the queue for the cooldown check below to count as not run.
    let starter = cairn_store::Rerunner {
        owner: "proc-a".into(),
        lease_until: at(600),
        global_max: Some(2),
    };
    let started = fx.store.start_waiting(None, &starter, at(3)).await.unwrap();
    assert_eq!(started.len(), 1);
    assert!(
        fx.store
            .finish_run(queued.id, &ended(RunStatus::Skipped, 4))
            .await
            .unwrap()
    );
    assert!(
        fx.store
            .finish_run(running.id, &ended(RunStatus::Ok, 10))
            .await
            .unwrap()
    );

    // Cooldown: measured from the last run that was not skipped.
    let cooldown = Admission {
        cooldown: Some(StdDuration::from_secs(60)),
        ..Admission::default()
    };
    let Admitted::Skipped(reason) =
        admit(fx, cooldown.clone(), vec![run_for(&r, None, at(30))]).await
    else {
        panic!("admitted within the cooldown");
    };
    assert!(reason.starts_with("cooldown: it last fired at"), "{reason}");
    assert!(reason.contains("not before"), "{reason}");
    assert_eq!(
        admit(fx, cooldown, vec![run_for(&r, None, at(61))]).await,
        Admitted::Started
    );

    // The engine's own refusal (backoff) is recorded as given.
    let backoff = Admission {
        refuse: Some("backoff: 2 failures in a row".into()),
        ..Admission::default()
    };
    assert_eq!(
        admit(fx, backoff, vec![run_for(&r, None, at(70))]).await,
        Admitted::Skipped("backoff: 2 failures in a row".into())
    );
}

pub async fn dedup_refuses_the_same_payload_within_the_window(fx: &Fixture) {
    let r = routine("ada", "dedup");
    fx.store.create_routine(&r).await.unwrap();
    let dedup = Admission {
        dedup_window: Some(StdDuration::from_secs(600)),
        ..Admission::default()
    };
    let keyed = |secs, key: &str| {
        let mut run = run_for(&r, None, at(secs));
        run.trigger_type = "webhook".into();
        run.dedup_key = Some(key.to_string());
        run
    };
    let first = keyed(0, "abc");
    assert_eq!(
        admit(fx, dedup.clone(), vec![first.clone()]).await,
        Admitted::Started
    );
    let Admitted::Skipped(reason) = admit(fx, dedup.clone(), vec![keyed(100, "abc")]).await else {
        panic!("a duplicate payload was admitted within the window");
    };
    assert!(reason.contains(&first.id.to_string()), "{reason}");
    assert_eq!(
        admit(fx, dedup.clone(), vec![keyed(101, "other")]).await,
        Admitted::Started
    );
    assert_eq!(
        admit(fx, dedup, vec![keyed(700, "abc")]).await,
        Admitted::Started
    );
}

pub async fn max_runs_disables_the_routine(fx: &Fixture) {
    let r = routine("ada", "twice");
    fx.store.create_routine(&r).await.unwrap();
    let max = Admission {
        max_runs: Some(2),
        ..Admission::default()
    };
    assert_eq!(
        admit(fx, max.clone(), vec![run_for(&r, None, at(0))]).await,
        Admitted::Started
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
    assert_eq!(
        admit(fx, max, vec![run_for(&r, None, at(1))]).await,
        Admitted::Started
    );
    assert!(
        !fx.store
            .get_routine(r.id)
            .await
            .unwrap()
            .unwrap()
            .spec
            .enabled
    );
}

pub async fn a_deleted_routine_admits_nothing(fx: &Fixture) {
    let r = routine("ada", "gone");
    fx.store.create_routine(&r).await.unwrap();
    assert!(fx.store.delete_routine(r.id).await.unwrap());
    assert_eq!(
        admit(fx, Admission::default(), vec![run_for(&r, None, at(0))]).await,
        Admitted::Taken
    );
}

pub async fn finishing_keeps_state_and_notification(fx: &Fixture) {
    let r = routine("ada", "stateful");
    fx.store.create_routine(&r).await.unwrap();
    let run = run_for(&r, None, at(0));
    assert_eq!(
        admit(fx, Admission::default(), vec![run.clone()]).await,
        Admitted::Started
    );
    let job = uuid::Uuid::now_v7();
    fx.store.set_run_job(run.id, job).await.unwrap();
    let note = uuid::Uuid::now_v7();
    let mut outcome = ended(RunStatus::Attention, 5);
    outcome.notification_id = Some(note);
    outcome.state = Some(json!({"last_seen": 41}));
    assert!(fx.store.finish_run(run.id, &outcome).await.unwrap());
    let stored = fx.store.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(stored.job_id, Some(job));
    assert_eq!(stored.notification_id, Some(note));
    let routine = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(routine.runtime.state, json!({"last_seen": 41}));
}

pub async fn retention_prunes_old_ended_runs(fx: &Fixture) {
    let r = routine("ada", "chatty");
    fx.store.create_routine(&r).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        let run = run_for(&r, None, at(i * 10));
        assert_eq!(
            admit(fx, Admission::default(), vec![run.clone()]).await,
            Admitted::Started
        );
        if i < 4 {
            assert!(
                fx.store
                    .finish_run(run.id, &ended(RunStatus::Ok, i * 10 + 1))
                    .await
                    .unwrap()
            );
        }
        ids.push(run.id);
    }
    // The running one (the newest) is never pruned.
    assert_eq!(fx.store.prune_runs(r.id, 2).await.unwrap(), 3);
    let left: Vec<_> = fx
        .store
        .list_runs(r.id, 10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(left, vec![ids[4], ids[3]]);
}

/// A crash is not the routine's failure: reaped runs leave the failure
/// streak and the backoff's last failure as they were.
pub async fn a_reaped_run_is_not_a_failure(fx: &Fixture) {
    let r = routine("ada", "crashy");
    fx.store.create_routine(&r).await.unwrap();
    let failed = run_for(&r, None, at(0));
    fx.store.start_run(&failed).await.unwrap();
    assert!(
        fx.store
            .finish_run(failed.id, &ended(RunStatus::Failed, 10))
            .await
            .unwrap()
    );
    for i in 1..=3 {
        let run = run_for(&r, None, at(i * 100));
        assert_eq!(
            admit(fx, Admission::default(), vec![run.clone()]).await,
            Admitted::Started
        );
        let now = at(i * 100) + Duration::seconds(120);
        let reaped = fx
            .store
            .reap_orphans(now, &rerunner("proc-b", now))
            .await
            .unwrap();
        assert_eq!(reaped.len(), 1);
        assert_eq!(reaped[0].run.id, run.id);
    }
    let routine = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(routine.runtime.consecutive_failures, 1);
    assert_eq!(fx.store.last_failure_at(r.id).await.unwrap(), Some(at(10)));
    // Nor does a shutdown's interruption.
    let run = run_for(&r, None, at(500));
    fx.store.start_run(&run).await.unwrap();
    let ids = fx
        .store
        .interrupt_owned("proc-a", at(501), "interrupted: stopped")
        .await
        .unwrap();
    assert_eq!(ids, vec![run.id]);
    let routine = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(routine.runtime.consecutive_failures, 1);
    assert_eq!(fx.store.last_failure_at(r.id).await.unwrap(), Some(at(10)));
}

pub async fn definition_changes_bump_the_version(fx: &Fixture) {
    let v0 = fx.store.routines_version().await.unwrap();
    let mut r = routine("ada", "versioned");
    fx.store.create_routine(&r).await.unwrap();
    let v1 = fx.store.routines_version().await.unwrap();
    assert!(v1 > v0);
    r.spec.description = "changed".into();
    fx.store.update_routine(&r).await.unwrap();
    let v2 = fx.store.routines_version().await.unwrap();
    assert!(v2 > v1);
    fx.store
        .set_routine_enabled(r.id, false, at(1))
        .await
        .unwrap();
    let v3 = fx.store.routines_version().await.unwrap();
    assert!(v3 > v2);
    // Running it is not a definition change.
    fx.store
        .set_routine_enabled(r.id, true, at(2))
        .await
        .unwrap();
    let v4 = fx.store.routines_version().await.unwrap();
    assert_eq!(
        admit(fx, Admission::default(), vec![run_for(&r, None, at(3))]).await,
        Admitted::Started
    );
    assert_eq!(fx.store.routines_version().await.unwrap(), v4);
    fx.store.delete_routine(r.id).await.unwrap();
    assert!(fx.store.routines_version().await.unwrap() > v4);
}

pub async fn finishing_with_retain_prunes_in_the_same_write(fx: &Fixture) {
    let r = routine("ada", "pruned");
    fx.store.create_routine(&r).await.unwrap();
    let mut last = None;
    for i in 0..4 {
        let run = run_for(&r, None, at(i * 10));
        assert_eq!(
            admit(fx, Admission::default(), vec![run.clone()]).await,
            Admitted::Started
        );
        let mut outcome = ended(RunStatus::Ok, i * 10 + 1);
        outcome.retain = Some(2);
        assert!(fx.store.finish_run(run.id, &outcome).await.unwrap());
        last = Some(run.id);
    }
    let left = fx.store.list_runs(r.id, 10).await.unwrap();
    assert_eq!(left.len(), 2);
    assert_eq!(left[0].id, last.unwrap());
}

pub async fn only_triggered_routines_are_listed_for_the_engine(fx: &Fixture) {
    let timed = routine("ada", "timed");
    fx.store.create_routine(&timed).await.unwrap();
    let mut hook = routine("ada", "hook");
    hook.spec.trigger = cairn_core::routine::Trigger::Webhook {
        path: None,
        secret: None,
    };
    fx.store.create_routine(&hook).await.unwrap();
    let mut off = routine("ada", "off-hook");
    off.spec.trigger = cairn_core::routine::Trigger::Webhook {
        path: None,
        secret: None,
    };
    off.spec.enabled = false;
    fx.store.create_routine(&off).await.unwrap();
    let listed: Vec<_> = fx
        .store
        .list_triggered_routines()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.spec.name)
        .collect();
    assert_eq!(listed, ["hook"]);
}

pub async fn a_batch_admits_in_order_with_per_routine_limits(fx: &Fixture) {
    let a = routine("ada", "busy");
    let b = routine("ada", "other");
    fx.store.create_routine(&a).await.unwrap();
    fx.store.create_routine(&b).await.unwrap();
    let capped = Admission {
        max_concurrent: Some(2),
        global_max: Some(3),
        ..Admission::default()
    };
    let fires = vec![
        (capped.clone(), vec![run_for(&a, None, at(1))]),
        (capped.clone(), vec![run_for(&b, None, at(2))]),
        (capped.clone(), vec![run_for(&a, None, at(3))]),
        // The routine's own limit: two of `busy` run already.
        (capped.clone(), vec![run_for(&a, None, at(4))]),
        // The global one: three run in all, so it waits for a place.
        (capped.clone(), vec![run_for(&b, None, at(5))]),
    ];
    let admitted = fx.store.admit_runs(&fires).await.unwrap();
    assert_eq!(
        admitted[..3],
        [Admitted::Started, Admitted::Started, Admitted::Started]
    );
    assert!(matches!(&admitted[3], Admitted::Skipped(r) if r.starts_with("max_concurrent")));
    assert!(
        matches!(&admitted[4], Admitted::Waiting(r) if r.starts_with("global limit: 3 running"))
    );
    // Counters written once per routine at the end hold every started run.
    let busy = fx.store.get_routine(a.id).await.unwrap().unwrap();
    assert_eq!(busy.runtime.run_count, 2);
    assert_eq!(busy.runtime.last_run_at, Some(at(3)));
    let other = fx.store.get_routine(b.id).await.unwrap().unwrap();
    assert_eq!(other.runtime.run_count, 1);
    assert_eq!(other.runtime.last_run_at, Some(at(2)));
    // A later batch counts the runs the earlier one left running.
    let again = fx
        .store
        .admit_runs(&[(capped, vec![run_for(&a, None, at(6))])])
        .await
        .unwrap();
    assert!(matches!(&again[0], Admitted::Skipped(r) if r.starts_with("max_concurrent")));
}

pub async fn a_batch_with_a_run_limit_disables_in_order(fx: &Fixture) {
    let r = routine("ada", "limited");
    fx.store.create_routine(&r).await.unwrap();
    let unlimited = Admission::default();
    let limited = Admission {
        max_runs: Some(2),
        ..Admission::default()
    };
    let fires = vec![
        (unlimited, vec![run_for(&r, None, at(1))]),
        (limited, vec![run_for(&r, None, at(2))]),
    ];
    let admitted = fx.store.admit_runs(&fires).await.unwrap();
    assert_eq!(admitted, vec![Admitted::Started, Admitted::Started]);
    let stored = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.run_count, 2);
    assert_eq!(stored.runtime.last_run_at, Some(at(2)));
    assert!(!stored.spec.enabled, "the second run reached max_runs");
}

pub async fn a_batch_of_run_ends_matches_ending_them_one_by_one(fx: &Fixture) {
    let a = routine("ada", "flaky");
    let b = routine("ada", "broken");
    fx.store.create_routine(&a).await.unwrap();
    fx.store.create_routine(&b).await.unwrap();
    let start = |r: &cairn_core::routine::Routine, secs| {
        let run = run_for(r, None, at(secs));
        (run.clone(), (Admission::default(), vec![run]))
    };
    let (a_runs, mut fires): (Vec<_>, Vec<_>) = (0..4).map(|i| start(&a, i)).unzip();
    let (b_runs, b_fires): (Vec<_>, Vec<_>) = (10..13).map(|i| start(&b, i)).unzip();
    fires.extend(b_fires);
    fx.store.admit_runs(&fires).await.unwrap();
    // `broken` already failed once; one of its runs was reaped meanwhile.
    assert!(
        fx.store
            .finish_run(b_runs[0].id, &ended(RunStatus::Failed, 20))
            .await
            .unwrap()
    );
    let finish = |run: &cairn_core::routine::RoutineRun, status, secs, state| {
        let note = crate::notifications::pending(secs, "inbox");
        let mut outcome = ended(status, secs);
        outcome.notification_id = Some(note.id);
        outcome.state = state;
        outcome.retain = Some(3);
        FinishRun {
            run_id: run.id,
            routine_id: run.routine_id,
            outcome,
            notification: Some(note.into()),
            auto_pause: None,
        }
    };
    let batch = vec![
        finish(&a_runs[0], RunStatus::Failed, 30, Some(json!({"n": 1}))),
        finish(&b_runs[1], RunStatus::Failed, 31, None),
        finish(&a_runs[1], RunStatus::Ok, 32, Some(json!({"n": 2}))),
        finish(&a_runs[2], RunStatus::Failed, 33, None),
        finish(&b_runs[0], RunStatus::Ok, 34, None),
        finish(&a_runs[3], RunStatus::Failed, 35, None),
        finish(&b_runs[2], RunStatus::Failed, 36, None),
    ];
    let done = fx.store.finish_runs(&batch).await.unwrap();
    let ended_now: Vec<bool> = done.iter().map(|f| f.ended).collect();
    assert_eq!(ended_now, vec![true, true, true, true, false, true, true]);
    assert!(done.iter().all(|f| !f.paused && !f.waiting), "{done:?}");
    // Every notification is recorded, the late run's too.
    for f in &batch {
        let id = f.notification.as_ref().unwrap().id;
        assert!(fx.store.get_notification(id).await.unwrap().is_some());
    }
    let flaky = fx.store.get_routine(a.id).await.unwrap().unwrap();
    assert_eq!(
        flaky.runtime.consecutive_failures, 2,
        "reset by the Ok, then two"
    );
    assert_eq!(flaky.runtime.state, json!({"n": 2}));
    let broken = fx.store.get_routine(b.id).await.unwrap().unwrap();
    assert_eq!(
        broken.runtime.consecutive_failures, 3,
        "the late Ok did not count"
    );
    // Retention applies once the batch has ended its runs.
    assert_eq!(fx.store.list_runs(a.id, 10).await.unwrap().len(), 3);
    let late = fx.store.get_run(b_runs[0].id).await.unwrap().unwrap();
    assert_eq!(late.status, RunStatus::Failed);
    assert_eq!(late.notification_id, None);
    // A run named twice in one batch ends once, the first time.
    let (twice, fire) = start(&a, 40);
    fx.store.admit_runs(&[fire]).await.unwrap();
    let again = vec![
        finish(&twice, RunStatus::Ok, 41, None),
        finish(&twice, RunStatus::Failed, 42, None),
    ];
    let done = fx.store.finish_runs(&again).await.unwrap();
    assert_eq!(
        done.iter().map(|f| f.ended).collect::<Vec<_>>(),
        vec![true, false]
    );
    let stored = fx.store.get_run(twice.id).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Ok);
    let flaky = fx.store.get_routine(a.id).await.unwrap().unwrap();
    assert_eq!(flaky.runtime.consecutive_failures, 0);
}

pub async fn a_quiet_admission_records_one_refusal_per_reason_a_window(fx: &Fixture) {
    let r = routine("ada", "quiet");
    fx.store.create_routine(&r).await.unwrap();
    let quiet = |refuse: &str| Admission {
        refuse: Some(refuse.to_string()),
        quiet: Some(StdDuration::from_secs(60)),
        ..Admission::default()
    };
    // 300 refusals in 30 s: one record for the first, none for the rest.
    let mut recorded = 0;
    for i in 0..300 {
        match admit(fx, quiet("replay"), vec![run_for(&r, None, at(i / 10))]).await {
            Admitted::Skipped(reason) => {
                assert_eq!(reason, "replay");
                recorded += 1;
            }
            Admitted::Refused(reason) => assert_eq!(reason, "replay"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(recorded, 1);
    // Another reason is recorded on its own; so is the same one a window later.
    assert_eq!(
        admit(fx, quiet("cooldown"), vec![run_for(&r, None, at(31))]).await,
        Admitted::Skipped("cooldown".into())
    );
    assert_eq!(
        admit(fx, quiet("replay"), vec![run_for(&r, None, at(61))]).await,
        Admitted::Skipped("replay".into())
    );
    let runs = fx.store.list_runs(r.id, 1000).await.unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    // Without `quiet`, every refusal is recorded as before.
    let loud = Admission {
        refuse: Some("replay".into()),
        ..Admission::default()
    };
    assert_eq!(
        admit(fx, loud, vec![run_for(&r, None, at(62))]).await,
        Admitted::Skipped("replay".into())
    );
}
