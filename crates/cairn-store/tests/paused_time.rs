//! The real store under tokio's paused clock: sqlx's own timers (acquire
//! timeout, idle reaper) must not fire on virtual time, and a query in flight
//! must not let the paused clock jump ahead.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::time::Duration;

use cairn_core::job::{JobRecord, JobState};
use cairn_store::{JobFilter, Store};
use chrono::DateTime;
use tokio::time::Instant;
use uuid::Uuid;

const HOUR: Duration = Duration::from_secs(3600);

fn job(n: i64) -> JobRecord {
    let at = DateTime::from_timestamp(1_790_000_000 + n, 0).unwrap();
    JobRecord::new(Uuid::now_v7(), format!("job {n}"), "d", "ada", at)
}

#[tokio::test(start_paused = true)]
async fn a_sqlite_store_works_through_hours_of_virtual_time() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let start = Instant::now();
    let (store, _) = Store::open(&url).await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "opening took no virtual time"
    );

    // An hour between calls: sqlx's idle reaper and lifetimes must not matter.
    tokio::time::sleep(HOUR).await;
    store.create_job(&job(1)).await.unwrap();

    // An hour passes while queries are in flight; more calls than pooled
    // connections, so some wait for a new connection (sqlx's acquire timeout).
    let before = Instant::now();
    let calls = async {
        let mut handles = Vec::new();
        for n in 2..12 {
            let store = store.clone();
            handles.push(tokio::spawn(async move {
                store.create_job(&job(n)).await.unwrap();
                store.list_jobs(&JobFilter::default()).await.unwrap().len()
            }));
        }
        for handle in handles {
            assert!(handle.await.unwrap() >= 2);
        }
    };
    let ((), ()) = tokio::join!(calls, tokio::time::sleep(HOUR));
    assert_eq!(
        before.elapsed(),
        HOUR,
        "virtual time moved only by the sleep"
    );

    // A store call takes no virtual time: a pending timer cannot overtake it.
    let every = JobFilter::default();
    for _ in 0..50 {
        tokio::select! {
            listed = store.list_jobs(&every) => assert_eq!(listed.unwrap().len(), 11),
            () = tokio::time::sleep(Duration::from_millis(1)) => panic!("virtual time jumped during a query"),
        }
    }

    tokio::time::sleep(3 * HOUR).await;
    let all = store.list_jobs(&JobFilter::default()).await.unwrap();
    assert_eq!(all.len(), 11);
    assert!(all.iter().all(|j| j.state == JobState::Pending));
    assert_eq!(start.elapsed(), 5 * HOUR);
}

/// Work spawned on the store's thread holds a paused caller clock until it
/// ends, though nobody waits for it (a group commit's closing batch): the
/// engine's next slot must not come while it is still writing.
#[tokio::test(start_paused = true, flavor = "current_thread")]
async fn work_on_the_store_thread_holds_a_paused_clock_until_it_ends() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    cairn_store::spawn_on_store_thread(async move {
        // Real time: the store's runtime is not paused.
        tokio::time::sleep(Duration::from_millis(200)).await;
        flag.store(true, Ordering::SeqCst);
    });
    let before = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        done.load(Ordering::SeqCst),
        "virtual time jumped 5 s while the store's thread worked"
    );
    assert_eq!(before.elapsed(), Duration::from_secs(5));
}
