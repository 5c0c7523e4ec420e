//! Jobs: round trips, listing, compare-and-set transitions, cancellation
//! requests, leases and orphans (invariant 2 for jobs).

use std::sync::Arc;
use std::time::Duration as StdDuration;

use cairn_core::job::{CancelOutcome, JobOutcome, JobRecord, JobState};
use cairn_store::{INTERRUPTED_PENDING, INTERRUPTED_RUNNING, JobFilter, Store, StoreError};
use uuid::Uuid;

use crate::fixture::Fixture;
use crate::routines::at;

pub fn job(owner: &str, title: &str, created: i64) -> JobRecord {
    let mut job = JobRecord::new(
        Uuid::now_v7(),
        title,
        format!("do {title}"),
        owner,
        at(created),
    );
    job.lease_owner = Some("proc-a".into());
    job.lease_until = Some(at(created + 90));
    job
}

fn outcome(state: JobState, secs: i64) -> JobOutcome {
    JobOutcome {
        state,
        result: Some(format!("{state} result")),
        error: (state != JobState::Completed).then(|| format!("{state} error")),
        iterations: 3,
        input_tokens: 120,
        output_tokens: 45,
        cost_micros: 210,
        completed_at: at(secs),
    }
}

async fn state_of(fx: &Fixture, id: Uuid) -> JobState {
    fx.store.get_job(id).await.unwrap().unwrap().state
}

