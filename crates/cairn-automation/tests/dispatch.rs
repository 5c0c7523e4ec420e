//! The outbox and the dispatcher over the real store: records before
//! deliveries, retries, giving up into the inbox, leases across processes.
//! Instants are passed in, so no test waits for a retry in real time.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_automation::notify::{
    Channel, ChannelSet, DeliveryError, Dispatcher, Notifier, NotifySettings, Receipt,
};
use cairn_core::notification::{DeliveryStatus, NewNotification, Notification};
use cairn_store::Store;
use cairn_test_support::postgres::PgSchema;
use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

/// A channel answering from a script (then success), counting deliveries by id.
#[derive(Default)]
struct Scripted {
    script: Mutex<VecDeque<Result<(), DeliveryError>>>,
    delivered: Mutex<HashMap<Uuid, usize>>,
    calls: Mutex<usize>,
}

impl Scripted {
    fn with(script: Vec<Result<(), DeliveryError>>) -> Arc<Scripted> {
        Arc::new(Scripted {
            script: Mutex::new(script.into()),
            ..Default::default()
        })
    }
    fn calls(&self) -> usize {
        *self.calls.lock().unwrap()
    }
}

#[async_trait]
impl Channel for Scripted {
    fn kind(&self) -> &'static str {
        "scripted"
    }
    async fn deliver(&self, n: &Notification) -> Result<Receipt, DeliveryError> {
        *self.calls.lock().unwrap() += 1;
        // Let other deliveries interleave, as real HTTP would.
        tokio::task::yield_now().await;
        let next = self.script.lock().unwrap().pop_front().unwrap_or(Ok(()));
        next?;
        *self.delivered.lock().unwrap().entry(n.id).or_default() += 1;
        Ok(Receipt {
            detail: "HTTP 200".into(),
        })
    }
}

fn t(secs: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap() + chrono::Duration::seconds(secs)
}

fn note(channel: Option<&str>) -> NewNotification {
    NewNotification {
        user_id: "ada".into(),
        channel: channel.map(str::to_string),
        title: "Deploy failed".into(),
        body: "build 1234 is red".into(),
        priority: Default::default(),
        tags: vec![],
        data: None,
        source: "test".into(),
    }
}

struct Setup {
    notifier: Notifier,
    channel: Arc<Scripted>,
    url: String,
    _dir: Option<tempfile::TempDir>,
}

async fn setup(channel: Arc<Scripted>, settings: NotifySettings) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    let mut channels = ChannelSet::new();
    channels.insert("hook", channel.clone());
    Setup {
        notifier: Notifier::new(store, Arc::new(channels), settings),
        channel,
        url,
        _dir: Some(dir),
    }
}

/// The notification as the store has it now.
async fn fetch(notifier: &Notifier, id: Uuid) -> Notification {
    notifier
        .store()
        .get_notification(id)
        .await
        .unwrap()
        .unwrap()
}

fn retry_500(text: &str) -> Result<(), DeliveryError> {
    Err(DeliveryError::Retryable(text.into()))
}

#[tokio::test]
async fn a_receiver_failing_twice_gets_three_attempts_and_it_is_delivered() {
    let s = setup(
        Scripted::with(vec![
            retry_500("HTTP 500: oops"),
            retry_500("HTTP 500: again"),
        ]),
        NotifySettings::default(),
    )
    .await;
    let d = Dispatcher::new(s.notifier.clone(), "p1");
    let (tx, mut activity) = tokio::sync::mpsc::unbounded_channel();
    s.notifier.watch_activity(std::sync::Arc::new(move |a| {
        let _ = tx.send(a);
    }));
    let n = s.notifier.send(note(Some("hook")), t(0)).await.unwrap();
    assert_eq!(
        n.status,
        DeliveryStatus::Pending,
        "recorded before delivery"
    );
    assert_eq!(
        activity.try_recv().unwrap(),
        cairn_automation::notify::Activity::Recorded(std::sync::Arc::new(n.clone()))
    );
    assert!(
        s.notifier
            .store()
            .get_notification(n.id)
            .await
            .unwrap()
            .is_some()
    );

    let first = d.deliver_due(t(0)).await.unwrap();
    assert_eq!(first.len(), 1);
    let retry_at = first[0].next_attempt_at.unwrap();
    assert!(
        retry_at >= t(4) && retry_at <= t(6),
        "about 5 s: {retry_at}"
    );
    assert!(d.deliver_due(t(3)).await.unwrap().is_empty(), "not due yet");
    let second = d.deliver_due(t(7)).await.unwrap();
    let retry_at = second[0].next_attempt_at.unwrap();
    assert!(
        retry_at >= t(7 + 8) && retry_at <= t(7 + 12),
        "about 10 s later: {retry_at}"
    );
    let third = d.deliver_due(t(30)).await.unwrap();
    assert_eq!(third[0].status, DeliveryStatus::Delivered);
    assert_eq!(
        activity.try_recv().unwrap(),
        cairn_automation::notify::Activity::Delivered {
            id: n.id,
            channel: "hook".into()
        },
        "failed attempts are not announced, the delivery is"
    );

    let stored = fetch(&s.notifier, n.id).await;
    assert_eq!(stored.status, DeliveryStatus::Delivered);
    assert!(!stored.in_inbox);
    let attempts = s
        .notifier
        .store()
        .notification_attempts(n.id)
        .await
        .unwrap();
    let details: Vec<(&str, bool)> = attempts
        .iter()
        .map(|a| (a.detail.as_str(), a.delivered))
        .collect();
    assert_eq!(
        details,
        [
            ("HTTP 500: oops", false),
            ("HTTP 500: again", false),
            ("HTTP 200", true)
        ]
    );
    assert_eq!(s.channel.calls(), 3);
}

