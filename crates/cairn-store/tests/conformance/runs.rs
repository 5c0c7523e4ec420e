//! Runs: one run per slot (invariant 1), through `Store::admit_rounds` as
//! the routine engine fires, across pools standing in for processes; leases
//! and orphans (invariant 2).

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use cairn_core::routine::{Pause, Routine, RoutineRun, RunStatus};
use cairn_store::{Admission, Admitted, OverlapRule, RunOutcome, SlotMove, Store};

use crate::fixture::Fixture;
use crate::routines::{at, rerunner, routine, run_for};

fn outcome(status: RunStatus, secs: i64) -> RunOutcome {
    RunOutcome {
        status,
        summary: Some(format!("{status}")),
        tokens_used: Some(42),
        completed_at: at(secs),
        notification_id: None,
        state: None,
        retain: None,
    }
}

/// The admission the routine engine's timed path builds for the slot
/// `run.scheduled_for` of `r` (see `cairn-automation`'s `engine/timed.rs`):
/// the slot's compare-and-set moving `next_fire_at` to `next` (a one-shot,
/// `next: None`, is disabled by it), and its overlap and concurrency guards.
pub fn scheduled(r: &Routine, run: &RoutineRun, next: Option<DateTime<Utc>>) -> Admission {
    let once = next.is_none();
    Admission {
        slot: Some(SlotMove {
            expected: run.scheduled_for.unwrap(),
            next,
            disable: once,
            as_read: None,
            retry: None,
        }),
        max_concurrent: Some(r.spec.guardrails.max_concurrent),
        global_max: Some(16),
        max_runs: r.spec.guardrails.max_runs,
        overlap: Some(OverlapRule {
            policy: r.spec.overlap(),
            start_first: true,
            buffer_limit: 5,
        }),
        ..Admission::default()
    }
}

/// Admits one scheduled fire through `Store::admit_rounds`, the engine's path.
async fn fire(
    store: &Store,
    r: &Routine,
    run: &RoutineRun,
    next: Option<DateTime<Utc>>,
) -> Admitted {
    let round = store
        .admit_rounds(&[(scheduled(r, run, next), vec![run.clone()])])
        .await
        .unwrap()
        .remove(0);
    if round.admitted == Admitted::Started {
        assert_eq!(round.runs.len(), 1);
        assert_eq!(round.runs[0].id, run.id);
        assert_eq!(round.runs[0].status, RunStatus::Running);
    } else {
        assert!(round.runs.is_empty(), "{round:?}");
    }
    round.admitted
}

pub async fn a_slot_fires_once(fx: &Fixture) {
    let mut r = routine("ada", "tick");
    r.runtime.next_fire_at = Some(at(60));
    fx.store.create_routine(&r).await.unwrap();

    let first = run_for(&r, Some(at(60)), at(61));
    assert_eq!(
        fire(&fx.store, &r, &first, Some(at(120))).await,
        Admitted::Started
    );
    let again = run_for(&r, Some(at(60)), at(62));
    assert_eq!(
        fire(&fx.store, &r, &again, Some(at(120))).await,
        Admitted::Taken
    );

    let got = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(got.runtime.next_fire_at, Some(at(120)));
    assert_eq!(got.runtime.last_run_at, Some(at(61)));
    assert_eq!(got.runtime.run_count, 1);
    assert_eq!(
        fx.store.get_run(first.id).await.unwrap().as_ref(),
        Some(&first)
    );
    assert_eq!(fx.store.get_run(again.id).await.unwrap(), None);
    assert_eq!(fx.store.list_runs(r.id, 10).await.unwrap().len(), 1);
}

