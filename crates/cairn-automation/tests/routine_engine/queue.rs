//! The global run limit queues: runs past `routines.max_concurrent` wait
//! and start, oldest slot first, as places free; only a full queue
//! (`routines.max_waiting`) refuses, and the person is told.

use std::sync::atomic::Ordering::SeqCst;

use cairn_store::{NotificationFilter, QUEUE_FULL};

use super::*;

/// `n` one-shot routines named `{prefix}{i}`, all due at `at` (`HH:MM`).
async fn one_shots(s: &Setup, prefix: &str, n: usize, action: &str) -> Vec<Routine> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(
            s.routine(&format!(
                "name: {prefix}{i}\ntrigger: {{type: once, at: 'in 1m'}}\naction: {action}\n"
            ))
            .await,
        );
    }
    out
}

fn with_limits(owner: &str, max_concurrent: u32, max_waiting: u32) -> EngineSettings {
    let mut settings = settings(owner);
    settings.max_concurrent = max_concurrent;
    settings.max_waiting = max_waiting;
    settings
}

/// Twelve reminders at 9:00 under the default limit of ten: ten start at
/// once, two wait, and all twelve reach the person.
async fn twelve_reminders_at_nine_all_deliver(url: &str) {
    let nine = Utc.with_ymd_and_hms(2026, 12, 2, 9, 0, 0).unwrap();
    let s = setup_on(url, nine - chrono::Duration::minutes(1)).await;
    let reminders = one_shots(
        &s,
        "remind-pill-",
        12,
        "{type: notification, message: take your pill}",
    )
    .await;
    let engine = s.engine_with(with_limits("a", 10, 10_000));
    assert_eq!(EngineSettings::new("x", chrono_tz::UTC).max_concurrent, 10);
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(61)).await;
    engine.idle().await;
    cancel.cancel();
    handle.await.unwrap();
    for r in &reminders {
        let runs = s.runs(r).await;
        assert_eq!(
            statuses(&runs),
            [RunStatus::Ok],
            "{}: {runs:?}",
            r.spec.name
        );
        // Lateness is counted from the slot; a one-shot is done once it ran.
        assert_eq!(runs[0].scheduled_for, Some(nine));
        let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
        assert!(!stored.spec.enabled, "{} still enabled", r.spec.name);
    }
    let sent = s
        .store
        .list_notifications(&NotificationFilter::default())
        .await
        .unwrap();
    assert_eq!(sent.len(), 12, "every reminder recorded its notification");
}

/// Two engines on one database with a global limit of 5 and 50 runs due
/// together: never more than 5 run at once across both (the limit is
/// global, counted in the store), all 50 run, none twice.
async fn the_global_limit_holds_across_engines(url: &str) {
    let start = Utc.with_ymd_and_hms(2026, 12, 2, 8, 0, 0).unwrap();
    let s = setup_on(url, start).await;
    let busy = one_shots(&s, "busy", 50, "{type: notification, message: x}").await;
    let (store_b, _) = Store::open(url).await.unwrap();
    let a = s.engine_with(with_limits("a", 5, 10_000));
    let b = RoutineEngine::new(
        store_b,
        s.clock.clone(),
        s.script.clone(),
        None,
        with_limits("b", 5, 10_000),
    );
    let (stop_a, run_a) = s.spawn(&a);
    let (stop_b, run_b) = s.spawn(&b);
    // 50 runs of a second each, five at a time: ten seconds and some.
    tokio::time::sleep(Duration::from_secs(60 + 30)).await;
    a.idle().await;
    b.idle().await;
    stop_a.cancel();
    stop_b.cancel();
    run_a.await.unwrap();
    run_b.await.unwrap();
    let peak = s.script.busy_peak.load(SeqCst);
    assert!(peak <= 5, "{peak} ran at once past a global limit of 5");
    assert_eq!(peak, 5, "the places were not all used");
    for r in &busy {
        assert_eq!(
            s.script.count(&r.spec.name),
            1,
            "{} ran twice or never",
            r.spec.name
        );
        assert_eq!(statuses(&s.runs(r).await), [RunStatus::Ok]);
    }
}