#[tokio::test]
async fn a_channel_that_keeps_failing_ends_in_the_inbox_with_the_reason() {
    let settings = NotifySettings {
        max_attempts: 3,
        ..Default::default()
    };
    let s = setup(
        Scripted::with(vec![
            retry_500("HTTP 503"),
            retry_500("HTTP 503"),
            retry_500("HTTP 503: down"),
        ]),
        settings,
    )
    .await;
    let d = Dispatcher::new(s.notifier.clone(), "p1");
    let n = s.notifier.send(note(Some("hook")), t(0)).await.unwrap();
    for at in [0, 60, 600] {
        d.deliver_due(t(at)).await.unwrap();
    }
    let stored = fetch(&s.notifier, n.id).await;
    assert_eq!(stored.status, DeliveryStatus::Failed);
    assert!(stored.in_inbox);
    assert_eq!(stored.last_error.as_deref(), Some("HTTP 503: down"));
    assert_eq!(stored.attempts, 3);
    let inbox = s.notifier.store().inbox("ada", false, 10).await.unwrap();
    assert_eq!(inbox.len(), 1);
    assert!(d.deliver_due(t(10_000)).await.unwrap().is_empty());
}

#[tokio::test]
async fn old_notifications_and_permanent_errors_are_given_up_at_once() {
    let s = setup(
        Scripted::with(vec![
            Err(DeliveryError::Permanent("HTTP 404: no such hook".into())),
            retry_500("HTTP 502"),
        ]),
        NotifySettings {
            max_age: Duration::from_secs(3600),
            ..Default::default()
        },
    )
    .await;
    let d = Dispatcher::new(s.notifier.clone(), "p1");
    let wrong = s.notifier.send(note(Some("hook")), t(0)).await.unwrap();
    d.deliver_due(t(0)).await.unwrap();
    let stored = fetch(&s.notifier, wrong.id).await;
    assert_eq!(
        (stored.status, stored.attempts),
        (DeliveryStatus::Failed, 1)
    );
    assert!(stored.in_inbox);

    // Sent while the daemon was down for two hours: one try, then the inbox.
    let stale = s.notifier.send(note(Some("hook")), t(0)).await.unwrap();
    d.deliver_due(t(7200)).await.unwrap();
    let stored = fetch(&s.notifier, stale.id).await;
    assert_eq!(
        (stored.status, stored.attempts),
        (DeliveryStatus::Failed, 1)
    );
    assert_eq!(stored.last_error.as_deref(), Some("HTTP 502"));
}

#[tokio::test]
async fn inbox_and_unknown_channels_need_no_delivery() {
    let s = setup(Scripted::with(vec![]), NotifySettings::default()).await;
    let kept = s.notifier.send(note(None), t(0)).await.unwrap();
    assert_eq!(kept.channel, "inbox", "the default channel");
    assert_eq!(kept.status, DeliveryStatus::Delivered);
    let lost = s.notifier.send(note(Some("pager")), t(1)).await.unwrap();
    assert_eq!(lost.status, DeliveryStatus::Failed);
    assert_eq!(
        lost.last_error.as_deref(),
        Some("no channel named \"pager\" (configured: hook, inbox); kept in the inbox")
    );
    let inbox = s.notifier.store().inbox("ada", false, 10).await.unwrap();
    assert_eq!(
        inbox.iter().map(|n| n.id).collect::<Vec<_>>(),
        [lost.id, kept.id]
    );
    let d = Dispatcher::new(s.notifier.clone(), "p1");
    assert!(d.deliver_due(t(5)).await.unwrap().is_empty());
    assert_eq!(s.channel.calls(), 0);
}

