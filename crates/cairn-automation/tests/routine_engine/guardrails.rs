//! Guardrails that refuse with a recorded reason, timeouts, backoff,
//! leases and shutdown.

use super::*;
use cairn_automation::routines::webhook::Delivery;

#[tokio::test(start_paused = true)]
async fn cooldown_refuses_an_event_fire_with_the_reason() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: deploys\ntrigger: {type: event, pattern: 'deploy \\w+'}\naction: {type: notification, message: seen}\nguardrails: {cooldown: 5m}\n")
        .await;
    let engine = s.engine("a");
    engine.refresh_triggered().await.unwrap();
    assert!(
        engine
            .offer_message("terminal", "nothing here")
            .await
            .is_empty()
    );
    let first = engine.offer_message("terminal", "deploy api").await;
    assert_eq!(first[0].admitted, Admitted::Started);
    engine.idle().await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let second = engine.offer_message("terminal", "deploy web").await;
    let Admitted::Skipped(reason) = &second[0].admitted else {
        panic!("fired within the cooldown")
    };
    assert!(reason.starts_with("cooldown:"), "{reason}");
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(
        engine.offer_message("terminal", "deploy db").await[0].admitted,
        Admitted::Started
    );
    engine.idle().await;
    let runs = s.runs(&r).await;
    assert_eq!(
        statuses(&runs),
        [RunStatus::Ok, RunStatus::Skipped, RunStatus::Ok]
    );
    assert_eq!(runs[1].skip_reason.as_deref(), Some(reason.as_str()));
    // The payload reached the action.
    let calls = s.script.calls.lock().unwrap();
    assert_eq!(calls[0].1.payload.as_ref().unwrap()["text"], "deploy api");
}

#[tokio::test(start_paused = true)]
async fn max_concurrent_refuses_a_second_run_while_one_runs() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: slow-report\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let first = engine.fire_manual(&r, None, None).await.unwrap();
    assert_eq!(first.admitted, Admitted::Started);
    let second = engine.fire_manual(&r, None, None).await.unwrap();
    let Admitted::Skipped(reason) = &second.admitted else {
        panic!("ran twice at once")
    };
    assert!(reason.starts_with("max_concurrent: 1 run(s)"), "{reason}");
    s.script.gate.as_ref().unwrap().add_permits(1);
    engine.idle().await;
    assert_eq!(
        engine.fire_manual(&r, None, None).await.unwrap().admitted,
        Admitted::Started
    );
    s.script.gate.as_ref().unwrap().add_permits(1);
    engine.idle().await;
    assert_eq!(
        statuses(&s.runs(&r).await),
        [RunStatus::Ok, RunStatus::Skipped, RunStatus::Ok]
    );
}