/// What people type for a job: the start of its id (with or without
/// hyphens) or its end (the short form chat prints), an owner's only.
pub async fn jobs_named_by_the_start_or_end_of_their_id(fx: &Fixture) {
    let a = job("ada", "a", 0);
    let b = job("ada", "b", 1);
    let other = job("bob", "c", 2);
    for j in [&a, &b, &other] {
        fx.store.create_job(j).await.unwrap();
    }
    let hex = |j: &JobRecord| j.id.simple().to_string();
    let end = &hex(&a)[24..];
    assert_eq!(fx.store.job_ids_like(end, None).await.unwrap(), [a.id]);
    // With their hyphens; 24 hex digits take in v7's whole time and counter.
    let start = &b.id.to_string()[..28];
    assert_eq!(
        fx.store.job_ids_like(start, Some("ada")).await.unwrap(),
        [b.id]
    );
    // Made a moment apart: their first 6 digits (hours of v7 time) are shared.
    let shared = &hex(&a)[..6];
    assert_eq!(fx.store.job_ids_like(shared, None).await.unwrap().len(), 3);
    assert_eq!(
        fx.store
            .job_ids_like(shared, Some("ada"))
            .await
            .unwrap()
            .len(),
        2
    );
    let bobs = &hex(&other)[24..];
    assert!(
        fx.store
            .job_ids_like(bobs, Some("ada"))
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn job_round_trips(fx: &Fixture) {
    let parent = job("ada", "parent", 0);
    fx.store.create_job(&parent).await.unwrap();
    let mut full = job("ada", "everything set", 1);
    full.origin = Some("thread:42".into());
    full.parent_id = Some(parent.id);
    full.state = JobState::Stuck;
    full.started_at = Some(at(2));
    full.last_activity_at = Some(at(3));
    full.completed_at = Some(at(4));
    full.result = Some("partial ✓".into());
    full.error = Some("none yet".into());
    full.iterations = 7;
    full.input_tokens = u64::from(u32::MAX) + 5;
    full.output_tokens = 9;
    full.cost_micros = 1_234_567;
    full.max_iterations = 12;
    full.timeout = StdDuration::from_millis(90_500);
    full.use_planning = true;
    full.cancel_requested = true;
    fx.store.create_job(&full).await.unwrap();
    assert_eq!(fx.store.get_job(full.id).await.unwrap(), Some(full.clone()));
    assert_eq!(fx.store.get_job(parent.id).await.unwrap(), Some(parent));
    assert_eq!(fx.store.get_job(Uuid::now_v7()).await.unwrap(), None);
    assert!(matches!(
        fx.store.create_job(&full).await,
        Err(StoreError::Conflict(m)) if m.contains(&full.id.to_string())
    ));
}

pub async fn jobs_listed_recent_first_with_filters(fx: &Fixture) {
    let parent = job("ada", "p", 0);
    fx.store.create_job(&parent).await.unwrap();
    let mut ids = vec![parent.id];
    for (i, owner) in ["ada", "bob", "ada", "bob"].into_iter().enumerate() {
        let mut j = job(owner, &format!("j{i}"), 10 + i as i64);
        j.parent_id = (i < 2).then_some(parent.id);
        fx.store.create_job(&j).await.unwrap();
        ids.push(j.id);
    }
    assert!(
        fx.store
            .start_job(ids[2], "proc-a", at(90), at(20))
            .await
            .unwrap()
    );

    let all = fx.store.list_jobs(&JobFilter::default()).await.unwrap();
    let listed: Vec<Uuid> = all.iter().map(|j| j.id).collect();
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(listed, newest_first);

    let filter = |state, owner: Option<&str>, parent_id, limit| JobFilter {
        state,
        owner: owner.map(String::from),
        parent_id,
        limit,
    };
    let ids_of = |jobs: Vec<JobRecord>| jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
    let running = fx
        .store
        .list_jobs(&filter(Some(JobState::InProgress), None, None, 10))
        .await
        .unwrap();
    assert_eq!(ids_of(running), vec![ids[2]]);
    let bobs = fx
        .store
        .list_jobs(&filter(None, Some("bob"), None, 10))
        .await
        .unwrap();
    assert_eq!(ids_of(bobs), vec![ids[4], ids[2]]);
    let children = fx
        .store
        .list_jobs(&filter(None, None, Some(parent.id), 10))
        .await
        .unwrap();
    assert_eq!(ids_of(children), vec![ids[2], ids[1]]);
    let pending_ada = fx
        .store
        .list_jobs(&filter(Some(JobState::Pending), Some("ada"), None, 2))
        .await
        .unwrap();
    assert_eq!(ids_of(pending_ada), vec![ids[3], ids[1]]);
}

pub async fn start_job_only_from_pending(fx: &Fixture) {
    let j = job("ada", "start", 0);
    fx.store.create_job(&j).await.unwrap();
    assert!(
        fx.store
            .start_job(j.id, "proc-b", at(100), at(5))
            .await
            .unwrap()
    );
    let got = fx.store.get_job(j.id).await.unwrap().unwrap();
    assert_eq!(got.state, JobState::InProgress);
    assert_eq!(
        (got.started_at, got.last_activity_at),
        (Some(at(5)), Some(at(5)))
    );
    assert_eq!(got.lease_owner.as_deref(), Some("proc-b"));
    assert_eq!(got.lease_until, Some(at(100)));
    assert!(
        !fx.store
            .start_job(j.id, "proc-c", at(100), at(6))
            .await
            .unwrap()
    );

    // A job cancelled while queued never starts.
    let queued = job("ada", "queued", 1);
    fx.store.create_job(&queued).await.unwrap();
    fx.store.request_job_cancel(queued.id, at(2)).await.unwrap();
    assert!(
        !fx.store
            .start_job(queued.id, "proc-a", at(100), at(3))
            .await
            .unwrap()
    );
    assert_eq!(state_of(fx, queued.id).await, JobState::Cancelled);
}

pub async fn concurrent_starts_from_separate_pools_yield_one_winner(fx: &Fixture) {
    let j = job("ada", "race", 0);
    fx.store.create_job(&j).await.unwrap();
    let mut stores = vec![fx.store.clone()];
    for _ in 0..3 {
        stores.push(Store::connect(&fx.url).await.unwrap());
    }
    let id = Arc::new(j.id);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12 {
        let store = stores[i % stores.len()].clone();
        let id = Arc::clone(&id);
        tasks.spawn(async move {
            store
                .start_job(*id, &format!("proc-{i}"), at(100), at(1))
                .await
                .unwrap()
        });
    }
    let wins = tasks.join_all().await.into_iter().filter(|w| *w).count();
    assert_eq!(wins, 1);
    for store in &stores[1..] {
        store.close().await;
    }
}

pub async fn finish_job_once_and_never_over_a_verdict(fx: &Fixture) {
    let j = job("ada", "finish", 0);
    fx.store.create_job(&j).await.unwrap();
    fx.store
        .start_job(j.id, "proc-a", at(100), at(1))
        .await
        .unwrap();
    let done = outcome(JobState::Completed, 9);
    assert!(fx.store.finish_job(j.id, &done).await.unwrap());
    let got = fx.store.get_job(j.id).await.unwrap().unwrap();
    assert_eq!(got.state, JobState::Completed);
    assert_eq!(got.result.as_deref(), Some("completed result"));
    assert_eq!(got.error, None);
    assert_eq!(
        (
            got.iterations,
            got.input_tokens,
            got.output_tokens,
            got.cost_micros
        ),
        (3, 120, 45, 210)
    );
    assert_eq!(got.completed_at, Some(at(9)));
    assert_eq!((got.lease_owner, got.lease_until), (None, None));
    // A second writer (a late worker, a duplicate) changes nothing.
    assert!(
        !fx.store
            .finish_job(j.id, &outcome(JobState::Failed, 10))
            .await
            .unwrap()
    );
    assert_eq!(state_of(fx, j.id).await, JobState::Completed);
    // Finishing needs a terminal state.
    assert!(matches!(
        fx.store.finish_job(j.id, &outcome(JobState::Stuck, 11)).await,
        Err(StoreError::Conflict(m)) if m.contains("stuck")
    ));

    // A job cancelled while queued keeps that verdict against a late finish.
    let queued = job("ada", "queued", 1);
    fx.store.create_job(&queued).await.unwrap();
    fx.store.request_job_cancel(queued.id, at(2)).await.unwrap();
    assert!(!fx.store.finish_job(queued.id, &done).await.unwrap());
    assert_eq!(state_of(fx, queued.id).await, JobState::Cancelled);
}

pub async fn cancel_requests_by_state(fx: &Fixture) {
    let queued = job("ada", "queued", 0);
    let running = job("ada", "running", 1);
    let elsewhere = job("ada", "elsewhere", 2);
    let ended = job("ada", "ended", 3);
    for j in [&queued, &running, &elsewhere, &ended] {
        fx.store.create_job(j).await.unwrap();
    }
    fx.store
        .start_job(running.id, "proc-a", at(100), at(4))
        .await
        .unwrap();
    fx.store
        .start_job(elsewhere.id, "proc-b", at(100), at(4))
        .await
        .unwrap();
    fx.store
        .start_job(ended.id, "proc-a", at(100), at(4))
        .await
        .unwrap();
    fx.store
        .finish_job(ended.id, &outcome(JobState::Completed, 5))
        .await
        .unwrap();

    let cancel = |id| fx.store.request_job_cancel(id, at(6));
    assert_eq!(cancel(queued.id).await.unwrap(), CancelOutcome::Cancelled);
    let got = fx.store.get_job(queued.id).await.unwrap().unwrap();
    assert_eq!(got.state, JobState::Cancelled);
    assert_eq!(got.completed_at, Some(at(6)));
    assert!(got.error.unwrap().contains("before it started"));

    assert_eq!(cancel(running.id).await.unwrap(), CancelOutcome::Requested);
    assert_eq!(
        cancel(elsewhere.id).await.unwrap(),
        CancelOutcome::Requested
    );
    assert_eq!(state_of(fx, running.id).await, JobState::InProgress);
    assert!(
        fx.store
            .get_job(running.id)
            .await
            .unwrap()
            .unwrap()
            .cancel_requested
    );
    // Each process sees only the requests for the jobs it holds.
    assert_eq!(
        fx.store.cancel_requested_jobs("proc-a").await.unwrap(),
        vec![running.id]
    );
    assert_eq!(
        fx.store.cancel_requested_jobs("proc-b").await.unwrap(),
        vec![elsewhere.id]
    );
    assert!(
        fx.store
            .finish_job(running.id, &outcome(JobState::Cancelled, 7))
            .await
            .unwrap()
    );
    assert!(
        fx.store
            .cancel_requested_jobs("proc-a")
            .await
            .unwrap()
            .is_empty()
    );

    assert_eq!(
        cancel(running.id).await.unwrap(),
        CancelOutcome::AlreadyEnded(JobState::Cancelled)
    );
    assert_eq!(
        cancel(ended.id).await.unwrap(),
        CancelOutcome::AlreadyEnded(JobState::Completed)
    );
    assert!(matches!(
        cancel(Uuid::now_v7()).await,
        Err(StoreError::NotFound { what: "job", .. })
    ));
}

pub async fn stuck_jobs_and_activity(fx: &Fixture) {
    let j = job("ada", "slow", 0);
    fx.store.create_job(&j).await.unwrap();
    // Only running jobs have activity or can be stuck.
    assert!(!fx.store.touch_job(j.id, at(1)).await.unwrap());
    assert!(!fx.store.set_job_stuck(j.id, true, at(1)).await.unwrap());
    fx.store
        .start_job(j.id, "proc-a", at(100), at(1))
        .await
        .unwrap();
    assert!(fx.store.touch_job(j.id, at(2)).await.unwrap());
    assert!(fx.store.set_job_stuck(j.id, true, at(2)).await.unwrap());
    assert!(!fx.store.set_job_stuck(j.id, true, at(2)).await.unwrap());
    let got = fx.store.get_job(j.id).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.last_activity_at),
        (JobState::Stuck, Some(at(2)))
    );
    assert!(fx.store.touch_job(j.id, at(3)).await.unwrap());
    assert!(fx.store.set_job_stuck(j.id, false, at(4)).await.unwrap());
    assert_eq!(state_of(fx, j.id).await, JobState::InProgress);
    assert!(fx.store.set_job_stuck(j.id, true, at(4)).await.unwrap());
    // A stuck job still counts as held: it can be cancelled, renewed and finished.
    assert_eq!(
        fx.store.request_job_cancel(j.id, at(5)).await.unwrap(),
        CancelOutcome::Requested
    );
    assert_eq!(
        fx.store.renew_job_leases("proc-a", at(200)).await.unwrap(),
        1
    );
    assert!(
        fx.store
            .finish_job(j.id, &outcome(JobState::Failed, 6))
            .await
            .unwrap()
    );
    assert!(!fx.store.set_job_stuck(j.id, false, at(7)).await.unwrap());
}

