//! Runs a crash cut short: never the routine's failure, and a slot safe to
//! repeat is re-run once by the engine that reaps it. Each case runs on
//! SQLite and, when `CAIRN_TEST_POSTGRES_URL` is set, on PostgreSQL, both
//! under tokio's paused time.

use super::*;

fn minutes(n: i64) -> chrono::Duration {
    chrono::Duration::minutes(n)
}

/// What a process killed mid-run leaves: slot `slot` of `r` claimed (the
/// routine moved on to the next minute) and its run `running` under
/// `owner`'s lease, which nobody renews after `lease_until`.
async fn claimed_by_the_dead(
    s: &Setup,
    r: &Routine,
    slot: DateTime<Utc>,
    owner: &str,
    lease_until: DateTime<Utc>,
) -> RoutineRun {
    let run = slot_run(r, slot, owner, lease_until);
    claim_as_a_dead_process(&s.store, &run, slot + minutes(1)).await;
    run
}

fn seconds(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

/// Sleeps (paused time) until the clock reads `at`.
async fn sleep_until(s: &Setup, at: DateTime<Utc>) {
    let wait = (at - s.clock.now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait).await;
}

/// Three runs in a row cut short by crashes leave the failure streak at
/// zero, so the next slot fires on time instead of waiting out a backoff.
async fn three_interruptions_in_a_row_leave_the_backoff_untouched(url: &str) {
    let s = setup_on(url, t0()).await;
    let r = s
        .routine("name: crashy\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: x}\nguardrails: {on_interrupt: skip}\n")
        .await;
    let engine = s.engine("survivor");
    for k in 1..=3 {
        let slot = t0() + minutes(k);
        let owner = format!("dead-{k}");
        claimed_by_the_dead(&s, &r, slot, &owner, slot + seconds(10)).await;
        sleep_until(&s, slot + seconds(20)).await;
        let report = engine.tick(s.clock.now()).await.unwrap();
        assert_eq!((report.reaped, report.started), (1, 0), "round {k}");
    }
    let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.consecutive_failures, 0);
    assert_eq!(s.store.last_failure_at(r.id).await.unwrap(), None);
    // The next slot fires on time.
    sleep_until(&s, t0() + minutes(4)).await;
    let report = engine.tick(s.clock.now()).await.unwrap();
    assert_eq!((report.started, report.skipped), (1, 0));
    engine.idle().await;
    let runs = s.runs(&r).await;
    use RunStatus::{Interrupted as I, Ok as O};
    assert_eq!(statuses(&runs), [I, I, I, O]);
    assert_eq!(
        runs[2].result_summary.as_deref(),
        Some("interrupted by a crash of dead-3; not re-run (on_interrupt: skip)")
    );
    assert_eq!(runs[3].scheduled_for, Some(t0() + minutes(4)));
}

/// A reminder cut short by a crash is re-run once, as the slot's attempt 2,
/// by the engine that reaps it; later reaps find nothing more to do.
async fn an_interrupted_notification_slot_is_rerun_once(url: &str) {
    let s = setup_on(url, t0()).await;
    let r = s
        .routine("name: remind-standup\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: stand up}\n")
        .await;
    let engine = s.engine("survivor");
    let slot = t0() + minutes(1);
    let first = claimed_by_the_dead(&s, &r, slot, "dead", slot + seconds(10)).await;
    sleep_until(&s, slot + seconds(20)).await;
    assert_eq!(engine.tick(s.clock.now()).await.unwrap().reaped, 1);
    engine.idle().await;
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(engine.tick(s.clock.now()).await.unwrap().reaped, 0);
    }
    engine.idle().await;
    assert_eq!(s.script.count("remind-standup"), 1, "re-run once");
    {
        let calls = s.script.calls.lock().unwrap();
        assert_eq!(calls[0].1.scheduled_for, Some(slot));
        let detail = calls[0].1.detail.clone().unwrap();
        assert!(
            detail.contains("attempt 2") && detail.contains("crash of dead"),
            "{detail}"
        );
    }
    let runs = s.runs(&r).await;
    assert_eq!(statuses(&runs), [RunStatus::Interrupted, RunStatus::Ok]);
    assert_eq!(runs[0].id, first.id);
    assert_eq!(
        (runs[1].scheduled_for, runs[1].attempt),
        (Some(slot), 2),
        "{runs:?}"
    );
    assert_eq!(
        runs[0].result_summary.as_deref(),
        Some(
            format!(
                "interrupted by a crash of dead; re-run as attempt 2 (run {})",
                runs[1].id
            )
            .as_str()
        )
    );
    assert!(runs[1].notification_id.is_some(), "the reminder was sent");
    assert_eq!(runs[1].owner, None);
}

