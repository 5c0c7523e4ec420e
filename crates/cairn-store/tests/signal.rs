//! The change signal across processes, on both backends: a write in another
//! process wakes a waiter here without anyone sleeping for it (every wait is
//! bounded by a timeout that fails the test), and a PostgreSQL listener
//! whose connection is killed comes back without losing a change.
//!
//! The other process is this test binary run again with
//! `CAIRN_SIGNAL_CHILD_URL` set: its `child_writes` test then records one
//! pending notification and exits.

#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::time::Duration;

use cairn_core::notification::{DeliveryStatus, Notification, Priority};
use cairn_store::{SignalMode, Store, Topic};
use cairn_test_support::postgres::PgSchema;
use chrono::Utc;
use uuid::Uuid;

/// Longest any wait here may take before the test fails.
const BOUND: Duration = Duration::from_secs(15);

fn notification(title: &str) -> Notification {
    let now = Utc::now();
    Notification {
        id: Uuid::now_v7(),
        user_id: "me".into(),
        channel: "hook".into(),
        title: title.into(),
        body: "body".into(),
        priority: Priority::default(),
        tags: vec![],
        data: None,
        source: "test".into(),
        created_at: now,
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: Some(now),
        delivered_at: None,
        last_error: None,
        in_inbox: false,
        read_at: None,
    }
}

/// The writing half, run as a child process.
#[tokio::test]
async fn child_writes() {
    let Ok(url) = std::env::var("CAIRN_SIGNAL_CHILD_URL") else {
        return;
    };
    let store = Store::connect(&url).await.unwrap();
    let title = std::env::var("CAIRN_SIGNAL_CHILD_TITLE").unwrap();
    store
        .insert_notification(&notification(&title))
        .await
        .unwrap();
    store.close().await;
}

/// Runs `child_writes` in a new process against `url`; waits for it.
async fn write_from_another_process(url: &str, title: &str) {
    let exe = std::env::current_exe().unwrap();
    let status = tokio::process::Command::new(exe)
        .args(["--exact", "child_writes", "--test-threads=1", "--quiet"])
        .env("CAIRN_SIGNAL_CHILD_URL", url)
        .env("CAIRN_SIGNAL_CHILD_TITLE", title)
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success(), "the writing process failed");
}

async fn pending_titles(store: &Store) -> Vec<String> {
    let all = store
        .list_notifications(&cairn_store::NotificationFilter::default())
        .await
        .unwrap();
    all.into_iter().map(|n| n.title).collect()
}

async fn wakes_across_processes(store: &Store, url: &str) {
    let mut notes = store.watch(Topic::Notifications);
    let mut routines = store.watch(Topic::Routines);
    let mode = store.signal_ready(BOUND).await;
    assert!(mode.is_push(), "listening by push, not polling: {mode}");
    // The listener wakes everyone once when it starts (a resync): take it.
    tokio::time::timeout(BOUND, notes.changed()).await.unwrap();
    routines.mark_seen();

    write_from_another_process(url, "from afar").await;
    tokio::time::timeout(BOUND, notes.changed())
        .await
        .expect("the other process's notification woke this waiter");
    assert!(
        pending_titles(store)
            .await
            .contains(&"from afar".to_string())
    );
    // Only its topic moved.
    assert!(
        !routines.has_changed(),
        "a notification is not a routine change"
    );
}

#[tokio::test]
async fn sqlite_a_write_in_another_process_wakes_a_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    wakes_across_processes(&store, &url).await;
    assert!(matches!(
        store.signal_mode(),
        SignalMode::WatchingWal { .. }
    ));
    store.close().await;
}

#[tokio::test]
async fn postgres_a_write_in_another_process_wakes_a_waiter() {
    let Some(pg) = PgSchema::create("postgres_a_write_in_another_process_wakes_a_waiter") else {
        return;
    };
    let url = pg.url.clone();
    let (store, _) = Store::open(&url).await.unwrap();
    wakes_across_processes(&store, &url).await;
    assert_eq!(store.signal_mode(), SignalMode::Listening);
    store.close().await;
}

