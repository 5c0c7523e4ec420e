//! Sessions over the real store, as two processes on one database see them.

use std::sync::Arc;
use std::time::Duration;

use cairn_agent::session::{SessionKey, SessionManager, Turn};
use cairn_core::clock::FixedClock;
use cairn_store::Store;
use chrono::{TimeZone, Utc};

/// Two managers (two processes) add a turn to the same thread at the same
/// time: both turns are kept, at different positions, none overwritten.
#[tokio::test]
async fn two_processes_adding_turns_to_one_thread_overwrite_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (first_store, _) = Store::open(&url).await.unwrap();
    let (second_store, _) = Store::open(&url).await.unwrap();
    let clock = Arc::new(FixedClock::new(
        Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap(),
    ));
    let key = SessionKey {
        user_id: "ada".into(),
        channel: "terminal".into(),
    };
    let managers = [first_store.clone(), second_store]
        .map(|s| SessionManager::new(s, clock.clone(), 20, Duration::from_secs(3600)));

    // Both load the thread (empty) before either writes.
    let mut live = Vec::new();
    for m in &managers {
        let session = m.session(&key).await.unwrap();
        let mut guard = session.lock_owned().await;
        let id = m.resolve_thread(&mut guard, None).await.unwrap();
        live.push((guard, id));
    }
    for ((guard, id), (m, text)) in live
        .iter_mut()
        .zip(managers.iter().zip(["from the first", "from the second"]))
    {
        let (row, thread) = guard.split(*id).unwrap();
        thread
            .turns
            .push(Turn::start(1, text.to_string(), clock_now()));
        let index = thread.turns.len() - 1;
        m.save_turn(row, thread, index).await.unwrap();
    }

    let thread_id = live[0].1;
    assert_eq!(thread_id, live[1].1, "one thread");
    let all = first_store
        .load_turns(thread_id, &[cairn_store::TurnRange { first: 1, last: 10 }])
        .await
        .unwrap();
    let inputs: Vec<&str> = all
        .iter()
        .map(|t| t.data["user_input"].as_str().unwrap())
        .collect();
    assert_eq!(inputs, ["from the first", "from the second"]);
    assert_eq!(all.iter().map(|t| t.position).collect::<Vec<_>>(), [1, 2]);
}

fn clock_now() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).unwrap()
}