#[tokio::test(start_paused = true)]
async fn a_reloaded_global_limit_applies_to_the_next_fire() {
    let s = setup(t0()).await;
    let a = s
        .routine("name: a\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let b = s
        .routine("name: b\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    assert_eq!(engine.max_concurrent(), 1000);
    let first = engine.fire_manual(&a, None, None).await.unwrap();
    assert_eq!(first.admitted, Admitted::Started);
    // `routines.max_concurrent` reloaded to 1 while a's run holds its place:
    // b's fire waits for it (a limit delays, it never drops).
    engine.set_max_concurrent(1);
    let second = engine.fire_manual(&b, None, None).await.unwrap();
    let Admitted::Waiting(reason) = &second.admitted else {
        panic!("the reloaded limit was not applied: {:?}", second.admitted)
    };
    assert!(reason.contains("routines.max_concurrent = 1"), "{reason}");
    // a's end frees the place; b's run starts then, as fired.
    engine.idle().await;
    engine.idle().await;
    let run = s.store.get_run(second.run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Ok);
    assert_eq!(s.script.count("b"), 1);
}

/// A webhook delivery without a timestamp.
fn delivery<'a>(body: &'a [u8], signature: Option<&'a str>, bearer_ok: bool) -> Delivery<'a> {
    Delivery {
        body,
        signature,
        timestamp: None,
        bearer_ok,
    }
}

#[tokio::test(start_paused = true)]
async fn dedup_refuses_the_same_webhook_body_within_the_window() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: hook\ntrigger: {type: webhook, path: deploys, secret: s3cret}\naction: {type: notification, message: x}\nguardrails: {dedup_window: 10m, cooldown: 0s, max_concurrent: 5}\n")
        .await;
    let engine = s.engine("a");
    let body = br#"{"ref":"main"}"#;
    let sig = cairn_automation::notify::channels::webhook::signature("s3cret", body);
    let first = engine
        .fire_webhook("deploys", &delivery(body, Some(&sig), false))
        .await
        .unwrap();
    assert_eq!(first.admitted, Admitted::Started);
    let dup = engine
        .fire_webhook("deploys", &delivery(body, Some(&sig), false))
        .await
        .unwrap();
    let Admitted::Skipped(reason) = &dup.admitted else {
        panic!("a duplicate fired")
    };
    assert!(reason.starts_with("dedup_window:"), "{reason}");
    let other = br#"{"ref":"dev"}"#;
    let sig2 = cairn_automation::notify::channels::webhook::signature("s3cret", other);
    assert_eq!(
        engine
            .fire_webhook("deploys", &delivery(other, Some(&sig2), false))
            .await
            .unwrap()
            .admitted,
        Admitted::Started
    );
    // Wrong or missing signatures fire nothing.
    assert!(
        engine
            .fire_webhook("deploys", &delivery(other, Some(&sig), false))
            .await
            .is_err()
    );
    assert!(
        engine
            .fire_webhook("deploys", &delivery(other, None, true))
            .await
            .is_err()
    );
    assert!(
        engine
            .fire_webhook("nope", &delivery(other, Some(&sig2), false))
            .await
            .is_err()
    );
    engine.idle().await;
    assert_eq!(statuses(&s.runs(&r).await).len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_run_past_its_timeout_fails_saying_so() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: slow-check\ntrigger: {type: manual}\naction: {type: notification, message: x}\nguardrails: {timeout: 30s}\n")
        .await;
    let engine = s.engine("a");
    engine.fire_manual(&r, None, None).await.unwrap();
    engine.idle().await;
    let runs = s.runs(&r).await;
    assert_eq!(statuses(&runs), [RunStatus::Failed]);
    assert_eq!(
        runs[0].result_summary.as_deref(),
        Some("timed out after 30s; cancelled")
    );
    assert_eq!(
        runs[0].completed_at.unwrap() - runs[0].started_at,
        chrono::Duration::seconds(30)
    );
}

#[tokio::test(start_paused = true)]
async fn consecutive_failures_back_off_before_the_next_scheduled_fire() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: fail-probe\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    tokio::time::sleep(Duration::from_secs(10 * 60 + 30)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = s.runs(&r).await;
    use RunStatus::{Failed as F, Skipped as S};
    // Failures at :01 and :02 (30 s and 1 min waits pass by the next slot),
    // :03 (the 1 min wait ends exactly then), then 5 min: :04-:07 skipped, :08 runs.
    assert_eq!(statuses(&runs), [F, F, F, S, S, S, S, F, S, S]);
    let reason = runs[3].skip_reason.as_deref().unwrap();
    assert!(
        reason.starts_with(
            "backoff: 3 failure(s) in a row; no scheduled fire before 2026-03-07T12:08:00Z"
        ),
        "{reason}"
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_gives_running_runs_a_deadline_then_interrupts_them() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: slow-export\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let engine = s.engine("a");
    let (cancel, handle) = s.spawn(&engine);
    engine.fire_manual(&r, None, None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    cancel.cancel();
    handle.await.unwrap();
    let runs = s.runs(&r).await;
    assert_eq!(statuses(&runs), [RunStatus::Interrupted]);
    assert!(
        runs[0]
            .result_summary
            .as_deref()
            .unwrap()
            .contains("did not finish within 10s")
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_longer_than_its_lease_keeps_it_and_is_not_reaped() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: slow-backup\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let mut short = settings("cli");
    short.lease = Duration::from_secs(60);
    // Fired by a process that runs no engine loop (`routine fire`, a chat).
    let firing = s.engine_with(short.clone());
    firing.fire_manual(&r, None, None).await.unwrap();
    // A daemon beside it reaps orphans every 20 s.
    short.owner = "daemon".into();
    let daemon = s.engine_with(short);
    let (cancel, handle) = s.spawn(&daemon);
    tokio::time::sleep(Duration::from_secs(5 * 60)).await;
    assert_eq!(statuses(&s.runs(&r).await), [RunStatus::Running]);
    s.script.gate.as_ref().unwrap().add_permits(1);
    firing.idle().await;
    cancel.cancel();
    handle.await.unwrap();
    assert_eq!(statuses(&s.runs(&r).await), [RunStatus::Ok]);
}

#[tokio::test(start_paused = true)]
async fn runs_ending_together_each_keep_their_notification() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: remind-all\ntrigger: {type: manual}\naction: {type: notification, message: x}\nguardrails: {max_concurrent: 100, retention: 500}\n")
        .await;
    let engine = s.engine("a");
    let fires: Vec<_> = (0..40)
        .map(|_| engine.fire_manual(&r, None, None))
        .collect();
    for fired in futures::future::join_all(fires).await {
        assert_eq!(fired.unwrap().admitted, Admitted::Started);
    }
    engine.idle().await;
    let runs = s.runs(&r).await;
    assert_eq!(runs.len(), 40);
    for run in &runs {
        assert_eq!(run.status, RunStatus::Ok);
        // Recorded in the run's own end transaction, named by the run.
        let id = run.notification_id.expect("a notification per run");
        let n = s.store.get_notification(id).await.unwrap().unwrap();
        assert_eq!(n.source, format!("routine:{}", run.id));
        assert_eq!(n.title, "Reminder");
    }
    let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
    assert_eq!(stored.runtime.run_count, 40);
    assert_eq!(stored.runtime.consecutive_failures, 0);
}

#[tokio::test(start_paused = true)]
async fn a_refused_catch_up_round_keeps_the_count_of_missed_slots() {
    let s = setup(t0()).await;
    let r = s
        .routine("name: fail-sweep\ntrigger: {type: cron, schedule: '* * * * *'}\naction: {type: notification, message: x}\nguardrails: {catch_up: skip}\n")
        .await;
    let engine = s.engine("a");
    let at = |m: i64, sec: i64| t0() + chrono::Duration::seconds(m * 60 + sec);
    // Three failures (:01, :02, :03) put it in a 5-minute backoff.
    for m in 1..=3 {
        s.clock.set(at(m, 0));
        engine.tick(s.clock.now()).await.unwrap();
        engine.idle().await;
    }
    // At :06:30, :04 and :05 are missed and :06 is on time: the catch-up
    // record and the run are both refused by the backoff.
    s.clock.set(at(6, 30));
    engine.tick(s.clock.now()).await.unwrap();
    let runs = s.runs(&r).await;
    use RunStatus::{Failed as F, Skipped as S};
    assert_eq!(statuses(&runs), [F, F, F, S, S]);
    assert_eq!(runs[3].scheduled_for, Some(at(5, 0)));
    let reason = runs[3].skip_reason.as_deref().unwrap();
    assert!(
        reason.starts_with("2 slot(s) were missed while cairn was not running; none run (catch_up: skip); then refused: backoff: 3 failure(s)"),
        "{reason}"
    );
    assert!(
        runs[4]
            .skip_reason
            .as_deref()
            .unwrap()
            .starts_with("backoff: 3 failure(s)")
    );
}

#[tokio::test(start_paused = true)]
async fn replays_and_refusals_of_webhooks_are_recorded_once_a_minute() {
    use cairn_automation::notify::channels::webhook::signature;
    use cairn_automation::routines::engine::{QUIET_REFUSALS, REPLAY_REASON};
    let s = setup(t0()).await;
    let r = s
        .routine("name: hook\ntrigger: {type: webhook, path: deploys, secret: s3cret}\naction: {type: notification, message: x}\nguardrails: {cooldown: 10m}\n")
        .await;
    let engine = s.engine("a");
    let body = br#"{"ref":"main"}"#;
    let stamped = |ts: i64| {
        let mut signed = format!("{ts}.").into_bytes();
        signed.extend_from_slice(body);
        (ts.to_string(), signature("s3cret", &signed))
    };
    let (ts, sig) = stamped(s.clock.now().timestamp());
    let send = |ts: &str, sig: &str| {
        let engine = engine.clone();
        let (ts, sig) = (ts.to_string(), sig.to_string());
        async move {
            let delivery = Delivery {
                body,
                signature: Some(&sig),
                timestamp: Some(&ts),
                bearer_ok: false,
            };
            engine
                .fire_webhook("deploys", &delivery)
                .await
                .unwrap()
                .admitted
        }
    };
    assert_eq!(send(&ts, &sig).await, Admitted::Started);
    // 300 replays of the captured delivery: refused, one skipped run.
    for i in 0..300 {
        let admitted = send(&ts, &sig).await;
        match (i, admitted) {
            (0, Admitted::Skipped(reason)) | (1.., Admitted::Refused(reason)) => {
                assert_eq!(reason, REPLAY_REASON);
            }
            (i, other) => panic!("replay {i}: {other:?}"),
        }
    }
    // 300 fresh deliveries during the cooldown: one skipped run too.
    for i in 0..300 {
        let (ts, sig) = stamped(s.clock.now().timestamp() - 1 - i);
        match (i, send(&ts, &sig).await) {
            (0, Admitted::Skipped(reason)) | (1.., Admitted::Refused(reason)) => {
                assert!(reason.starts_with("cooldown:"), "{reason}");
            }
            (i, other) => panic!("delivery {i}: {other:?}"),
        }
    }
    engine.idle().await;
    let statuses = statuses(&s.runs(&r).await);
    assert_eq!(statuses.len(), 3, "{statuses:?}");
    // A minute later the next refusal is recorded again.
    tokio::time::sleep(QUIET_REFUSALS).await;
    assert!(matches!(send(&ts, &sig).await, Admitted::Skipped(_)));
    assert_eq!(s.runs(&r).await.len(), 4);
    // Past the 5-minute window the delivery is refused before any record.
    tokio::time::sleep(std::time::Duration::from_secs(300)).await;
    let delivery = Delivery {
        body,
        signature: Some(&sig),
        timestamp: Some(&ts),
        bearer_ok: false,
    };
    assert!(engine.fire_webhook("deploys", &delivery).await.is_err());
    assert_eq!(s.runs(&r).await.len(), 4);
}

/// Many runs ending at once (their prunes put off while more ends wait to
/// be written) still leave each routine at its retention once all are done.
#[tokio::test(start_paused = true)]
async fn a_burst_of_ends_leaves_each_routine_at_its_retention() {
    let s = setup(t0()).await;
    let mut routines = Vec::new();
    for i in 0..3 {
        let yaml = format!(
            "name: slow-keep-{i}\ntrigger: {{type: manual}}\naction: {{type: notification, message: x}}\nguardrails: {{max_concurrent: 100, retention: 5}}\n"
        );
        routines.push(s.routine(&yaml).await);
    }
    let engine = s.engine("a");
    // 300 runs, each held at the gate: they end together when it opens.
    let fires: Vec<_> = routines
        .iter()
        .flat_map(|r| (0..100).map(|_| engine.fire_manual(r, None, None)))
        .collect();
    for fired in futures::future::join_all(fires).await {
        assert_eq!(fired.unwrap().admitted, Admitted::Started);
    }
    s.script.gate.as_ref().unwrap().add_permits(300);
    engine.idle().await;
    for r in &routines {
        let runs = s.runs(r).await;
        assert_eq!(runs.len(), 5, "{}: the newest five are kept", r.spec.name);
        assert!(runs.iter().all(|run| run.status == RunStatus::Ok));
        let stored = s.store.get_routine(r.id).await.unwrap().unwrap();
        assert_eq!(stored.runtime.run_count, 100);
    }
}
