//! Schedule operations: each `overlap` policy with a run longer than the
//! interval, jitter across restarts and instances, pause and resume with
//! catch-up, pausing after failures, retries around a timeout, backfill.
//! Each case runs on SQLite and, when `CAIRN_TEST_POSTGRES_URL` is set, on
//! PostgreSQL, both under tokio's paused time.

use cairn_automation::routines::service::{Actor, BackfillRequest, RoutineService, ServiceError};
use cairn_core::routine::Overlap;

use super::*;

fn minute(n: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::minutes(n)
}

/// `got` is `want` or a little later: on PostgreSQL a store call can let
/// tokio's paused clock advance by a millisecond or so while the engine
/// waits on the server's socket (SQLite's calls take no virtual time).
#[track_caller]
fn at_about(got: DateTime<Utc>, want: DateTime<Utc>) {
    let late = got - want;
    assert!(
        late >= chrono::Duration::zero() && late < chrono::Duration::milliseconds(100),
        "{got} is not {want}"
    );
}

/// Sleeps (paused time) until the clock reads `at`.
async fn sleep_until(s: &Setup, at: DateTime<Utc>) {
    let wait = (at - s.clock.now()).to_std().unwrap_or_default();
    tokio::time::sleep(wait).await;
}

fn service(s: &Setup, engine: &RoutineEngine) -> RoutineService {
    RoutineService::new(s.store.clone(), s.clock.clone(), "ada", chrono_tz::UTC)
        .with_wake(Arc::new(engine.clone()))
}

fn person() -> Actor {
    Actor::Person {
        user: "ada".into(),
        via: "test",
    }
}

/// The runs of `r` by slot, each slot's latest attempt.
async fn by_slot(s: &Setup, r: &Routine) -> Vec<(DateTime<Utc>, RunStatus, Option<String>)> {
    s.runs(r)
        .await
        .into_iter()
        .map(|run| {
            let why = run.skip_reason.clone().or(run.result_summary.clone());
            (run.scheduled_for.unwrap(), run.status, why)
        })
        .collect()
}

/// A slow every-minute routine under `policy`: its 12:01 run lasts past
/// the 12:02 and 12:03 slots, then everything is let through.
async fn overlapping(url: &str, policy: Overlap) -> (Setup, Routine) {
    let s = setup_on(url, t0()).await;
    let extra = if policy == Overlap::AllowAll {
        ", max_concurrent: 2"
    } else {
        ""
    };
    let r = s
        .routine(&format!(
            "name: slow-{}\ntrigger: {{type: cron, schedule: '* * * * *'}}\naction: {{type: notification, message: x}}\nguardrails: {{overlap: {}{extra}}}\n",
            policy.as_str(),
            policy.as_str()
        ))
        .await;
    let engine = s.engine("a");
    for n in 1..=3 {
        sleep_until(&s, minute(n)).await;
        engine.tick(s.clock.now()).await.unwrap();
        // Let the runs started reach their action.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sleep_until(&s, minute(3) + chrono::Duration::seconds(30)).await;
    s.script.gate.as_ref().unwrap().add_permits(1);
    engine.idle().await;
    (s, r)
}

async fn overlap_skip_records_the_slots_that_came_due_meanwhile(url: &str) {
    let (s, r) = overlapping(url, Overlap::Skip).await;
    let runs = by_slot(&s, &r).await;
    let statuses: Vec<RunStatus> = runs.iter().map(|r| r.1).collect();
    assert_eq!(
        statuses,
        [RunStatus::Ok, RunStatus::Skipped, RunStatus::Skipped]
    );
    let first = s.runs(&r).await[0].id;
    for (_, _, why) in &runs[1..] {
        assert_eq!(
            why.as_deref(),
            Some(format!("overlap: skip; run {first} of this routine is still running").as_str())
        );
    }
    assert_eq!(s.script.count("slow-skip"), 1);
}

async fn overlap_buffer_one_runs_one_waiting_slot_after_the_run(url: &str) {
    let (s, r) = overlapping(url, Overlap::BufferOne).await;
    let runs = s.runs(&r).await;
    let statuses: Vec<RunStatus> = runs.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [RunStatus::Ok, RunStatus::Ok, RunStatus::Skipped]);
    // The waiting slot started once the run before it had ended.
    assert!(runs[1].started_at >= runs[0].completed_at.unwrap());
    assert_eq!(
        runs[2].skip_reason.as_deref(),
        Some("overlap: buffer_one; slot 2026-03-07T12:02:00Z already waits for the run going")
    );
    assert_eq!(s.script.count("slow-buffer_one"), 2);
}

