//! The notification outbox: records, leases, attempts, the inbox.

use std::sync::Arc;
use std::time::Duration;

use cairn_core::notification::{DeliveryAttempt, DeliveryStatus, Notification, Priority};
use cairn_store::{AttemptOutcome, NotificationFilter, Store};
use serde_json::json;
use uuid::Uuid;

use crate::fixture::Fixture;
use crate::routines::at;

pub fn pending(secs: i64, channel: &str) -> Notification {
    Notification {
        id: Uuid::new_v4(),
        user_id: "ada".into(),
        channel: channel.into(),
        title: format!("t{secs}"),
        body: "the body".into(),
        priority: Priority::High,
        tags: vec!["deploy".into()],
        data: Some(json!({"run": 7})),
        source: "routine:r1".into(),
        created_at: at(secs),
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: Some(at(secs)),
        delivered_at: None,
        last_error: None,
        in_inbox: false,
        read_at: None,
    }
}

pub fn attempt(n: u32, secs: i64, delivered: bool, detail: &str) -> DeliveryAttempt {
    DeliveryAttempt {
        attempt: n,
        at: at(secs),
        delivered,
        detail: detail.into(),
    }
}

const LEASE: Duration = Duration::from_secs(60);

pub async fn notifications_round_trip_and_list(fx: &Fixture) {
    let a = pending(1, "hook");
    let mut b = pending(2, "inbox");
    b.status = DeliveryStatus::Delivered;
    b.in_inbox = true;
    b.data = None;
    for n in [&a, &b] {
        fx.store.insert_notification(n).await.unwrap();
    }
    assert_eq!(
        fx.store.get_notification(a.id).await.unwrap().as_ref(),
        Some(&a)
    );
    assert_eq!(
        fx.store.get_notification(Uuid::new_v4()).await.unwrap(),
        None
    );
    let all = fx
        .store
        .list_notifications(&NotificationFilter::default())
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|n| n.id).collect::<Vec<_>>(),
        [b.id, a.id],
        "newest first"
    );
    let pending_only = fx
        .store
        .list_notifications(&NotificationFilter {
            status: Some(DeliveryStatus::Pending),
            limit: Some(10),
        })
        .await
        .unwrap();
    assert_eq!(pending_only, vec![a.clone()]);
    let prefix = &a.id.to_string()[..8];
    assert_eq!(
        fx.store.notification_ids_like(prefix).await.unwrap(),
        vec![a.id]
    );
    assert_eq!(fx.store.next_notification_due().await.unwrap(), Some(at(1)));
}

pub async fn a_notification_is_claimed_by_one_process(fx: &Fixture) {
    let mut ids = Vec::new();
    for i in 0..200 {
        let n = pending(i % 7, "hook");
        ids.push(n.id);
        fx.store.insert_notification(&n).await.unwrap();
    }
    let mut stores = vec![fx.store.clone()];
    for _ in 0..3 {
        stores.push(Store::connect(&fx.url).await.unwrap());
    }
    let stores = Arc::new(stores);
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..8 {
        let stores = Arc::clone(&stores);
        tasks.spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = stores[worker % 4]
                    .claim_notifications(&format!("w{worker}"), at(100), LEASE, 16)
                    .await
                    .unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|n| n.id));
            }
        });
    }
    let mut claimed: Vec<Uuid> = tasks.join_all().await.into_iter().flatten().collect();
    claimed.sort();
    ids.sort();
    assert_eq!(claimed, ids, "each of 200 claimed exactly once");
    // Not due yet, or leased: nothing more to claim.
    assert!(
        fx.store
            .claim_notifications("late", at(100), LEASE, 16)
            .await
            .unwrap()
            .is_empty()
    );
    for s in &stores[1..] {
        s.close().await;
    }
}

