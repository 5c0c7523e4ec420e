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

/// Commits never checkpoint the WAL (their bound is raised to a fallback);
/// the listener has it checkpointed once a commit leaves it past
/// `CHECKPOINT_AT`, so the pages reach the database file.
#[tokio::test]
async fn the_listener_checkpoints_the_wal_off_the_commits() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    let bound = crate::runtime::hop(async {
        let row = sqlx::query("PRAGMA wal_autocheckpoint")
            .fetch_one(store.pool())
            .await?;
        crate::codec::Cols(&row).int("wal_autocheckpoint")
    })
    .await
    .unwrap();
    assert_eq!(bound, 10_000);
    let _watch = store.watch(Topic::Routines);
    assert!(store.signal_ready(Duration::from_secs(10)).await.is_push());
    let db = dir.path().join("cairn.db");
    let size = |path: std::path::PathBuf| async move {
        tokio::fs::metadata(path).await.map_or(0, |m| m.len())
    };
    let before = size(db.clone()).await;
    // 6 MiB in commits of 256 KiB: past `CHECKPOINT_AT`, far from the fallback.
    let blob = "x".repeat(256 * 1024);
    for i in 0..24 {
        store
            .set_setting(&format!("blob.{i}"), &serde_json::json!(blob))
            .await
            .unwrap();
    }
    let grown = tokio::time::timeout(Duration::from_secs(15), async {
        // Half of it at least: the commits alone would leave it all in the WAL.
        while size(db.clone()).await < before + sqlite::CHECKPOINT_AT / 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        grown.is_ok(),
        "the database file stayed at {} bytes (WAL {} bytes)",
        size(db.clone()).await,
        size(dir.path().join("cairn.db-wal")).await
    );
    store.close().await;
}

/// A checkpoint is asked for at `CHECKPOINT_AT`, then only once the WAL grew
/// as much again (a WAL kept long by a reader) or started over and refilled.
#[test]
fn a_long_wal_asks_for_a_checkpoint_once_per_growth() {
    let step = sqlite::CHECKPOINT_AT;
    let mut asked = None;
    let mut asks = |size: u64| sqlite::wants_checkpoint(size, &mut asked);
    assert!(!asks(step - 1));
    assert!(asks(step));
    // Commits that leave it at the same length, or grow it a little: no.
    assert!(!asks(step));
    assert!(!asks(step + 4096));
    assert!(!asks(2 * step - 1));
    assert!(asks(2 * step + 100));
    // Started over (measured from its new frames), then past the bound again: yes.
    assert!(!asks(1024 * 1024));
    assert!(!asks(step - 1));
    assert!(asks(step));
}

/// The WAL's length counts the frames since it last started over: a WAL
/// written again from its start keeps its file's size, but not its length.
#[tokio::test]
async fn the_wal_length_counts_the_frames_since_it_started_over() {
    use sqlx::{Connection, Executor};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let wal = dir.path().join("cairn.db-wal");
    let mut measured = sqlite::WalFile::new(wal.clone());
    assert_eq!(measured.length(), 0, "no WAL yet");
    let url = format!("sqlite://{}?mode=rwc", db.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    for pragma in [
        "PRAGMA journal_mode = WAL",
        "PRAGMA wal_autocheckpoint = 0",
        "PRAGMA journal_size_limit = -1",
        "CREATE TABLE t (b BLOB)",
    ] {
        conn.execute(pragma).await.unwrap();
    }
    let write = |kib: usize| format!("INSERT INTO t VALUES (zeroblob({}))", kib * 1024);
    for _ in 0..8 {
        conn.execute(sqlx::AssertSqlSafe(write(256))).await.unwrap();
    }
    let file =
        |path: std::path::PathBuf| async move { tokio::fs::metadata(path).await.unwrap().len() };
    let full = file(wal.clone()).await;
    assert!(full > 2 * 1024 * 1024, "WAL of {full} bytes");
    assert_eq!(measured.length(), full, "every frame is this round's");
    // Checkpointed whole (no reader), the next commit starts it over.
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        .await
        .unwrap();
    conn.execute(sqlx::AssertSqlSafe(write(16))).await.unwrap();
    assert_eq!(
        file(wal.clone()).await,
        full,
        "written again from its start, not cut"
    );
    let length = measured.length();
    assert!(
        (16 * 1024..128 * 1024).contains(&length),
        "a WAL started over measures its new frames only: {length} bytes"
    );
    // Grown again: measured as it grows.
    conn.execute(sqlx::AssertSqlSafe(write(512))).await.unwrap();
    let longer = measured.length();
    assert!(
        longer > length + 512 * 1024 && longer < full,
        "{longer} bytes"
    );
    // The last connection closed deletes it; the WAL made next is measured.
    conn.close().await.unwrap();
    assert!(!tokio::fs::try_exists(&wal).await.unwrap());
    assert_eq!(measured.length(), 0, "deleted");
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    conn.execute(sqlx::AssertSqlSafe(write(64))).await.unwrap();
    let again = measured.length();
    assert!(
        again > 64 * 1024 && again == file(wal.clone()).await,
        "{again} bytes"
    );
    conn.close().await.unwrap();
}

/// The WAL's watch waits for this process's open write transactions, and
/// only for them, at most its bound.
#[test]
fn the_wal_watch_waits_only_for_this_process_open_writes() {
    let own = Arc::new(OwnWrites::default());
    let bound = Duration::from_secs(10);
    let start = std::time::Instant::now();
    own.wait_closed(bound);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "nothing open: no wait"
    );
    let first = own.open();
    let second = own.open();
    let waiter = {
        let own = Arc::clone(&own);
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            own.wait_closed(bound);
            start.elapsed()
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    drop(first);
    std::thread::sleep(Duration::from_millis(50));
    drop(second);
    let waited = waiter.join().expect("the waiting thread ended");
    assert!(
        waited >= Duration::from_millis(90),
        "waited for both: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "woken when they closed: {waited:?}"
    );
    // Open past the bound: the wait ends at the bound.
    let _held = own.open();
    let start = std::time::Instant::now();
    own.wait_closed(Duration::from_millis(30));
    assert!(start.elapsed() >= Duration::from_millis(30));
}