async fn overlap_buffer_all_runs_every_slot_in_turn(url: &str) {
    let (s, r) = overlapping(url, Overlap::BufferAll).await;
    let runs = s.runs(&r).await;
    let statuses: Vec<RunStatus> = runs.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [RunStatus::Ok; 3]);
    for pair in runs.windows(2) {
        assert!(pair[1].started_at >= pair[0].completed_at.unwrap());
    }
    let slots: Vec<_> = {
        let calls = s.script.calls.lock().unwrap();
        calls.iter().map(|c| c.1.scheduled_for.unwrap()).collect()
    };
    assert_eq!(slots, [minute(1), minute(2), minute(3)], "in slot order");
}

async fn overlap_cancel_other_cancels_the_run_going_and_starts_the_slot(url: &str) {
    let (s, r) = overlapping(url, Overlap::CancelOther).await;
    let runs = s.runs(&r).await;
    let statuses: Vec<RunStatus> = runs.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [RunStatus::Cancelled, RunStatus::Cancelled, RunStatus::Ok]
    );
    let summary = runs[0].result_summary.clone().unwrap();
    assert_eq!(
        summary,
        format!(
            "cancelled: overlap: cancel_other; slot 2026-03-07T12:02:00Z (run {}) replaced it",
            runs[1].id
        )
    );
    // Each replaced run's action saw its cancel (a job it ran is stopped
    // the same way), and no notification went out about it.
    assert_eq!(
        *s.script.cancelled.lock().unwrap(),
        [runs[0].id, runs[1].id]
    );
    assert!(runs[0].notification_id.is_none() && runs[1].notification_id.is_none());
    assert_eq!(s.script.count("slow-cancel_other"), 3);
}

async fn overlap_allow_all_runs_beside_up_to_max_concurrent(url: &str) {
    let (s, r) = overlapping(url, Overlap::AllowAll).await;
    let runs = s.runs(&r).await;
    let statuses: Vec<RunStatus> = runs.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [RunStatus::Ok, RunStatus::Ok, RunStatus::Skipped]);
    assert!(
        runs[1].started_at < runs[0].completed_at.unwrap(),
        "side by side"
    );
    let why = runs[2].skip_reason.clone().unwrap();
    assert_eq!(
        why,
        "overlap: allow_all; max_concurrent: 2 run(s) of this routine already running (limit 2)"
    );
}

/// A jittered routine's slots fire at the same offset from the same
/// routine in every engine: another instance, a restart.
async fn jitter_is_the_same_across_restarts_and_instances(url: &str) {
    let s = setup_on(url, t0()).await;
    let r = s
        .routine("name: spread\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: x}\nguardrails: {jitter: 30s}\n")
        .await;
    let offset = r.jitter();
    assert!(offset > chrono::Duration::zero() && offset < chrono::Duration::seconds(30));
    // Engine a, then engine b on its own connection pool (another process).
    let (other, _) = Store::open(url).await.unwrap();
    // Each engine runs three slots (the offset is under 30 s).
    for (i, owner) in ["a", "b"].iter().enumerate() {
        let engine = if i == 0 {
            s.engine(owner)
        } else {
            RoutineEngine::new(
                other.clone(),
                s.clock.clone(),
                s.script.clone(),
                None,
                settings(owner),
            )
        };
        let (cancel, handle) = s.spawn(&engine);
        let until = i64::try_from(i).unwrap() * 3 + 3;
        sleep_until(&s, minute(until) + chrono::Duration::seconds(30)).await;
        cancel.cancel();
        handle.await.unwrap();
    }
    let runs = s.runs(&r).await;
    assert_eq!(runs.len(), 6, "{runs:#?}");
    for (n, run) in runs.iter().enumerate() {
        let slot = run.scheduled_for.unwrap();
        assert_eq!(
            slot,
            minute(i64::try_from(n).unwrap() + 1),
            "the slot keeps its time"
        );
        at_about(run.started_at, slot + offset);
    }
    // The offset is the routine's own, whoever reads it.
    let read = other.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(read.jitter(), offset);
    let next = service(&s, &s.engine("c"))
        .next_fires("spread", 2)
        .await
        .unwrap();
    assert_eq!(next[0].fires_at - next[0].slot, offset);
    assert_eq!(next[1].slot - next[0].slot, chrono::Duration::minutes(1));
}