/// PostgreSQL delivers a notification to every listener of its channel in
/// the database: stores in two schemas of one database must not wake each
/// other, while two stores of one schema still do.
#[tokio::test]
async fn postgres_stores_in_two_schemas_do_not_hear_each_other() {
    let Some(pg) = PgSchema::create("postgres_stores_in_two_schemas_do_not_hear_each_other") else {
        return;
    };
    let elsewhere = pg.sibling();
    let (store, _) = Store::open(&pg.url).await.unwrap();
    let (same_schema, _) = Store::open(&pg.url).await.unwrap();
    let (other_schema, _) = Store::open(&elsewhere.url).await.unwrap();
    let mut routines = store.watch(Topic::Routines);
    let mut notes = store.watch(Topic::Notifications);
    assert!(store.signal_ready(BOUND).await.is_push());
    tokio::time::timeout(BOUND, routines.changed())
        .await
        .unwrap();
    notes.mark_seen();

    // Committed first, so delivered first were it heard here at all.
    other_schema.publish(&[Topic::Routines]).await.unwrap();
    same_schema.publish(&[Topic::Notifications]).await.unwrap();
    tokio::time::timeout(BOUND, notes.changed())
        .await
        .expect("a store of the same schema wakes this one");
    assert!(
        !routines.has_changed(),
        "a store in another schema woke this one"
    );
    for s in [store, same_schema, other_schema] {
        s.close().await;
    }
}

/// Terminates this store's listening connection from the server side.
async fn kill_listener(admin: &sqlx::PgPool, store: &Store) -> u64 {
    let name = format!("cairn-signal {}", store.signal_id());
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(&name)
    .execute(admin)
    .await
    .unwrap()
    .rows_affected()
}

#[tokio::test]
async fn postgres_a_killed_listener_reconnects_and_misses_nothing() {
    let Some(pg) = PgSchema::create("postgres_a_killed_listener_reconnects_and_misses_nothing")
    else {
        return;
    };
    let url = pg.url.clone();
    let admin = sqlx::PgPool::connect(&url).await.unwrap();
    let (store, _) = Store::open(&url).await.unwrap();
    let mut notes = store.watch(Topic::Notifications);
    assert_eq!(store.signal_ready(BOUND).await, SignalMode::Listening);
    tokio::time::timeout(BOUND, notes.changed()).await.unwrap();

    assert_eq!(
        kill_listener(&admin, &store).await,
        1,
        "one listening connection"
    );
    // Written while the listener is down or coming back: its NOTIFY may be
    // lost, the reconnection's resync wakes the waiter all the same.
    write_from_another_process(&url, "during the outage").await;
    tokio::time::timeout(BOUND, notes.changed())
        .await
        .expect("woken after the listener came back");
    assert!(
        pending_titles(&store)
            .await
            .contains(&"during the outage".to_string())
    );
    // Listening again, under the same name: the next change arrives by NOTIFY.
    let back = async {
        while store.signal_mode() != SignalMode::Listening {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(BOUND, back).await.unwrap();
    notes.mark_seen();
    write_from_another_process(&url, "after").await;
    tokio::time::timeout(BOUND, notes.changed())
        .await
        .expect("a change after the reconnection is heard");
    store.close().await;
    admin.close().await;
}

#[tokio::test]
async fn a_write_in_this_process_wakes_its_waiters_directly() {
    let (store, _) = Store::open("sqlite::memory:").await.unwrap();
    let mut notes = store.watch(Topic::Notifications);
    assert_eq!(store.signal_ready(BOUND).await, SignalMode::ThisProcessOnly);
    notes.mark_seen();
    store
        .insert_notification(&notification("here"))
        .await
        .unwrap();
    assert!(notes.has_changed(), "woken at the commit, before any await");
    // A notification already in the inbox is not for dispatchers.
    notes.mark_seen();
    let mut inbox = notification("inbox");
    inbox.status = DeliveryStatus::Delivered;
    inbox.in_inbox = true;
    store.insert_notification(&inbox).await.unwrap();
    assert!(!notes.has_changed());
}