#[tokio::test]
async fn a_reload_reaches_every_clone_and_a_dispatcher_already_running() {
    let s = setup(Scripted::with(vec![]), NotifySettings::default()).await;
    let d = Dispatcher::new(s.notifier.clone(), "p1");
    let clone = s.notifier.clone();
    // Before: "pager" is unknown and the default is the inbox.
    let lost = clone.send(note(Some("pager")), t(0)).await.unwrap();
    assert_eq!(lost.status, DeliveryStatus::Failed);
    let pager = Scripted::with(vec![]);
    let mut channels = ChannelSet::new();
    channels.insert("pager", pager.clone());
    s.notifier.reload(
        Arc::new(channels),
        NotifySettings {
            default_channel: "pager".into(),
            ..NotifySettings::default()
        },
    );
    assert_eq!(clone.settings().default_channel, "pager");
    let sent = clone.send(note(None), t(1)).await.unwrap();
    assert_eq!(sent.channel, "pager");
    assert_eq!(sent.status, DeliveryStatus::Pending);
    d.deliver_due(t(2)).await.unwrap();
    assert_eq!(
        fetch(&clone, sent.id).await.status,
        DeliveryStatus::Delivered
    );
    assert_eq!(pager.calls(), 1);
    assert_eq!(s.channel.calls(), 0, "the old channel set is gone");
}

#[tokio::test]
async fn a_delivery_whose_process_died_is_taken_over_after_the_lease() {
    let s = setup(Scripted::with(vec![]), NotifySettings::default()).await;
    let n = s.notifier.send(note(Some("hook")), t(0)).await.unwrap();
    // A process claimed it and died before recording anything.
    let lease = s.notifier.settings().lease;
    let held = s
        .notifier
        .store()
        .claim_notifications("dead", t(0), lease, 10)
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    let d = Dispatcher::new(s.notifier.clone(), "alive");
    assert!(
        d.deliver_due(t(60)).await.unwrap().is_empty(),
        "the lease still holds"
    );
    let late = t(0) + chrono::Duration::from_std(lease).unwrap() + chrono::Duration::seconds(1);
    let reports = d.deliver_due(late).await.unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].status, DeliveryStatus::Delivered);
    assert_eq!(s.channel.delivered.lock().unwrap()[&n.id], 1);
}