/// Paused, a routine fires nothing and says who paused it, when and why;
/// resumed, the slots it missed are caught up by its policy, saying so.
async fn pause_stops_the_fires_and_resume_catches_up(url: &str) {
    let s = setup_on(url, t0()).await;
    let r = s
        .routine("name: ping\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let ops = service(&s, &engine);
    let (cancel, handle) = s.spawn(&engine);
    sleep_until(&s, minute(1) + chrono::Duration::seconds(30)).await;
    let paused = ops
        .pause("ping", Some("  deploying the new server  "), &person())
        .await
        .unwrap();
    assert!(!paused.already);
    let pause = paused.routine.runtime.paused.clone().unwrap();
    assert_eq!(pause.by, "ada (test)");
    assert_eq!(pause.note.as_deref(), Some("deploying the new server"));
    at_about(pause.at, minute(1) + chrono::Duration::seconds(30));
    assert!(ops.pause("ping", None, &person()).await.unwrap().already);
    // A manual fire is refused too.
    let err = engine
        .fire_manual(&paused.routine, None, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("paused by ada (test)"), "{err}");
    sleep_until(&s, minute(10) + chrono::Duration::seconds(30)).await;
    assert_eq!(s.script.count("ping"), 1, "nothing fired while paused");
    let resumed = ops.resume("ping", &person()).await.unwrap();
    assert_eq!(resumed.lifted, Some(pause));
    assert_eq!(
        resumed.catch_up.as_deref(),
        Some("9 slot(s) were missed while paused; catch_up: once runs the latest of them now")
    );
    sleep_until(&s, minute(11) + chrono::Duration::seconds(30)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = by_slot(&s, &r).await;
    let slots: Vec<_> = runs.iter().map(|r| r.0).collect();
    assert_eq!(slots, [minute(1), minute(10), minute(11)]);
    let caught_up = runs[1].2.clone().unwrap();
    assert!(
        caught_up.starts_with(
            "caught up: 9 slot(s) were missed while the routine was paused; ran the latest once (catch_up: once)"
        ),
        "{caught_up}"
    );
    assert!(
        s.store
            .get_routine(r.id)
            .await
            .unwrap()
            .unwrap()
            .runtime
            .paused
            .is_none()
    );
}

/// Three failures of the action itself in a row (an interruption between
/// them does not count, nor reset the streak) pause the routine with the
/// note and one notification saying so.
async fn pause_after_failures_pauses_with_one_notification(url: &str) {
    let s = setup_on(url, t0()).await;
    let r = s
        .routine("name: fail-check\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: x}\nguardrails: {pause_after_failures: 3, on_interrupt: skip}\n")
        .await;
    let engine = s.engine("a");
    for n in [1, 2] {
        sleep_until(&s, minute(n)).await;
        engine.tick(s.clock.now()).await.unwrap();
        engine.idle().await;
    }
    // A process that claimed 12:03 dies with its run.
    let dead = slot_run(
        &r,
        minute(3),
        "dead",
        minute(3) + chrono::Duration::seconds(10),
    );
    claim_as_a_dead_process(&s.store, &dead, minute(4)).await;
    sleep_until(&s, minute(3) + chrono::Duration::seconds(20)).await;
    assert_eq!(engine.tick(s.clock.now()).await.unwrap().reaped, 1);
    let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.consecutive_failures, 2);
    assert!(stored.runtime.paused.is_none());
    sleep_until(&s, minute(4)).await;
    engine.tick(s.clock.now()).await.unwrap();
    engine.idle().await;
    let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    let pause = stored
        .runtime
        .paused
        .expect("paused after the third failure");
    assert_eq!(pause.by, "cairn");
    assert_eq!(
        pause.note.as_deref(),
        Some("paused after 3 failures in a row: the check broke")
    );
    // Nothing more fires.
    for n in 5..=8 {
        sleep_until(&s, minute(n)).await;
        engine.tick(s.clock.now()).await.unwrap();
    }
    engine.idle().await;
    assert_eq!(s.script.count("fail-check"), 3);
    let notes = s
        .store
        .list_notifications(&cairn_store::NotificationFilter::default())
        .await
        .unwrap();
    let paused: Vec<_> = notes
        .iter()
        .filter(|n| n.tags.iter().any(|t| t == "paused"))
        .collect();
    assert_eq!(paused.len(), 1, "{notes:#?}");
    assert_eq!(paused[0].title, "fail-check paused");
    assert!(
        paused[0]
            .body
            .starts_with("paused after 3 failures in a row: the check broke")
    );
    let last = s.runs(&r).await.pop().unwrap();
    assert_eq!(
        last.notification_id,
        Some(paused[0].id),
        "one message for the last run"
    );
}

/// A try that times out is cancelled and recorded before the next one
/// starts; a try that ignores its cancel is never followed by another.
async fn a_timed_out_try_is_cancelled_and_recorded_before_the_retry(url: &str) {
    let s = setup_on(url, t0()).await;
    let r = s
        .routine("name: slow-retry\ntrigger: {type: manual}\naction: {type: notification, message: x}\nguardrails: {timeout: 30s, retry: {max_attempts: 3, backoff: 10s}}\n")
        .await;
    let engine = s.engine("a");
    let fired = engine.fire_manual(&r, None, None).await.unwrap();
    sleep_until(&s, t0() + chrono::Duration::seconds(35)).await;
    // The first try timed out at 30 s and waits out its backoff.
    s.script.gate.as_ref().unwrap().add_permits(1);
    engine.idle().await;
    let tries = s.store.run_tries(fired.run_id).await.unwrap();
    assert_eq!(tries.len(), 2, "{tries:#?}");
    assert_eq!(tries[0].status, RunStatus::Failed);
    assert_eq!(
        tries[0].summary.as_deref(),
        Some("timed out after 30s; cancelled")
    );
    at_about(tries[0].ended_at, t0() + chrono::Duration::seconds(30));
    // The backoff counts from the first try's end.
    at_about(
        tries[1].started_at,
        tries[0].ended_at + chrono::Duration::seconds(10),
    );
    assert_eq!(tries[1].status, RunStatus::Ok);
    // The first try saw its cancel, and was on record when the second began.
    assert_eq!(*s.script.cancelled.lock().unwrap(), [fired.run_id]);
    assert_eq!(*s.script.tries_seen.lock().unwrap(), [0, 1]);
    let run = s.store.get_run(fired.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Ok);
    assert_eq!(
        run.result_summary.as_deref(),
        Some("try 2 of 3: ROUTINE_OK")
    );
    assert_eq!(
        s.store
            .get_routine(r.id)
            .await
            .unwrap()
            .unwrap()
            .runtime
            .consecutive_failures,
        0
    );

    // An action that ignores its cancel may still be acting: no retry.
    s.script.gate.as_ref().unwrap().forget_permits(usize::MAX);
    let stubborn = s
        .routine("name: stubborn-retry\ntrigger: {type: manual}\naction: {type: notification, message: x}\nguardrails: {timeout: 30s, retry: {max_attempts: 3, backoff: 10s}}\n")
        .await;
    let start = s.clock.now();
    let fired = engine.fire_manual(&stubborn, None, None).await.unwrap();
    sleep_until(&s, start + chrono::Duration::seconds(120)).await;
    let run = s.store.get_run(fired.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(
        run.result_summary.as_deref(),
        Some(
            "try 1 of 3: timed out after 30s; cancelled, but it did not stop within 10s; not tried again while it may still run"
        )
    );
    assert_eq!(s.script.count("stubborn-retry"), 1);
    s.script.gate.as_ref().unwrap().add_permits(1);
    engine.idle().await;
}

/// Three past daily slots run in order as `backfill`; a second backfill of
/// the range runs nothing and says why; a large one needs confirming.
async fn backfill_runs_three_daily_slots_once(url: &str) {
    let s = setup_on(url, t0()).await;
    let r = s
        .routine("name: report\ntrigger: {type: cron, schedule: '0 9 * * *'}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let ops = service(&s, &engine).with_max_backfill(2);
    let day = |d: u32| Utc.with_ymd_and_hms(2026, 3, d, 9, 0, 0).unwrap();
    let request = BackfillRequest {
        from: Utc.with_ymd_and_hms(2026, 3, 4, 0, 0, 0).unwrap(),
        to: Utc.with_ymd_and_hms(2026, 3, 6, 23, 59, 0).unwrap(),
        overlap: None,
        confirmed: false,
    };
    let err = ops
        .backfill("report", &request, &person())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ServiceError::TooMany {
                count: 3,
                max: 2,
                ..
            }
        ),
        "{err}"
    );
    let confirmed = BackfillRequest {
        confirmed: true,
        ..request.clone()
    };
    let done = ops.backfill("report", &confirmed, &person()).await.unwrap();
    let queued: Vec<_> = done
        .queued
        .iter()
        .map(|r| r.scheduled_for.unwrap())
        .collect();
    assert_eq!(queued, [day(4), day(5), day(6)]);
    assert!(done.already.is_empty() && done.skipped.is_empty());
    assert_eq!(done.overlap, Overlap::BufferAll);
    assert_eq!(engine.start_waiting(Some(r.id)).await, 1, "one at a time");
    engine.idle().await;
    let runs = s.runs(&r).await;
    assert_eq!(runs.len(), 3);
    for (run, d) in runs.iter().zip([4, 5, 6]) {
        assert_eq!(run.scheduled_for, Some(day(d)));
        assert_eq!(run.trigger_type, "backfill");
        assert_eq!(run.status, RunStatus::Ok);
    }
    {
        let calls = s.script.calls.lock().unwrap();
        let fired: Vec<_> = calls
            .iter()
            .map(|c| (c.1.trigger_type.clone(), c.1.scheduled_for.unwrap()))
            .collect();
        assert_eq!(
            fired,
            [
                ("backfill".to_string(), day(4)),
                ("backfill".to_string(), day(5)),
                ("backfill".to_string(), day(6))
            ]
        );
    }
    let again = ops.backfill("report", &confirmed, &person()).await.unwrap();
    assert!(again.queued.is_empty());
    assert_eq!(
        again.already,
        [
            (day(4), Some(RunStatus::Ok)),
            (day(5), Some(RunStatus::Ok)),
            (day(6), Some(RunStatus::Ok))
        ]
    );
    assert_eq!(engine.start_waiting(Some(r.id)).await, 0);
    engine.idle().await;
    assert_eq!(s.script.count("report"), 3);
    // Not in the future, not backwards, not for other triggers.
    let future = BackfillRequest {
        to: t0() + chrono::Duration::days(1),
        ..confirmed.clone()
    };
    assert!(matches!(
        ops.backfill("report", &future, &person()).await,
        Err(ServiceError::Invalid(_))
    ));
}

/// Slots set waiting by a front end with no engine of its own (another
/// process, say) are started by a running engine at once: the store's
/// `runs` signal wakes it, with no slot of its own due for hours.
async fn a_running_engine_starts_slots_a_front_end_set_waiting(url: &str) {
    let s = setup_on(url, t0()).await;
    let r = s
        .routine("name: report\ntrigger: {type: cron, schedule: '0 9 * * *'}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    sleep_until(&s, t0() + chrono::Duration::seconds(1)).await;
    // No wake: only the store's signal can tell the engine.
    let front = RoutineService::new(s.store.clone(), s.clock.clone(), "ada", chrono_tz::UTC);
    let request = BackfillRequest {
        from: Utc.with_ymd_and_hms(2026, 3, 4, 0, 0, 0).unwrap(),
        to: Utc.with_ymd_and_hms(2026, 3, 6, 23, 59, 0).unwrap(),
        overlap: None,
        confirmed: false,
    };
    let done = front.backfill("report", &request, &person()).await.unwrap();
    assert_eq!(done.queued.len(), 3);
    sleep_until(&s, t0() + chrono::Duration::minutes(1)).await;
    engine.idle().await;
    let runs = s.runs(&r).await;
    assert_eq!(statuses(&runs), [RunStatus::Ok; 3], "{runs:#?}");
    for pair in runs.windows(2) {
        assert!(pair[1].started_at >= pair[0].completed_at.unwrap());
    }
    cancel.cancel();
    handle.await.unwrap();
}

on_both_backends!(
    overlap_skip_records_the_slots_that_came_due_meanwhile,
    overlap_buffer_one_runs_one_waiting_slot_after_the_run,
    overlap_buffer_all_runs_every_slot_in_turn,
    overlap_cancel_other_cancels_the_run_going_and_starts_the_slot,
    overlap_allow_all_runs_beside_up_to_max_concurrent,
    jitter_is_the_same_across_restarts_and_instances,
    pause_stops_the_fires_and_resume_catches_up,
    pause_after_failures_pauses_with_one_notification,
    a_timed_out_try_is_cancelled_and_recorded_before_the_retry,
    backfill_runs_three_daily_slots_once,
    a_running_engine_starts_slots_a_front_end_set_waiting,
);

/// Paused, an event routine lets messages pass by and a webhook routine
/// records the refusal with the pause as its reason (every refusal is a run).
#[tokio::test(start_paused = true)]
async fn paused_event_and_webhook_routines_fire_nothing() {
    let s = setup(t0()).await;
    let event = s
        .routine("name: deploys\ntrigger: {type: event, pattern: 'deploy \\w+'}\naction: {type: notification, message: seen}\n")
        .await;
    let hook = s
        .routine("name: hook\ntrigger: {type: webhook, path: builds}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let ops = service(&s, &engine);
    for name in ["deploys", "hook"] {
        ops.pause(name, Some("quiet week"), &person())
            .await
            .unwrap();
    }
    assert!(
        engine
            .offer_message("terminal", "deploy api")
            .await
            .is_empty()
    );
    let delivery = cairn_automation::routines::webhook::Delivery {
        body: b"{}",
        signature: None,
        timestamp: None,
        bearer_ok: true,
    };
    let fired = engine.fire_webhook("builds", &delivery).await.unwrap();
    let Admitted::Skipped(reason) = &fired.admitted else {
        panic!("a paused webhook routine fired: {fired:?}")
    };
    assert!(
        reason.starts_with("paused by ada (test) at ") && reason.ends_with(": quiet week"),
        "{reason}"
    );
    // A flood of deliveries leaves one record a quiet window, paused too.
    let again = engine.fire_webhook("builds", &delivery).await.unwrap();
    assert_eq!(again.admitted, Admitted::Refused(reason.clone()));
    engine.idle().await;
    assert!(s.runs(&event).await.is_empty());
    assert_eq!(statuses(&s.runs(&hook).await), [RunStatus::Skipped]);
    assert_eq!(s.script.calls.lock().unwrap().len(), 0);
    ops.resume("deploys", &person()).await.unwrap();
    assert_eq!(
        engine.offer_message("terminal", "deploy api").await.len(),
        1
    );
    engine.idle().await;
}