/// `routines.max_waiting = 3`, two places, ten one-shots due together: two
/// run, three wait and run, five are refused with the reason; the person
/// gets one notice naming five, and the refused one-shots stay enabled and
/// are tried again ten seconds later.
async fn a_full_queue_refuses_the_rest_and_says_so_once(url: &str) {
    let start = Utc.with_ymd_and_hms(2026, 12, 2, 8, 0, 0).unwrap();
    let s = setup_on(url, start).await;
    let slow = one_shots(&s, "slow", 10, "{type: notification, message: x}").await;
    let engine = s.engine_with(with_limits("a", 2, 3));
    let slot = start + chrono::Duration::minutes(1);
    s.clock.set(slot);
    let report = engine.tick(slot).await.unwrap();
    assert_eq!((report.started, report.waiting, report.skipped), (2, 3, 5));
    let mut by_status: HashMap<RunStatus, Vec<RoutineRun>> = HashMap::new();
    for r in &slow {
        for run in s.runs(r).await {
            by_status.entry(run.status).or_default().push(run);
        }
    }
    assert_eq!(by_status[&RunStatus::Running].len(), 2);
    let waiting = &by_status[&RunStatus::Waiting];
    assert_eq!(waiting.len(), 3);
    for run in waiting {
        assert_eq!(
            run.skip_reason.as_deref(),
            Some("global limit: 2 running (routines.max_concurrent = 2)")
        );
    }
    let refused = &by_status[&RunStatus::Skipped];
    assert_eq!(refused.len(), 5);
    for run in refused {
        let reason = run.skip_reason.as_deref().unwrap();
        assert!(
            reason.starts_with(&format!("{QUEUE_FULL} (routines.max_waiting = 3)")),
            "{reason}"
        );
        // Not disabled: its slot moved on, to be tried again.
        let r = s.store.get_routine(run.routine_id).await.unwrap().unwrap();
        assert!(r.spec.enabled);
        assert_eq!(
            r.runtime.next_fire_at,
            Some(slot + chrono::Duration::seconds(10))
        );
    }
    // The waiting ones' routines stay enabled until their run starts.
    for run in waiting {
        let r = s.store.get_routine(run.routine_id).await.unwrap().unwrap();
        assert!(r.spec.enabled);
        assert_eq!(r.runtime.next_fire_at, None);
    }
    // Let the notice task run: one notice, naming the five.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let notices = s
        .store
        .list_notifications(&NotificationFilter::default())
        .await
        .unwrap();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].title.starts_with("5 routine run(s) refused"),
        "{}",
        notices[0].title
    );
    assert!(notices[0].tags.iter().any(|t| t == "queue-full"));
    // The places free: the three waiting run, in slot order.
    s.script.gate.as_ref().unwrap().add_permits(100);
    engine.idle().await;
    for run in waiting {
        let after = s.store.get_run(run.id).await.unwrap().unwrap();
        assert_eq!(after.status, RunStatus::Ok, "{after:?}");
        assert!(
            !s.store
                .get_routine(run.routine_id)
                .await
                .unwrap()
                .unwrap()
                .spec
                .enabled
        );
    }
    // Ten seconds on, the refused one-shots are tried again and run.
    let retry = slot + chrono::Duration::seconds(10);
    s.clock.set(retry);
    let report = engine.tick(retry).await.unwrap();
    assert_eq!(report.started + report.waiting, 5, "{report:?}");
    engine.idle().await;
    for run in refused {
        let r = s.store.get_routine(run.routine_id).await.unwrap().unwrap();
        let runs = s.runs(&r).await;
        assert_eq!(
            statuses(&runs),
            [RunStatus::Skipped, RunStatus::Ok],
            "{runs:?}"
        );
        assert!(!r.spec.enabled);
    }
}

/// A queued unscheduled fire keeps what it was fired with: a webhook's
/// body reaches the action when the run finally starts.
async fn a_queued_fire_starts_with_its_payload(url: &str) {
    let s = setup_on(url, t0()).await;
    let holder = s
        .routine("name: slow-holder\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let hook = s
        .routine("name: hook\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine_with(with_limits("a", 1, 10));
    engine.fire_manual(&holder, None, None).await.unwrap();
    let body = serde_json::json!({"order": 42});
    let fired = engine
        .fire_manual(&hook, Some(body.clone()), None)
        .await
        .unwrap();
    assert!(
        matches!(fired.admitted, Admitted::Waiting(_)),
        "{:?}",
        fired.admitted
    );
    s.script.gate.as_ref().unwrap().add_permits(1);
    engine.idle().await;
    engine.idle().await;
    let calls = s.script.calls.lock().unwrap();
    let (_, fire) = calls.iter().find(|(n, _)| n == "hook").expect("hook ran");
    assert_eq!(fire.payload.as_ref(), Some(&body));
    assert_eq!(fire.trigger_type, "manual");
}

on_both_backends!(
    twelve_reminders_at_nine_all_deliver,
    the_global_limit_holds_across_engines,
    a_full_queue_refuses_the_rest_and_says_so_once,
    a_queued_fire_starts_with_its_payload,
);