pub async fn orphaned_jobs_are_reaped_as_interrupted(fx: &Fixture) {
    let mut dead_running = job("ada", "dead running", 0);
    dead_running.lease_owner = Some("proc-dead".into());
    dead_running.lease_until = Some(at(30));
    let mut dead_queued = dead_running.clone();
    dead_queued.id = Uuid::now_v7();
    dead_queued.title = "dead queued".into();
    let mut alive = dead_running.clone();
    alive.id = Uuid::now_v7();
    alive.lease_owner = Some("proc-alive".into());
    let done = job("ada", "done", 0);
    for j in [&dead_running, &dead_queued, &alive, &done] {
        fx.store.create_job(j).await.unwrap();
    }
    fx.store
        .start_job(dead_running.id, "proc-dead", at(30), at(1))
        .await
        .unwrap();
    fx.store
        .start_job(alive.id, "proc-alive", at(30), at(1))
        .await
        .unwrap();
    fx.store
        .start_job(done.id, "proc-dead", at(30), at(1))
        .await
        .unwrap();
    fx.store
        .finish_job(done.id, &outcome(JobState::Completed, 2))
        .await
        .unwrap();
    assert_eq!(
        fx.store
            .renew_job_leases("proc-alive", at(90))
            .await
            .unwrap(),
        1
    );

    let mut reaped = fx.store.reap_orphan_jobs(at(60)).await.unwrap();
    reaped.sort();
    let mut expected = vec![dead_running.id, dead_queued.id];
    expected.sort();
    assert_eq!(reaped, expected);
    let running = fx.store.get_job(dead_running.id).await.unwrap().unwrap();
    assert_eq!(running.state, JobState::Failed);
    assert_eq!(running.error.as_deref(), Some(INTERRUPTED_RUNNING));
    assert_eq!(running.completed_at, Some(at(60)));
    assert_eq!((running.lease_owner, running.lease_until), (None, None));
    // A crash is not the job's doing: self-repair counts no restart for it.
    assert_eq!(running.repair_attempts, 0);
    let queued = fx.store.get_job(dead_queued.id).await.unwrap().unwrap();
    assert_eq!(queued.state, JobState::Failed);
    assert_eq!(queued.error.as_deref(), Some(INTERRUPTED_PENDING));
    assert_eq!(state_of(fx, alive.id).await, JobState::InProgress);
    assert_eq!(state_of(fx, done.id).await, JobState::Completed);

    // The dead process coming back late cannot overwrite the verdict.
    assert!(
        !fx.store
            .finish_job(dead_running.id, &outcome(JobState::Completed, 61))
            .await
            .unwrap()
    );
    assert_eq!(
        fx.store
            .renew_job_leases("proc-dead", at(120))
            .await
            .unwrap(),
        0
    );
    assert!(fx.store.reap_orphan_jobs(at(61)).await.unwrap().is_empty());
}
