//! Running jobs: answers and usage, the concurrency limit, cancellation,
//! time limits, planning, provider errors and refused tools.

use std::sync::Arc;
use std::time::Duration;

use cairn_agent::JobSpec;
use cairn_agent::jobs::{CancelOutcome, JobError, JobFilter, JobState};
use cairn_core::clock::FixedClock;
use cairn_llm::build_provider;
use cairn_llm::testing::{FakeLlmServer, InstantProvider, Scripted};
use serde_json::json;
use uuid::Uuid;

use crate::fixtures::{Harness, TaskProvider, at, config, sqlite, stored};

#[tokio::test]
async fn a_job_completes_with_the_answer_and_its_usage_is_persisted() {
    let server = FakeLlmServer::start().await.unwrap();
    server.push(Scripted::text("The answer is 42.").with_usage(12, 3));
    let provider = build_provider(&server.openai_settings()).unwrap();
    let (store, _dir) = sqlite().await;
    let h = Harness::new(
        store.clone(),
        provider,
        config(5),
        Arc::new(FixedClock::new(at(0))),
    );
    let mut progress = h.scheduler.subscribe_progress();
    let handle = h.submit("What is six times seven?").await;
    let done = handle.wait().await.unwrap();

    assert_eq!(done.state, JobState::Completed);
    let step = progress.try_recv().unwrap();
    assert_eq!(
        (step.job_id, step.iterations, step.step.as_str()),
        (done.id, 1, "model call 1")
    );
    assert_eq!(done.result.as_deref(), Some("The answer is 42."));
    assert_eq!(
        (done.iterations, done.input_tokens, done.output_tokens),
        (1, 12, 3)
    );
    assert_eq!(
        done.cost_micros,
        12 + 3 * 2,
        "priced at $1/$2 per million tokens"
    );
    let persisted = stored(&store, done.id).await;
    assert_eq!(persisted, done);
    assert_eq!(persisted.origin.as_deref(), Some("thread:1"));
    assert_eq!(
        (persisted.started_at, persisted.completed_at),
        (Some(at(0)), Some(at(0)))
    );
    assert_eq!(persisted.lease_owner, None);

    let sent = &server.requests()[0].body;
    assert!(
        sent["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("background job")
    );
    assert_eq!(sent["messages"][1]["content"], "What is six times seven?");
    assert!(sent["tools"].as_array().is_some_and(|t| !t.is_empty()));
}

#[tokio::test(start_paused = true)]
async fn max_parallel_jobs_keeps_extra_jobs_pending_first_in_first_out() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut h = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        config(2),
        clock,
    );
    let mut handles = Vec::new();
    for i in 1..=4 {
        handles.push(h.submit(&format!("job-{i}")).await);
    }
    let ids: Vec<Uuid> = handles.iter().map(|h| h.id()).collect();
    let mut first_two = vec![h.next_started().await, h.next_started().await];
    first_two.sort();
    assert_eq!(first_two, ["job-1", "job-2"]);
    assert_eq!(h.scheduler.queued(), ids[2..]);
    assert_eq!(h.scheduler.running().len(), 2);
    assert_eq!(stored(&store, ids[2]).await.state, JobState::Pending);
    assert_eq!(stored(&store, ids[3]).await.state, JobState::Pending);
    let pending = JobFilter {
        state: Some(JobState::Pending),
        ..JobFilter::default()
    };
    let listed: Vec<Uuid> = h
        .scheduler
        .list(&pending)
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(listed, [ids[3], ids[2]], "newest first");

    h.gate.open("job-1");
    let one = handles.remove(0).wait().await.unwrap();
    assert_eq!(one.result.as_deref(), Some("done job-1"));
    assert_eq!(
        h.next_started().await,
        "job-3",
        "the oldest waiting job goes first"
    );
    assert_eq!(h.scheduler.queued(), [ids[3]]);
    assert_eq!(stored(&store, ids[3]).await.state, JobState::Pending);

    h.gate.open("job-2");
    assert_eq!(h.next_started().await, "job-4");
    h.gate.open("job-3");
    h.gate.open("job-4");
    for (handle, i) in handles.into_iter().zip(2..) {
        let done = handle.wait().await.unwrap();
        assert_eq!(done.state, JobState::Completed);
        assert_eq!(done.result, Some(format!("done job-{i}")));
        assert_eq!(stored(&store, done.id).await.state, JobState::Completed);
    }
    assert!(h.scheduler.running().is_empty() && h.scheduler.queued().is_empty());
}

