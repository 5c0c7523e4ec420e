//! Self-repair of jobs without progress: restarted (here, or by the process
//! holding them), and after the last attempt failed with `needs_attention`
//! and exactly one notification.

use std::sync::Arc;

use cairn_agent::JobsConfig;
use cairn_agent::jobs::JobState;
use cairn_core::clock::FixedClock;

use crate::fixtures::{Harness, TaskProvider, at, config, sqlite, stored};

fn repair_config(max_attempts: u32) -> JobsConfig {
    JobsConfig {
        max_repair_attempts: max_attempts,
        ..config(2)
    }
}

#[tokio::test(start_paused = true)]
async fn a_stuck_job_is_restarted_and_completes() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut h = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        repair_config(3),
        clock.clone(),
    );
    let handle = h.submit("hang").await;
    assert_eq!(h.next_started().await, "hang");
    // Quiet, but not for long enough.
    clock.set(at(9 * 60));
    assert!(h.scheduler.repair_stuck(at(9 * 60)).await.is_empty());

    clock.set(at(11 * 60));
    let report = h.scheduler.repair_stuck(at(11 * 60)).await;
    assert_eq!(report.restarted.len(), 1, "{report:?}");
    assert_eq!(report.restarted[0].job_id, handle.id());
    assert_eq!(report.restarted[0].attempt, 1);
    assert!(report.restarted[0].here);
    assert!(
        report.summary().contains("restarted job"),
        "{}",
        report.summary()
    );
    // The hung call is stopped and the job starts over.
    assert_eq!(h.next_started().await, "hang");
    assert_eq!(h.gate.stopped(), ["hang"]);
    // Just restarted: not stuck again yet.
    assert!(h.scheduler.repair_stuck(at(12 * 60)).await.is_empty());
    h.gate.open("hang");
    let done = handle.wait().await.unwrap();
    assert_eq!(done.state, JobState::Completed);
    assert_eq!(done.result.as_deref(), Some("done hang"));
    let record = stored(&store, done.id).await;
    assert_eq!((record.repair_attempts, record.needs_attention), (1, false));
    h.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn after_the_last_attempt_a_job_needs_attention_with_one_notification() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut h = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        repair_config(2),
        clock.clone(),
    );
    let handle = h.submit("hang").await;
    assert_eq!(h.next_started().await, "hang");
    for attempt in 1..=2 {
        let now = at(i64::from(attempt) * 11 * 60);
        clock.set(now);
        let report = h.scheduler.repair_stuck(now).await;
        assert_eq!(report.restarted.len(), 1, "{report:?}");
        assert_eq!(report.restarted[0].attempt, attempt);
        assert_eq!(h.next_started().await, "hang");
    }
    clock.set(at(33 * 60));
    let report = h.scheduler.repair_stuck(at(33 * 60)).await;
    assert_eq!(report.needs_attention, vec![handle.id()]);
    assert!(report.restarted.is_empty());
    let done = handle.wait().await.unwrap();
    assert_eq!(done.state, JobState::Failed);
    assert!(done.needs_attention);
    assert_eq!(done.repair_attempts, 2);
    assert!(
        done.error
            .as_deref()
            .unwrap()
            .starts_with("needs attention"),
        "{:?}",
        done.error
    );
    // Nothing more to do, and no second notification.
    clock.set(at(50 * 60));
    assert!(h.scheduler.repair_stuck(at(50 * 60)).await.is_empty());
    let inbox = store.inbox("ada", true, 10).await.unwrap();
    assert_eq!(inbox.len(), 1);
    assert!(
        inbox[0].title.starts_with("Job needs attention"),
        "{}",
        inbox[0].title
    );
    assert!(inbox[0].body.contains(&done.id.to_string()));
    // Every channel shows it as needing the person.
    assert!(
        inbox[0].headline().starts_with("🔔 Job needs attention"),
        "{}",
        inbox[0].headline()
    );
    h.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_restart_is_asked_of_the_process_holding_the_job() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut holder = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        repair_config(3),
        clock.clone(),
    );
    holder.scheduler.start().await.unwrap();
    // Another daemon on the same database runs the self-repair routine.
    let other = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        repair_config(3),
        clock.clone(),
    );
    let handle = holder.submit("hang").await;
    assert_eq!(holder.next_started().await, "hang");
    clock.set(at(11 * 60));
    // The holder is alive: its lease renewal (every 30 s) keeps the job held.
    let owner = holder.scheduler.config().lease_owner.clone();
    store.renew_job_leases(&owner, at(12 * 60)).await.unwrap();
    let report = other.scheduler.repair_stuck(at(11 * 60)).await;
    assert_eq!(report.restarted.len(), 1, "{report:?}");
    assert!(!report.restarted[0].here);
    // The holder notices the request on its next poll and starts over.
    assert_eq!(holder.next_started().await, "hang");
    assert_eq!(holder.gate.stopped(), ["hang"]);
    holder.gate.open("hang");
    let done = handle.wait().await.unwrap();
    assert_eq!(done.state, JobState::Completed);
    assert_eq!(stored(&store, done.id).await.repair_attempts, 1);
    holder.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_given_up_elsewhere_is_stopped_by_its_holder() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut holder = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        repair_config(0),
        clock.clone(),
    );
    holder.scheduler.start().await.unwrap();
    let other = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        repair_config(0),
        clock.clone(),
    );
    let handle = holder.submit("hang").await;
    assert_eq!(holder.next_started().await, "hang");
    clock.set(at(11 * 60));
    let owner = holder.scheduler.config().lease_owner.clone();
    store.renew_job_leases(&owner, at(12 * 60)).await.unwrap();
    let report = other.scheduler.repair_stuck(at(11 * 60)).await;
    assert_eq!(report.needs_attention, vec![handle.id()]);
    // The holder stops its worker on its next poll; the verdict stands.
    let done = handle.wait().await.unwrap();
    assert_eq!(done.state, JobState::Failed);
    assert!(done.needs_attention);
    assert_eq!(holder.gate.stopped(), ["hang"]);
    assert!(
        store
            .restart_requested_jobs(&owner)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.inbox("ada", true, 10).await.unwrap().len(), 1);
    holder.scheduler.shutdown().await;
}