pub async fn a_slot_fires_only_while_current_enabled_and_unpaused(fx: &Fixture) {
    let mut r = routine("ada", "tock");
    r.runtime.next_fire_at = Some(at(60));
    fx.store.create_routine(&r).await.unwrap();
    // A stale slot (not the routine's current next_fire_at) is taken.
    let stale = run_for(&r, Some(at(30)), at(61));
    assert_eq!(
        fire(&fx.store, &r, &stale, Some(at(120))).await,
        Admitted::Taken
    );
    // A disabled routine's slot is taken.
    fx.store
        .set_routine_enabled(r.id, false, at(1))
        .await
        .unwrap();
    let now = run_for(&r, Some(at(60)), at(61));
    assert_eq!(
        fire(&fx.store, &r, &now, Some(at(120))).await,
        Admitted::Taken
    );
    // So is a paused one's.
    fx.store
        .set_routine_enabled(r.id, true, at(2))
        .await
        .unwrap();
    let pause = Pause {
        at: at(3),
        by: "ada (cli)".into(),
        note: None,
    };
    assert!(fx.store.pause_routine(r.id, &pause).await.unwrap());
    assert_eq!(
        fire(&fx.store, &r, &now, Some(at(120))).await,
        Admitted::Taken
    );
    assert_eq!(fx.store.list_runs(r.id, 10).await.unwrap(), []);
    // Resumed, a one-shot's claim clears next_fire_at and disables it.
    assert!(
        fx.store
            .resume_routine(r.id, at(4))
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(fire(&fx.store, &r, &now, None).await, Admitted::Started);
    let got = fx.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(got.runtime.next_fire_at, None);
    assert!(!got.spec.enabled);
    assert_eq!(got.runtime.run_count, 1);
}

pub async fn concurrent_fires_from_separate_pools_yield_one_run(fx: &Fixture) {
    let mut r = routine("ada", "race");
    r.runtime.next_fire_at = Some(at(60));
    fx.store.create_routine(&r).await.unwrap();
    // Four independent pools stand in for four processes sharing the database.
    let mut stores = vec![fx.store.clone()];
    for _ in 0..3 {
        stores.push(Store::connect(&fx.url).await.unwrap());
    }
    let r = Arc::new(r);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let store = stores[i % stores.len()].clone();
        let r = Arc::clone(&r);
        tasks.spawn(async move {
            let run = run_for(&r, Some(at(60)), at(61));
            fire(&store, &r, &run, Some(at(120))).await
        });
    }
    let verdicts = tasks.join_all().await;
    let wins = verdicts.iter().filter(|v| **v == Admitted::Started).count();
    assert_eq!(wins, 1, "{verdicts:?}");
    assert!(
        verdicts
            .iter()
            .all(|v| matches!(v, Admitted::Started | Admitted::Taken)),
        "{verdicts:?}"
    );
    assert_eq!(fx.store.list_runs(r.id, 100).await.unwrap().len(), 1);
    assert_eq!(
        fx.store
            .get_routine(r.id)
            .await
            .unwrap()
            .unwrap()
            .runtime
            .run_count,
        1
    );
    for s in &stores[1..] {
        s.close().await;
    }
}

/// The unique slot key holds even for an admission without the
/// compare-and-set (a backfill recording a slot): one run per slot.
pub async fn slot_key_is_unique(fx: &Fixture) {
    let r = routine("ada", "slotted");
    fx.store.create_routine(&r).await.unwrap();
    let unchecked = |run: RoutineRun| (Admission::default(), vec![run]);
    let admitted = fx
        .store
        .admit_runs(&[unchecked(run_for(&r, Some(at(60)), at(61)))])
        .await
        .unwrap();
    assert_eq!(admitted, [Admitted::Started]);
    let admitted = fx
        .store
        .admit_runs(&[unchecked(run_for(&r, Some(at(60)), at(62)))])
        .await
        .unwrap();
    assert_eq!(admitted, [Admitted::Taken]);
    assert_eq!(fx.store.list_runs(r.id, 10).await.unwrap().len(), 1);
    assert_eq!(
        fx.store
            .get_routine(r.id)
            .await
            .unwrap()
            .unwrap()
            .runtime
            .run_count,
        1
    );
}

pub async fn unscheduled_runs_never_collide(fx: &Fixture) {
    let r = routine("ada", "manual");
    fx.store.create_routine(&r).await.unwrap();
    let manual = |run: RoutineRun| (Admission::default(), vec![run]);
    for i in 0..3 {
        let admitted = fx
            .store
            .admit_runs(&[manual(run_for(&r, None, at(i)))])
            .await
            .unwrap();
        assert_eq!(admitted, [Admitted::Started]);
    }
    assert_eq!(fx.store.list_runs(r.id, 10).await.unwrap().len(), 3);
    assert_eq!(fx.store.count_running(Some(r.id)).await.unwrap(), 3);
    let missing = routine("ada", "missing");
    let admitted = fx
        .store
        .admit_runs(&[manual(run_for(&missing, None, at(1)))])
        .await
        .unwrap();
    assert_eq!(admitted, [Admitted::Taken]);
    assert_eq!(fx.store.list_runs(missing.id, 10).await.unwrap(), []);
}

pub async fn finish_run_once_and_failure_streak(fx: &Fixture) {
    let r = routine("ada", "streak");
    fx.store.create_routine(&r).await.unwrap();
    let streak = |fx: &Fixture| {
        let store = fx.store.clone();
        async move {
            store
                .get_routine(r.id)
                .await
                .unwrap()
                .unwrap()
                .runtime
                .consecutive_failures
        }
    };
    for (i, status) in [RunStatus::Failed, RunStatus::Failed]
        .into_iter()
        .enumerate()
    {
        let run = run_for(&r, None, at(i as i64));
        fx.store.start_run(&run).await.unwrap();
        assert!(
            fx.store
                .finish_run(run.id, &outcome(status, 100))
                .await
                .unwrap()
        );
    }
    assert_eq!(streak(fx).await, 2);
    let run = run_for(&r, None, at(10));
    fx.store.start_run(&run).await.unwrap();
    assert!(
        fx.store
            .finish_run(run.id, &outcome(RunStatus::Attention, 11))
            .await
            .unwrap()
    );
    assert!(
        !fx.store
            .finish_run(run.id, &outcome(RunStatus::Failed, 12))
            .await
            .unwrap(),
        "a run ends once"
    );
    assert_eq!(streak(fx).await, 0);
    let got = fx.store.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(got.status, RunStatus::Attention);
    assert_eq!(got.completed_at, Some(at(11)));
    assert_eq!(got.tokens_used, Some(42));
    assert_eq!((got.owner, got.lease_until), (None, None));
    assert_eq!(fx.store.count_running(Some(r.id)).await.unwrap(), 0);
}