pub async fn attempts_are_recorded_and_a_lapsed_lease_is_reclaimed(fx: &Fixture) {
    let n = pending(0, "hook");
    fx.store.insert_notification(&n).await.unwrap();
    let got = fx
        .store
        .claim_notifications("p1", at(0), LEASE, 10)
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    let retry = AttemptOutcome::Retry { next_at: at(30) };
    assert!(
        fx.store
            .record_attempt(n.id, "p1", &attempt(1, 1, false, "HTTP 500"), &retry)
            .await
            .unwrap()
    );
    assert!(
        fx.store
            .claim_notifications("p1", at(29), LEASE, 10)
            .await
            .unwrap()
            .is_empty(),
        "not due yet"
    );

    // p2 claims it; p2 dies (its lease lapses); p3 takes over.
    assert_eq!(
        fx.store
            .claim_notifications("p2", at(30), LEASE, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        fx.store
            .claim_notifications("p3", at(60), LEASE, 10)
            .await
            .unwrap()
            .is_empty(),
        "p2's lease holds"
    );
    assert_eq!(
        fx.store
            .claim_notifications("p3", at(91), LEASE, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    // p2 comes back late: its attempt is refused, nothing recorded.
    let late = attempt(2, 92, true, "HTTP 200");
    assert!(
        !fx.store
            .record_attempt(n.id, "p2", &late, &AttemptOutcome::Delivered)
            .await
            .unwrap()
    );
    let done = attempt(2, 93, true, "HTTP 204");
    assert!(
        fx.store
            .record_attempt(n.id, "p3", &done, &AttemptOutcome::Delivered)
            .await
            .unwrap()
    );

    let stored = fx.store.get_notification(n.id).await.unwrap().unwrap();
    assert_eq!(stored.status, DeliveryStatus::Delivered);
    assert_eq!(stored.attempts, 2);
    assert_eq!(stored.delivered_at, Some(at(93)));
    assert_eq!(stored.last_error.as_deref(), Some("HTTP 500"));
    assert!(!stored.in_inbox);
    let attempts = fx.store.notification_attempts(n.id).await.unwrap();
    assert_eq!(attempts, vec![attempt(1, 1, false, "HTTP 500"), done]);
    assert_eq!(fx.store.next_notification_due().await.unwrap(), None);
}

pub async fn undeliverable_notifications_end_in_the_inbox(fx: &Fixture) {
    let failing = pending(0, "hook");
    let unknown = pending(1, "nowhere");
    let mut direct = pending(2, "inbox");
    direct.status = DeliveryStatus::Delivered;
    direct.in_inbox = true;
    for n in [&failing, &unknown, &direct] {
        fx.store.insert_notification(n).await.unwrap();
    }
    fx.store
        .claim_notifications("p", at(5), LEASE, 10)
        .await
        .unwrap();
    let last = attempt(5, 5, false, "HTTP 503: down");
    assert!(
        fx.store
            .record_attempt(failing.id, "p", &last, &AttemptOutcome::GiveUp)
            .await
            .unwrap()
    );
    assert!(
        fx.store
            .fail_to_inbox(unknown.id, "no channel named \"nowhere\"")
            .await
            .unwrap()
    );
    assert!(
        !fx.store.fail_to_inbox(unknown.id, "again").await.unwrap(),
        "only pending ones"
    );

    let inbox = fx.store.inbox("ada", false, 10).await.unwrap();
    assert_eq!(
        inbox.iter().map(|n| n.id).collect::<Vec<_>>(),
        [direct.id, unknown.id, failing.id]
    );
    assert_eq!(inbox[1].status, DeliveryStatus::Failed);
    assert_eq!(
        inbox[1].last_error.as_deref(),
        Some("no channel named \"nowhere\"")
    );
    assert_eq!(inbox[2].last_error.as_deref(), Some("HTTP 503: down"));
    assert!(fx.store.inbox("bob", true, 10).await.unwrap().is_empty());

    assert_eq!(
        fx.store
            .mark_read("ada", Some(unknown.id), at(9))
            .await
            .unwrap(),
        1
    );
    let unread = fx.store.inbox("ada", false, 10).await.unwrap();
    assert_eq!(unread.len(), 2);
    let all = fx.store.inbox("ada", true, 10).await.unwrap();
    assert_eq!(
        all.last().unwrap().id,
        unknown.id,
        "read ones after unread ones"
    );
    assert_eq!(all.last().unwrap().read_at, Some(at(9)));
    assert_eq!(fx.store.mark_read("ada", None, at(10)).await.unwrap(), 2);
    assert!(fx.store.inbox("ada", false, 10).await.unwrap().is_empty());
    let counts = fx.store.notification_counts().await.unwrap();
    assert!(counts.contains(&(DeliveryStatus::Failed, 2)), "{counts:?}");
}

pub async fn a_conversation_takes_its_notices_once(fx: &Fixture) {
    let waiting = |secs: i64, session: &str| {
        let mut n = pending(
            secs,
            &cairn_core::notification::conversation_channel(session),
        );
        n.status = DeliveryStatus::Delivered;
        n.in_inbox = true;
        n.next_attempt_at = None;
        n
    };
    let later = waiting(3, "s1");
    let first = waiting(1, "s1");
    let other = waiting(2, "s2");
    for n in [&later, &first, &other] {
        fx.store.insert_notification(n).await.unwrap();
    }
    assert!(fx.store.has_conversation_notices("s1").await.unwrap());
    assert!(!fx.store.has_conversation_notices("s3").await.unwrap());
    // Until the conversation takes them they wait unread in the inbox.
    assert_eq!(fx.store.inbox("ada", false, 10).await.unwrap().len(), 3);

    let taken = fx
        .store
        .take_conversation_notices("s1", at(9))
        .await
        .unwrap();
    assert_eq!(
        taken.iter().map(|n| n.id).collect::<Vec<_>>(),
        [first.id, later.id],
        "oldest first"
    );
    assert!(taken.iter().all(|n| n.read_at == Some(at(9))));
    assert!(
        fx.store
            .take_conversation_notices("s1", at(10))
            .await
            .unwrap()
            .is_empty(),
        "taken once"
    );
    assert!(!fx.store.has_conversation_notices("s1").await.unwrap());
    let unread = fx.store.inbox("ada", false, 10).await.unwrap();
    assert_eq!(unread.iter().map(|n| n.id).collect::<Vec<_>>(), [other.id]);

    // Read in the inbox first: the conversation no longer gets it.
    fx.store
        .mark_read("ada", Some(other.id), at(11))
        .await
        .unwrap();
    assert!(!fx.store.has_conversation_notices("s2").await.unwrap());
}

pub async fn each_channels_deliveries_are_summed(fx: &Fixture) {
    let ok = pending(1, "hook");
    let retrying = pending(2, "hook");
    let given_up = pending(3, "pager");
    let untried = pending(4, "mail");
    for n in [&ok, &retrying, &given_up, &untried] {
        fx.store.insert_notification(n).await.unwrap();
    }
    let attempts = [
        (
            &ok,
            attempt(1, 10, true, "HTTP 200"),
            AttemptOutcome::Delivered,
        ),
        (
            &retrying,
            attempt(1, 20, false, "HTTP 503: busy"),
            AttemptOutcome::Retry { next_at: at(80) },
        ),
        (
            &given_up,
            attempt(1, 30, false, "HTTP 401: bad token"),
            AttemptOutcome::Retry { next_at: at(31) },
        ),
        (
            &given_up,
            attempt(2, 40, false, "HTTP 404: gone"),
            AttemptOutcome::GiveUp,
        ),
    ];
    for (n, a, outcome) in attempts {
        assert!(
            fx.store
                .claim_notification(n.id, "me", a.at, LEASE)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            fx.store
                .record_attempt(n.id, "me", &a, &outcome)
                .await
                .unwrap()
        );
    }
    let got = fx.store.channel_deliveries().await.unwrap();
    let names: Vec<&str> = got.iter().map(|d| d.channel.as_str()).collect();
    assert_eq!(names, ["hook", "mail", "pager"]);
    assert_eq!((got[0].delivered, got[0].pending, got[0].failed), (1, 1, 0));
    assert_eq!(got[0].last_delivered_at, Some(at(10)));
    assert_eq!(got[0].last_failed_at, Some(at(20)));
    assert_eq!(got[0].last_error.as_deref(), Some("HTTP 503: busy"));
    assert_eq!((got[1].pending, got[1].last_failed_at), (1, None));
    assert_eq!(got[1].last_error, None);
    assert_eq!((got[2].failed, got[2].last_delivered_at), (1, None));
    assert_eq!(got[2].last_failed_at, Some(at(40)));
    assert_eq!(got[2].last_error.as_deref(), Some("HTTP 404: gone"));
}
