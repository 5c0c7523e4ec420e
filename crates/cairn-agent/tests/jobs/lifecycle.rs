//! Around the run: subtasks, cross-process cancellation, orphans, stuck
//! detection, lease renewal and shutdown.

use std::sync::Arc;
use std::time::Duration;

use cairn_agent::jobs::{CancelOutcome, ChildTurn, JobError, JobRecord, JobState};
use cairn_agent::runner::DenyAll;
use cairn_agent::tools::ToolContext;
use cairn_agent::{AgentLoop, HookRegistry, JobSpec, LoopConfig};
use cairn_core::chat::Role;
use cairn_core::clock::FixedClock;
use cairn_store::{INTERRUPTED_RUNNING, JobFilter};
use uuid::Uuid;

use crate::fixtures::{Harness, TaskProvider, at, config, sqlite, stored};

#[tokio::test(start_paused = true)]
async fn a_cancel_requested_from_another_process_is_noticed() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut h = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        config(2),
        clock,
    );
    h.scheduler.start().await.unwrap();
    let handle = h.submit("slow").await;
    assert_eq!(h.next_started().await, "slow");
    // What `cairn job cancel` does from its own process: set the flag in the store.
    assert_eq!(
        store.request_job_cancel(handle.id(), at(1)).await.unwrap(),
        CancelOutcome::Requested
    );
    let done = handle.wait().await.unwrap();
    assert_eq!(done.state, JobState::Cancelled);
    assert_eq!(h.gate.stopped(), ["slow"]);
    h.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn subtasks_return_in_order_even_when_they_finish_out_of_order() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    // Subtasks run two at a time (the harness's agent.max_parallel_delegations).
    let provider = Arc::new(TaskProvider::default());
    let mut h = Harness::new(store.clone(), provider.clone(), config(2), clock);
    let parent = h.submit("batch:a,b,c").await;
    let mut first = vec![h.next_started().await, h.next_started().await];
    first.sort();
    assert_eq!(first, ["a", "b"]);
    h.gate.open("b");
    assert_eq!(h.next_started().await, "c", "b's slot went to c");
    h.gate.open("c");
    let subtasks = store
        .list_jobs(&JobFilter {
            parent_id: Some(parent.id()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    let c = subtasks.iter().find(|j| j.title == "c").unwrap();
    assert_eq!(
        h.scheduler.wait(c.id).await.unwrap().state,
        JobState::Completed
    );
    h.gate.open("a");
    let done = parent.wait().await.unwrap();
    assert_eq!(done.state, JobState::Completed);
    assert_eq!(done.result.as_deref(), Some("batch done"));

    assert_eq!(h.gate.finished(), ["b", "c", "a"]);
    // The parent's model got the results in the order it gave the tasks.
    let last = provider.requests.lock().unwrap().last().cloned().unwrap();
    let result = &last
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap()
        .content;
    let at = |answer: &str| result.find(answer).unwrap_or_else(|| panic!("{result}"));
    assert!(
        at("done a") < at("done b") && at("done b") < at("done c"),
        "{result}"
    );
    for sub in &subtasks {
        assert_eq!(sub.parent_id, Some(done.id));
        assert!(result.contains(&sub.id.to_string()), "{result}");
        assert_eq!(stored(&store, sub.id).await.state, JobState::Completed);
    }
    // A child of a job that is not stored is refused, and nothing recorded.
    let turn = ChildTurn {
        agent: AgentLoop::new(
            h.provider.clone(),
            h.runner.clone(),
            Arc::new(HookRegistry::new()),
            LoopConfig::default(),
        ),
        approver: Arc::new(DenyAll),
        messages: Vec::new(),
        ctx: ToolContext::new(".", "s"),
    };
    let before = store.list_jobs(&JobFilter::default()).await.unwrap().len();
    assert!(matches!(
        h.scheduler
            .run_child(JobSpec::new("x", "x", "ada"), Some(Uuid::now_v7()), turn)
            .await,
        Err(JobError::NotFound(_))
    ));
    let after = store.list_jobs(&JobFilter::default()).await.unwrap().len();
    assert_eq!(before, after);
}

#[tokio::test(start_paused = true)]
async fn a_subtask_cannot_start_subtasks_of_its_own() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let provider = Arc::new(TaskProvider::default());
    let h = Harness::new(store.clone(), provider.clone(), config(2), clock);
    // The parent's one subtask asks for subtasks in turn.
    let parent = h.submit("batch:batch:x").await;
    let done = parent.wait().await.unwrap();
    assert_eq!(done.state, JobState::Completed);
    let requests = provider.requests.lock().unwrap().clone();
    let refused = requests
        .iter()
        .flat_map(|r| &r.messages)
        .any(|m| m.role == Role::Tool && m.content.contains("a subtask cannot start subtasks"));
    assert!(refused, "{requests:?}");
    let jobs = store.list_jobs(&JobFilter::default()).await.unwrap();
    assert_eq!(jobs.len(), 2, "only the parent and its one subtask");
}

#[tokio::test(start_paused = true)]
async fn a_dead_process_s_running_job_is_reaped_on_start() {
    let (store, _dir) = sqlite().await;
    let mut dead = JobRecord::new(Uuid::now_v7(), "crashed", "crashed", "ada", at(0));
    dead.lease_owner = Some("dead-process".into());
    dead.lease_until = Some(at(90));
    let mut alive = dead.clone();
    alive.id = Uuid::now_v7();
    alive.lease_owner = Some("live-process".into());
    alive.lease_until = Some(at(1000));
    for job in [&dead, &alive] {
        store.create_job(job).await.unwrap();
        let owner = job.lease_owner.as_deref().unwrap();
        store
            .start_job(job.id, owner, job.lease_until.unwrap(), at(1))
            .await
            .unwrap();
    }
    let clock = Arc::new(FixedClock::new(at(600)));
    let h = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        config(1),
        clock,
    );
    assert_eq!(h.scheduler.start().await.unwrap(), [dead.id]);
    let reaped = stored(&store, dead.id).await;
    assert_eq!(reaped.state, JobState::Failed);
    assert_eq!(reaped.error.as_deref(), Some(INTERRUPTED_RUNNING));
    assert_eq!(stored(&store, alive.id).await.state, JobState::InProgress);
    h.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_quiet_job_is_stuck_until_it_moves_again() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut h = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        config(1),
        clock.clone(),
    );
    let handle = h.submit("quiet*2").await;
    assert_eq!(h.next_started().await, "quiet/1");
    assert!(h.scheduler.detect_stuck(at(0)).await.unwrap().is_empty());

    clock.set(at(11 * 60));
    let stuck = h.scheduler.detect_stuck(at(11 * 60)).await.unwrap();
    assert_eq!(stuck.len(), 1);
    assert_eq!(
        (stuck[0].job_id, stuck[0].last_activity),
        (handle.id(), at(0))
    );
    assert_eq!(stuck[0].stuck_for, Duration::from_secs(11 * 60));
    assert_eq!(stored(&store, handle.id()).await.state, JobState::Stuck);

    // Progress (the tool ends, the model is called again) clears it.
    h.gate.open("quiet/1");
    assert_eq!(h.next_started().await, "quiet/2");
    assert!(
        h.scheduler
            .detect_stuck(at(11 * 60))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        stored(&store, handle.id()).await.state,
        JobState::InProgress
    );

    clock.set(at(30 * 60));
    assert_eq!(
        h.scheduler.detect_stuck(at(30 * 60)).await.unwrap().len(),
        1
    );
    h.gate.open("quiet/2");
    let done = handle.wait().await.unwrap();
    assert_eq!(
        done.state,
        JobState::Completed,
        "a stuck job can still finish"
    );
    assert_eq!(stored(&store, done.id).await.state, JobState::Completed);
}