/// Two dispatchers (two pools, as two processes would have) over one
/// database deliver each of 200 notifications exactly once.
async fn two_dispatchers_deliver_each_once(url: &str, store: Store) {
    let channel = Scripted::with(vec![]);
    let mut channels = ChannelSet::new();
    channels.insert("hook", channel.clone());
    let channels = Arc::new(channels);
    let first = Notifier::new(store, Arc::clone(&channels), NotifySettings::default());
    let (second_store, _) = Store::open(url).await.unwrap();
    let second = Notifier::new(second_store, channels, NotifySettings::default());
    let mut ids = Vec::new();
    for i in 0..200 {
        let sender = if i % 2 == 0 { &first } else { &second };
        ids.push(sender.send(note(Some("hook")), t(0)).await.unwrap().id);
    }
    let a = Dispatcher::new(first.clone(), "a");
    let b = Dispatcher::new(second.clone(), "b");
    let (ra, rb) = tokio::join!(a.deliver_due(t(1)), b.deliver_due(t(1)));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.len() + rb.len(), 200, "{} + {}", ra.len(), rb.len());
    let delivered = channel.delivered.lock().unwrap().clone();
    assert_eq!(delivered.len(), 200);
    assert!(delivered.values().all(|&count| count == 1));
    for id in ids {
        let n = first.store().get_notification(id).await.unwrap().unwrap();
        assert_eq!((n.status, n.attempts), (DeliveryStatus::Delivered, 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dispatchers_on_one_sqlite_file() {
    let s = setup(Scripted::with(vec![]), NotifySettings::default()).await;
    two_dispatchers_deliver_each_once(&s.url, s.notifier.store().clone()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dispatchers_on_one_postgres_database() {
    let Some(pg) = PgSchema::create("two_dispatchers_on_one_postgres_database") else {
        return;
    };
    let (store, _) = Store::open(&pg.url).await.unwrap();
    two_dispatchers_deliver_each_once(&pg.url, store).await;
}

/// The dispatcher's loop on tokio's paused clock and the real store: woken
/// by a send, asleep until the retry is due, no real waiting.
#[tokio::test(start_paused = true)]
async fn the_dispatcher_sleeps_until_a_retry_is_due_and_wakes_on_a_send() {
    let s = setup(
        Scripted::with(vec![retry_500("HTTP 500: busy")]),
        NotifySettings::default(),
    )
    .await;
    let clock = Arc::new(cairn_core::clock::ManualClock::new(t(0)));
    let cancel = tokio_util::sync::CancellationToken::new();
    let dispatcher = Dispatcher::new(s.notifier.clone(), "loop");
    let running = {
        let (clock, cancel) = (clock.clone(), cancel.clone());
        tokio::spawn(async move { dispatcher.run(clock, cancel).await })
    };
    let n = s.notifier.send(note(Some("hook")), t(0)).await.unwrap();
    let delivered = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let stored = fetch(&s.notifier, n.id).await;
            if stored.status == DeliveryStatus::Delivered {
                return stored;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("delivered within a minute of virtual time");
    let attempts = s
        .notifier
        .store()
        .notification_attempts(n.id)
        .await
        .unwrap();
    assert_eq!(attempts.len(), 2);
    let gap = (attempts[1].at - attempts[0].at).num_milliseconds();
    assert!(
        (4_000..=6_100).contains(&gap),
        "the retry came {gap} ms later"
    );
    assert_eq!(delivered.attempts, 2);
    cancel.cancel();
    running.await.unwrap();
}

#[tokio::test]
async fn a_receiver_asking_to_wait_is_retried_no_sooner_and_a_wait_past_the_age_gives_up() {
    let wait = |secs: u64| -> Result<(), DeliveryError> {
        Err(DeliveryError::RetryAfter(
            "HTTP 429: slow down".into(),
            Duration::from_secs(secs),
        ))
    };
    let s = setup(
        Scripted::with(vec![wait(600), wait(7200)]),
        NotifySettings {
            max_age: Duration::from_secs(3600),
            ..NotifySettings::default()
        },
    )
    .await;
    let d = Dispatcher::new(s.notifier.clone(), "p1");
    let n = s.notifier.send(note(Some("hook")), t(0)).await.unwrap();
    let first = d.deliver_due(t(0)).await.unwrap();
    assert_eq!(first[0].status, DeliveryStatus::Pending);
    assert_eq!(
        first[0].next_attempt_at,
        Some(t(600)),
        "the receiver's wait, longer than the 5 s backoff"
    );
    assert!(
        first[0].attempt.detail.ends_with("(asked to wait 600s)"),
        "{}",
        first[0].attempt.detail
    );
    assert!(d.deliver_due(t(599)).await.unwrap().is_empty());
    // Asked to wait two hours: past the one-hour age, so it goes to the inbox now.
    let second = d.deliver_due(t(600)).await.unwrap();
    assert_eq!(second[0].status, DeliveryStatus::Failed);
    let kept = fetch(&s.notifier, n.id).await;
    assert!(kept.in_inbox);
    assert_eq!(s.channel.calls(), 2);
}

/// Another process records a notification: the running dispatcher hears it
/// through the store's change signal and delivers it, no recheck timer
/// involved (the wait is bounded, in real time, by the test's timeout).
#[tokio::test]
async fn a_notification_recorded_by_another_process_is_delivered_at_once() {
    let s = setup(Scripted::with(vec![]), NotifySettings::default()).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let dispatcher = Dispatcher::new(s.notifier.clone(), "daemon");
    let running = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            dispatcher
                .run(Arc::new(cairn_core::clock::SystemClock), cancel)
                .await
        })
    };
    assert!(
        s.notifier
            .store()
            .signal_ready(Duration::from_secs(10))
            .await
            .is_push()
    );
    // Its own store (own connections, own signal), as another process has.
    let (other, _) = Store::open(&s.url).await.unwrap();
    let elsewhere = Notifier::new(
        other.clone(),
        Arc::new({
            let mut c = ChannelSet::new();
            c.insert("hook", Scripted::with(vec![]));
            c
        }),
        NotifySettings::default(),
    );
    let n = elsewhere
        .send(note(Some("hook")), Utc::now())
        .await
        .unwrap();
    let delivered = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let stored = fetch(&s.notifier, n.id).await;
            if stored.status == DeliveryStatus::Delivered {
                return stored;
            }
            // Only reads the outcome; the delivery itself was woken by the signal.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("delivered by the running dispatcher within 10 s");
    assert_eq!(delivered.attempts, 1);
    assert_eq!(s.channel.delivered.lock().unwrap().get(&n.id), Some(&1));
    cancel.cancel();
    running.await.unwrap();
    other.close().await;
}