pub async fn runs_listed_newest_first(fx: &Fixture) {
    let r = routine("ada", "history");
    fx.store.create_routine(&r).await.unwrap();
    for i in 0..5 {
        fx.store
            .start_run(&run_for(&r, None, at(i * 10)))
            .await
            .unwrap();
    }
    let starts: Vec<_> = fx
        .store
        .list_runs(r.id, 3)
        .await
        .unwrap()
        .into_iter()
        .map(|run| run.started_at)
        .collect();
    assert_eq!(starts, [at(40), at(30), at(20)]);
}

pub async fn orphans_are_reaped_and_stop_counting(fx: &Fixture) {
    let r = routine("ada", "crashy");
    fx.store.create_routine(&r).await.unwrap();
    let mut dead = run_for(&r, None, at(0));
    dead.owner = Some("proc-dead".into());
    dead.lease_until = Some(at(30));
    let mut alive = run_for(&r, None, at(0));
    alive.owner = Some("proc-alive".into());
    alive.lease_until = Some(at(30));
    fx.store.start_run(&dead).await.unwrap();
    fx.store.start_run(&alive).await.unwrap();
    assert_eq!(fx.store.count_running(None).await.unwrap(), 2);

    assert_eq!(
        fx.store.renew_leases("proc-alive", at(90)).await.unwrap(),
        1
    );
    let reaped = fx
        .store
        .reap_orphans(at(60), &rerunner("proc-reaper", at(60)))
        .await
        .unwrap();
    let ids: Vec<_> = reaped.iter().map(|r| r.run.id).collect();
    assert_eq!(ids, vec![dead.id]);
    let got = fx.store.get_run(dead.id).await.unwrap().unwrap();
    assert_eq!(got.status, RunStatus::Interrupted);
    assert_eq!(got.completed_at, Some(at(60)));
    assert!(got.result_summary.unwrap().contains("interrupted"));
    assert_eq!(fx.store.count_running(Some(r.id)).await.unwrap(), 1);
    // The owner coming back late cannot overwrite the verdict.
    assert!(
        !fx.store
            .finish_run(dead.id, &outcome(RunStatus::Ok, 61))
            .await
            .unwrap()
    );
    assert!(
        fx.store
            .reap_orphans(
                at(60) + Duration::seconds(1),
                &rerunner("proc-reaper", at(61))
            )
            .await
            .unwrap()
            .is_empty()
    );
}

/// A lease renewed while a reaper is at work wins: the reaper must check the
/// lease in the same statement that marks the run, not trust what it read
/// earlier. On PostgreSQL the renewal keeps its row lock until the reaper is
/// seen waiting on it, which forces the interleaving that used to lose the
/// renewal; SQLite serialises writers, and the same steps check the outcome.
pub async fn reaping_never_overrides_a_renewed_lease(fx: &Fixture) {
    let r = routine("ada", "renewed");
    fx.store.create_routine(&r).await.unwrap();
    let mut run = run_for(&r, None, at(0));
    run.owner = Some("proc-slow".into());
    run.lease_until = Some(at(30));
    fx.store.start_run(&run).await.unwrap();

    let postgres = fx.url.starts_with("postgres");
    let pool = sqlx::AnyPool::connect(&fx.url).await.unwrap();
    let mut renewal = if postgres {
        pool.begin().await
    } else {
        pool.begin_with("BEGIN IMMEDIATE").await
    }
    .unwrap();
    sqlx::query("UPDATE routine_runs SET lease_until = $1 WHERE id = $2 AND status = 'running'")
        .bind(at(90).timestamp_micros())
        .bind(run.id.to_string())
        .execute(&mut *renewal)
        .await
        .unwrap();
    let renewal_pid = if postgres {
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut *renewal)
            .await
            .unwrap();
        Some(pid)
    } else {
        None
    };

    let reaper = {
        let store = fx.store.clone();
        tokio::spawn(async move {
            store
                .reap_orphans(at(60), &rerunner("proc-reaper", at(60)))
                .await
                .unwrap()
        })
    };
    if let Some(pid) = renewal_pid {
        // Polls (no sleep) until the reaper blocks on the renewal's row lock.
        let mut waiting = false;
        for _ in 0..100_000 {
            let n: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
            )
            .bind(pid)
            .fetch_one(&pool)
            .await
            .unwrap();
            if n > 0 {
                waiting = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(waiting, "the reaper never waited on the renewal's lock");
    }
    renewal.commit().await.unwrap();

    let reaped = reaper.await.unwrap();
    assert!(
        reaped.is_empty(),
        "reaped {reaped:?} although its lease was renewed to a later time before the reap committed"
    );
    let got = fx.store.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(got.status, RunStatus::Running);
    assert_eq!(got.lease_until, Some(at(90)));
    pool.close().await;
}
