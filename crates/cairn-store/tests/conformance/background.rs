//! Background tasks: lifecycle, delivery exactly once, reaping after a crash.

use cairn_store::{BackgroundTask, TASK_INTERRUPTED, TaskStatus};
use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

use crate::fixture::Fixture;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap()
}

pub fn task(id: &str, session: &str, started: DateTime<Utc>) -> BackgroundTask {
    BackgroundTask {
        id: id.into(),
        owner: "proc-a".into(),
        lease_until: Some(started + Duration::seconds(60)),
        session_id: session.into(),
        thread_id: Some("thread-1".into()),
        tool: "http_get".into(),
        params: json!({"url": "https://example.com"}),
        status: TaskStatus::Running,
        result: None,
        error: None,
        started_at: started,
        finished_at: None,
        delivered_at: None,
    }
}

pub async fn background_tasks_finish_once_and_deliver_once(fx: &Fixture) {
    let s = &fx.store;
    s.create_background_task(&task("bg-00000001", "s1", t0()))
        .await
        .unwrap();
    s.create_background_task(&task("bg-00000002", "s1", t0() + Duration::seconds(1)))
        .await
        .unwrap();
    s.create_background_task(&task("bg-00000003", "s2", t0()))
        .await
        .unwrap();
    assert_eq!(
        s.get_background_task("bg-00000001").await.unwrap().unwrap(),
        task("bg-00000001", "s1", t0())
    );
    assert!(!s.has_undelivered_tasks("s1").await.unwrap());

    let result = json!({"success": true, "data": "x".repeat(5000)});
    let end = t0() + Duration::seconds(5);
    assert!(
        s.finish_background_task(
            "bg-00000001",
            TaskStatus::Completed,
            Some(&result),
            None,
            end
        )
        .await
        .unwrap()
    );
    // Ending twice changes nothing: the first outcome stands.
    assert!(
        !s.finish_background_task("bg-00000001", TaskStatus::Failed, None, Some("late"), end)
            .await
            .unwrap()
    );
    assert!(
        s.finish_background_task("bg-00000002", TaskStatus::Cancelled, None, None, end)
            .await
            .unwrap()
    );

    let got = s.get_background_task("bg-00000001").await.unwrap().unwrap();
    assert_eq!(got.status, TaskStatus::Completed);
    assert_eq!(got.result, Some(result));
    assert_eq!(got.finished_at, Some(end));
    assert_eq!(got.lease_until, None);

    // Only completed/failed tasks are notified, and only to their session, once.
    assert!(s.has_undelivered_tasks("s1").await.unwrap());
    assert!(!s.has_undelivered_tasks("s2").await.unwrap());
    let taken = s.take_undelivered_tasks("s1", end).await.unwrap();
    assert_eq!(
        taken.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["bg-00000001"]
    );
    assert_eq!(taken[0].delivered_at, Some(end));
    assert!(
        s.take_undelivered_tasks("s1", end)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!s.has_undelivered_tasks("s1").await.unwrap());

    let listed = s.list_background_tasks("s1").await.unwrap();
    assert_eq!(
        listed.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        ["bg-00000001", "bg-00000002"]
    );
    assert!(
        s.get_background_task("bg-ffffffff")
            .await
            .unwrap()
            .is_none()
    );
}

pub async fn background_tasks_of_a_dead_process_are_reaped_as_interrupted(fx: &Fixture) {
    let s = &fx.store;
    s.create_background_task(&task("bg-0000000a", "s1", t0()))
        .await
        .unwrap();
    let mut renewed = task("bg-0000000b", "s1", t0());
    renewed.owner = "proc-b".into();
    s.create_background_task(&renewed).await.unwrap();
    // proc-b is alive and renews; proc-a is gone.
    assert_eq!(
        s.renew_background_leases("proc-b", t0() + Duration::seconds(600))
            .await
            .unwrap(),
        1
    );
    let reaped = s
        .reap_background_tasks(t0() + Duration::seconds(120))
        .await
        .unwrap();
    assert_eq!(reaped, ["bg-0000000a"]);
    let dead = s.get_background_task("bg-0000000a").await.unwrap().unwrap();
    assert_eq!(dead.status, TaskStatus::Failed);
    assert_eq!(dead.error.as_deref(), Some(TASK_INTERRUPTED));
    // The reaped task is reported to its session, not silently gone.
    let taken = s
        .take_undelivered_tasks("s1", t0() + Duration::seconds(121))
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, "bg-0000000a");
    assert_eq!(
        s.get_background_task("bg-0000000b")
            .await
            .unwrap()
            .unwrap()
            .status,
        TaskStatus::Running
    );
}

pub async fn recent_background_tasks_span_sessions_newest_first(fx: &Fixture) {
    let s = &fx.store;
    for (i, session) in ["s1", "s2", "s1"].iter().enumerate() {
        let id = format!("bg-0000000{i}");
        s.create_background_task(&task(&id, session, t0() + Duration::seconds(i as i64)))
            .await
            .unwrap();
    }
    let ids = |tasks: Vec<BackgroundTask>| tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.recent_background_tasks(10).await.unwrap()),
        ["bg-00000002", "bg-00000001", "bg-00000000"]
    );
    assert_eq!(
        ids(s.recent_background_tasks(2).await.unwrap()),
        ["bg-00000002", "bg-00000001"]
    );
}