#[tokio::test(start_paused = true)]
async fn cancelling_pending_and_running_jobs() {
    let (store, _dir) = sqlite().await;
    let provider = Arc::new(TaskProvider::default());
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut h = Harness::new(store.clone(), provider.clone(), config(1), clock);
    let running = h.submit("slow").await;
    let pending = h.submit("never").await;
    assert_eq!(h.next_started().await, "slow");

    assert_eq!(
        h.scheduler.cancel(pending.id()).await.unwrap(),
        CancelOutcome::Cancelled
    );
    let never = pending.wait().await.unwrap();
    assert_eq!(never.state, JobState::Cancelled);
    assert!(never.error.unwrap().contains("before it started"));

    let running_id = running.id();
    assert_eq!(
        h.scheduler.cancel(running_id).await.unwrap(),
        CancelOutcome::Requested
    );
    let slow = running.wait().await.unwrap();
    assert_eq!(slow.state, JobState::Cancelled);
    assert_eq!(slow.error.as_deref(), Some("cancelled by request"));
    assert_eq!(stored(&store, running_id).await.state, JobState::Cancelled);
    assert_eq!(h.gate.stopped(), ["slow"], "the running tool was stopped");
    assert_eq!(
        provider.requests.lock().unwrap().len(),
        1,
        "no model call after the cancel"
    );

    assert_eq!(
        h.scheduler.cancel(running_id).await.unwrap(),
        CancelOutcome::AlreadyEnded(JobState::Cancelled)
    );
    assert!(matches!(
        h.scheduler.cancel(Uuid::now_v7()).await,
        Err(JobError::NotFound(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_job_past_its_timeout_fails_and_its_tools_stop() {
    let (store, _dir) = sqlite().await;
    let clock = Arc::new(FixedClock::new(at(0)));
    let mut h = Harness::new(
        store.clone(),
        Arc::new(TaskProvider::default()),
        config(2),
        clock,
    );
    let spec = JobSpec::new("slow", "slow", "ada").with_timeout(Duration::from_secs(60));
    let handle = h.scheduler.submit(spec).await.unwrap();
    assert_eq!(h.next_started().await, "slow");
    let done = handle.wait().await.unwrap();
    assert_eq!(done.state, JobState::Failed);
    assert_eq!(done.error.as_deref(), Some("timed out after 60s"));
    assert_eq!(done.iterations, 1);
    assert_eq!(store.get_job(done.id).await.unwrap().unwrap(), done);
    assert_eq!(h.gate.stopped(), ["slow"]);
}

#[tokio::test(start_paused = true)]
async fn planning_asks_for_a_plan_first_and_prepends_it() {
    let provider = Arc::new(InstantProvider::new());
    provider.push_text("1. Check the logs\n2. Report");
    provider.push_text("Reported.");
    let (store, _dir) = sqlite().await;
    let h = Harness::new(
        store,
        provider.clone(),
        config(1),
        Arc::new(FixedClock::new(at(0))),
    );
    let spec = JobSpec::new("logs", "Look at the logs", "ada").with_planning(true);
    let done = h
        .scheduler
        .submit(spec)
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(done.result.as_deref(), Some("Reported."));
    assert_eq!(
        (done.input_tokens, done.output_tokens),
        (20, 10),
        "plan + answer"
    );
    assert_eq!(done.iterations, 1);

    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[0].tools.is_empty(),
        "the planning call offers no tools"
    );
    assert!(requests[0].messages[0].content.contains("numbered plan"));
    assert_eq!(requests[0].messages[1].content, "Look at the logs");
    assert!(!requests[1].tools.is_empty());
    assert_eq!(
        requests[1].messages[1].content,
        "Plan:\n1. Check the logs\n2. Report\n\nTask:\nLook at the logs"
    );
}

#[tokio::test]
async fn a_provider_error_fails_the_job_with_its_reason() {
    let server = FakeLlmServer::start().await.unwrap();
    server.push(Scripted::auth_error());
    let provider = build_provider(&server.openai_settings()).unwrap();
    let (store, _dir) = sqlite().await;
    let h = Harness::new(
        store.clone(),
        provider,
        config(1),
        Arc::new(FixedClock::new(at(0))),
    );
    let done = h.submit("anything").await.wait().await.unwrap();
    assert_eq!(done.state, JobState::Failed);
    let error = done.error.clone().unwrap();
    assert!(error.contains("rejected the credentials"), "{error}");
    assert!(!error.contains(cairn_llm::testing::FAKE_API_KEY), "{error}");
    assert_eq!(stored(&store, done.id).await.error, Some(error));
}

#[tokio::test(start_paused = true)]
async fn a_tool_needing_approval_is_refused_and_the_result_says_so() {
    let provider = Arc::new(InstantProvider::new());
    provider.push(InstantProvider::tool_call_response(
        "c1",
        "danger",
        json!({}),
    ));
    provider.push_text("I could not do it.");
    let (store, _dir) = sqlite().await;
    let h = Harness::new(
        store,
        provider.clone(),
        config(1),
        Arc::new(FixedClock::new(at(0))),
    );
    let done = h.submit("do the risky thing").await.wait().await.unwrap();
    assert_eq!(done.state, JobState::Completed);
    let result = done.result.unwrap();
    assert!(result.starts_with("I could not do it."), "{result}");
    assert!(result.contains("`danger` (needs approval"), "{result}");
    let told = &provider.requests()[1].messages;
    assert!(told.last().unwrap().content.contains("declined"));
}

#[tokio::test(start_paused = true)]
async fn a_job_approves_its_allowed_tools_declines_the_rest_and_reports_them() {
    use cairn_agent::jobs::RefusedTool;
    use cairn_agent::runner::ToolStatus;
    let provider = Arc::new(InstantProvider::new());
    for _ in 0..2 {
        provider.push(InstantProvider::tool_call_response(
            "c1",
            "danger",
            json!({}),
        ));
        provider.push_text("finished");
    }
    let (store, _dir) = sqlite().await;
    let h = Harness::new(
        store,
        provider.clone(),
        config(1),
        Arc::new(FixedClock::new(at(0))),
    );

    let spec = JobSpec::new("t", "not allowed", "ada").with_allowed_tools(["gate"]);
    let handle = h.scheduler.submit(spec).await.unwrap();
    handle.clone().wait().await.unwrap();
    assert_eq!(
        handle.refused_tools(),
        [RefusedTool {
            tool: "danger".into(),
            status: ToolStatus::Declined
        }]
    );

    // Listed: approved, so it runs (this fixture tool then crashes, which the runner catches).
    let spec = JobSpec::new("t", "allowed", "ada").with_allowed_tools(["danger"]);
    let handle = h.scheduler.submit(spec).await.unwrap();
    handle.clone().wait().await.unwrap();
    assert_eq!(handle.refused_tools(), []);
    let told = &provider.requests()[3].messages;
    assert!(told.last().unwrap().content.contains("crashed"), "{told:?}");
}