/// A tool call may have acted before the crash: by default its slot is not
/// re-run; `idempotent: true` says repeating it is safe.
async fn an_interrupted_tool_call_slot_is_rerun_only_when_idempotent(url: &str) {
    let s = setup_on(url, t0()).await;
    let plain = s
        .routine("name: tool-plain\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: tool_call, tool: shell, params: {command: backup}}\n")
        .await;
    let idem = s
        .routine("name: tool-idem\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: tool_call, tool: http_request, params: {url: 'https://example.com'}}\nguardrails: {idempotent: true}\n")
        .await;
    let engine = s.engine("survivor");
    let slot = t0() + minutes(1);
    for r in [&plain, &idem] {
        claimed_by_the_dead(&s, r, slot, "dead", slot + seconds(10)).await;
    }
    sleep_until(&s, slot + seconds(20)).await;
    assert_eq!(engine.tick(s.clock.now()).await.unwrap().reaped, 2);
    engine.idle().await;
    assert_eq!(s.script.count("tool-plain"), 0);
    assert_eq!(s.script.count("tool-idem"), 1);
    let runs = s.runs(&plain).await;
    assert_eq!(statuses(&runs), [RunStatus::Interrupted]);
    assert_eq!(
        runs[0].result_summary.as_deref(),
        Some("interrupted by a crash of dead; not re-run (on_interrupt: skip)")
    );
    let runs = s.runs(&idem).await;
    assert_eq!(statuses(&runs), [RunStatus::Interrupted, RunStatus::Ok]);
    assert_eq!(runs[1].attempt, 2);
}

/// A daemon started on a home whose earlier daemon was killed reaps that
/// daemon's runs at once, before their leases lapse: its re-run starts and
/// a fire held back by `max_concurrent` passes. Other homes' runs and
/// processes without the home's prefix are left alone.
async fn a_restarted_daemon_reaps_its_homes_runs_at_once(url: &str) {
    let s = setup_on(url, t0()).await;
    let sync = s
        .routine("name: slow-sync\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: x}\n")
        .await;
    let export = s
        .routine("name: slow-export\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let report = s
        .routine("name: slow-report\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let slot = t0() + minutes(1);
    let hour_later = slot + minutes(60);
    let killed = claimed_by_the_dead(&s, &sync, slot, "daemon-h1-pid1-aa", hour_later).await;
    let held = |owner: &str, r: &Routine| {
        let mut run = killed.clone();
        run.id = uuid::Uuid::now_v7();
        run.routine_id = r.id;
        run.trigger_type = "manual".into();
        run.scheduled_for = None;
        run.owner = Some(owner.into());
        run
    };
    let manual = held("daemon-h1-pid1-aa", &export);
    let other_home = held("daemon-h2-pid5-bb", &report);
    let cli = held("pid9-cc", &report);
    for run in [&manual, &other_home, &cli] {
        s.store.start_run(run).await.unwrap();
    }
    sleep_until(&s, slot + seconds(5)).await;
    let started = s.clock.now();

    let mut settings = settings("daemon-h1-pid2-dd");
    settings.home_prefix = Some("daemon-h1-".into());
    let engine = s.engine_with(settings);
    let (cancel, handle) = s.spawn(&engine);
    let mut reaped = None;
    for _ in 0..10_000 {
        let run = s.store.get_run(killed.id).await.unwrap().unwrap();
        if run.status != RunStatus::Running {
            reaped = Some(run);
            break;
        }
        tokio::task::yield_now().await;
    }
    let reaped = reaped.expect("the killed daemon's run was never reaped");
    assert_eq!(reaped.status, RunStatus::Interrupted);
    assert!(
        reaped.completed_at.unwrap() < started + seconds(1),
        "reaped at {:?}, not at once (its lease ran to {hour_later})",
        reaped.completed_at
    );
    let summary = reaped.result_summary.clone().unwrap();
    assert!(
        summary.starts_with("interrupted by a crash of daemon-h1-pid1-aa; re-run as attempt 2"),
        "{summary}"
    );
    // The manual run is interrupted too, so it no longer holds max_concurrent.
    let fired = engine.fire_manual(&export, None, None).await.unwrap();
    assert_eq!(fired.admitted, Admitted::Started);
    let runs = s.runs(&sync).await;
    assert_eq!(
        statuses(&runs),
        [RunStatus::Interrupted, RunStatus::Running]
    );
    assert_eq!(runs[1].attempt, 2);
    assert_eq!(runs[1].owner.as_deref(), Some("daemon-h1-pid2-dd"));
    for run in [&other_home, &cli] {
        let got = s.store.get_run(run.id).await.unwrap().unwrap();
        assert_eq!(got.status, RunStatus::Running, "{got:?}");
    }
    s.script.gate.as_ref().unwrap().add_permits(100);
    cancel.cancel();
    handle.await.unwrap();
}

on_both_backends!(
    three_interruptions_in_a_row_leave_the_backoff_untouched,
    an_interrupted_notification_slot_is_rerun_once,
    an_interrupted_tool_call_slot_is_rerun_only_when_idempotent,
    a_restarted_daemon_reaps_its_homes_runs_at_once,
);
