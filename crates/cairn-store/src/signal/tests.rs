//! The SQLite fallback: when the WAL cannot be watched, the listener polls
//! `PRAGMA data_version`, says so, and still hears other connections.

use std::time::Duration;

use super::*;

#[tokio::test]
async fn sqlite_polls_when_the_wal_cannot_be_watched() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    // A path that cannot be watched makes the watch fail for real.
    store.set_signal_wal(dir.path().join("missing").join("cairn.db-wal"));
    let mut routines = store.watch(Topic::Routines);
    let mode = store.signal_ready(Duration::from_secs(10)).await;
    match &mode {
        SignalMode::Polling { every, reason } => {
            assert_eq!(*every, FALLBACK_POLL);
            assert!(!reason.is_empty());
            assert!(mode.to_string().contains("polling"), "{mode}");
        }
        other => panic!("expected the fallback poll, got {other}"),
    }
    assert!(!mode.is_push());
    tokio::time::timeout(Duration::from_secs(10), routines.changed())
        .await
        .unwrap();

    // Another store on the same file (its own connections, its own signal):
    // only the database tells this one.
    let (other, _) = Store::open(&url).await.unwrap();
    other.publish(&[Topic::Routines]).await.unwrap();
    tokio::time::timeout(FALLBACK_POLL * 5, routines.changed())
        .await
        .expect("the poll saw the other connection's change");
    other.close().await;
    store.close().await;
}

#[test]
fn topics_round_trip_their_names_and_counters_are_distinct() {
    let mut keys: Vec<&str> = Topic::ALL.iter().map(|t| t.counter_key()).collect();
    for t in Topic::ALL {
        assert_eq!(Topic::parse(t.as_str()), Some(t));
    }
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), Topic::ALL.len());
}