#[tokio::test(start_paused = true)]
async fn leases_are_renewed_while_jobs_run() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut h = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        config(1),
        clock.clone(),
    );
    h.scheduler.start().await.unwrap();
    let running = h.submit("long").await;
    let queued = h.submit("later").await;
    assert_eq!(h.next_started().await, "long");
    clock.set(at(500));
    // Paused time: each sleep lets the maintenance timer fire; no wall-clock wait.
    for _ in 0..100 {
        if store
            .get_job(queued.id())
            .await
            .unwrap()
            .unwrap()
            .lease_until
            == Some(at(590))
        {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for id in [running.id(), queued.id()] {
        assert_eq!(
            store.get_job(id).await.unwrap().unwrap().lease_until,
            Some(at(590))
        );
    }
    // Nobody else's reaper may take them now.
    assert!(store.reap_orphan_jobs(at(589)).await.unwrap().is_empty());
    h.scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn shutdown_interrupts_running_and_queued_jobs() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut h = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        config(1),
        clock,
    );
    let running = h.submit("busy").await;
    let queued = h.submit("waiting").await;
    assert_eq!(h.next_started().await, "busy");
    h.scheduler.shutdown().await;
    let busy = running.wait().await.unwrap();
    assert_eq!(busy.state, JobState::Failed);
    assert!(
        busy.error
            .unwrap()
            .contains("shut down before the job finished")
    );
    let waiting = stored(&store, queued.id()).await;
    assert_eq!(waiting.state, JobState::Failed);
    assert!(waiting.error.unwrap().contains("before the job started"));
    assert!(matches!(
        h.scheduler
            .submit(JobSpec::new("late", "late", "ada"))
            .await,
        Err(JobError::ShuttingDown)
    ));
}
