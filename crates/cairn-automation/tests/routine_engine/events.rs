//! What runs tell (notifications by outcome) and what fires them besides
//! time: cairn's own events.

use super::*;

#[tokio::test(start_paused = true)]
async fn outcomes_notify_as_the_routine_says_and_the_run_keeps_the_id() {
    let s = setup(t0()).await;
    let alert = s
        .routine("name: alert-disk\ntrigger: {type: manual}\naction: {type: notification, message: x}\nnotify: {channel: inbox}\n")
        .await;
    let quiet = s
        .routine("name: quiet\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let remind = s
        .routine("name: remind-standup\ntrigger: {type: manual}\naction: {type: notification, message: stand up}\n")
        .await;
    let engine = s.engine("a");
    for r in [&alert, &quiet, &remind] {
        engine.fire_manual(r, None, None).await.unwrap();
    }
    engine.idle().await;
    let alert_run = &s.runs(&alert).await[0];
    assert_eq!(alert_run.status, RunStatus::Attention);
    let n = s
        .store
        .get_notification(alert_run.notification_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n.title, "alert-disk needs attention");
    assert_eq!(n.headline(), "🔔 alert-disk needs attention");
    assert_eq!(n.tags, ["routine", "attention"]);
    assert_eq!(n.body, "disk 91% full");
    assert_eq!(n.source, format!("routine:{}", alert_run.id));
    // ROUTINE_OK with on_success false: nothing sent.
    assert_eq!(s.runs(&quiet).await[0].notification_id, None);
    // A reminder goes out whatever on_success says.
    let remind_run = &s.runs(&remind).await[0];
    let n = s
        .store
        .get_notification(remind_run.notification_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (n.title.as_str(), n.body.as_str()),
        ("Reminder", "stand up")
    );
    // The run is `ok`, but a reminder is for the person's attention.
    assert_eq!(remind_run.status, RunStatus::Ok);
    assert_eq!(n.headline(), "🔔 Reminder");
}

#[tokio::test(start_paused = true)]
async fn system_events_fire_routines_and_chains_are_cut() {
    let s = setup(t0()).await;
    let source = s
        .routine("name: fail-backup\ntrigger: {type: manual}\naction: {type: notification, message: x}\n")
        .await;
    let watcher = s
        .routine("name: on-backup-failure\ntrigger: {type: system_event, event: routine.finished, filters: {routine: fail-backup, status: failed}}\naction: {type: notification, message: x}\nguardrails: {cooldown: 0s}\n")
        .await;
    // Fires on every routine's end, its own included: a loop the depth cut stops.
    let echo = s
        .routine("name: echo\ntrigger: {type: system_event, event: routine.finished}\naction: {type: notification, message: x}\nguardrails: {cooldown: 0s, max_concurrent: 10}\n")
        .await;
    let engine = s.engine("a");
    engine.refresh_triggered().await.unwrap();
    engine.fire_manual(&source, None, None).await.unwrap();
    // Let the chain play out.
    for _ in 0..20 {
        engine.idle().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(s.runs(&watcher).await.len(), 1);
    let echoes = s.runs(&echo).await.len();
    assert!(
        echoes >= 1 && echoes <= (MAX_EVENT_DEPTH as usize + 1) * 2,
        "echo ran {echoes} times"
    );
    let payload = s
        .script
        .calls
        .lock()
        .unwrap()
        .iter()
        .find(|(n, _)| n == "on-backup-failure")
        .map(|(_, f)| f.payload.clone().unwrap())
        .unwrap();
    assert_eq!(payload["fields"]["status"], "failed");
}

/// A channel whose receiver always refuses for good.
struct Refusing;

#[async_trait]
impl cairn_automation::notify::Channel for Refusing {
    fn kind(&self) -> &'static str {
        "refusing"
    }
    async fn deliver(
        &self,
        _: &cairn_core::notification::Notification,
    ) -> Result<cairn_automation::notify::Receipt, cairn_automation::notify::DeliveryError> {
        Err(cairn_automation::notify::DeliveryError::Permanent(
            "HTTP 404: no such hook".into(),
        ))
    }
}

#[tokio::test(start_paused = true)]
async fn a_notification_given_up_on_fires_notification_failed_routines() {
    let s = setup(t0()).await;
    let watcher = s
        .routine("name: on-lost-notice\ntrigger: {type: system_event, event: notification.failed, filters: {channel: pager}}\naction: {type: notification, message: x}\nguardrails: {cooldown: 0s}\n")
        .await;
    let mut channels = ChannelSet::new();
    channels.insert("pager", Arc::new(Refusing));
    let notifier = Notifier::new(
        s.store.clone(),
        Arc::new(channels),
        NotifySettings::default(),
    );
    let engine = RoutineEngine::new(
        s.store.clone(),
        s.clock.clone(),
        s.script.clone(),
        Some(notifier.clone()),
        settings("a"),
    );
    engine.refresh_triggered().await.unwrap();
    let cancel = CancellationToken::new();
    let forwarding =
        engine.forward_events(None, Some(notifier.subscribe_given_up()), cancel.clone());
    let sent = notifier
        .send(
            cairn_core::notification::NewNotification {
                user_id: "ada".into(),
                channel: Some("pager".into()),
                title: "t".into(),
                body: "b".into(),
                priority: Default::default(),
                tags: vec![],
                data: None,
                source: "test".into(),
            },
            s.clock.now(),
        )
        .await
        .unwrap();
    let dispatcher = cairn_automation::notify::Dispatcher::new(notifier.clone(), "d");
    dispatcher.deliver_due(s.clock.now()).await.unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        engine.idle().await;
    }
    cancel.cancel();
    forwarding.await.unwrap();
    let runs = s.runs(&watcher).await;
    assert_eq!(statuses(&runs), [RunStatus::Ok]);
    let calls = s.script.calls.lock().unwrap();
    let payload = calls[0].1.payload.clone().unwrap();
    assert_eq!(payload["fields"]["id"], sent.id.to_string());
    assert_eq!(payload["fields"]["error"], "HTTP 404: no such hook");
}

#[tokio::test(start_paused = true)]
async fn watchers_see_each_run_start_and_finish() {
    use cairn_automation::routines::engine::RunEvent;
    let s = setup(t0()).await;
    let remind = s
        .routine("name: remind-tea\ntrigger: {type: manual}\naction: {type: notification, message: tea}\n")
        .await;
    let engine = s.engine("a");
    let (tx, mut runs) = tokio::sync::mpsc::unbounded_channel();
    engine.watch_runs(std::sync::Arc::new(move |e| {
        let _ = tx.send(e);
    }));
    let fired = engine.fire_manual(&remind, None, None).await.unwrap();
    engine.idle().await;
    assert_eq!(
        runs.recv().await.unwrap(),
        RunEvent::Started {
            routine: "remind-tea".into(),
            run_id: fired.run_id,
            trigger: "manual".into(),
        }
    );
    match runs.recv().await.unwrap() {
        RunEvent::Finished {
            routine,
            run_id,
            status,
            ..
        } => assert_eq!(
            (routine.as_str(), run_id, status),
            ("remind-tea", fired.run_id, s.runs(&remind).await[0].status)
        ),
        other => panic!("expected Finished, got {other:?}"),
    }
}
