//! What stops a sub-agent: the depth limit, its model calls, its budget,
//! and its parent being cancelled.

use cairn_agent::AutonomyLevel;
use cairn_agent::LoopStatus;
use cairn_agent::jobs::JobState;
use cairn_llm::testing::Scripted;
use serde_json::json;

use crate::fixtures::{Harness, Person, task};

#[tokio::test]
async fn a_delegation_at_depth_three_is_refused() {
    let h = Harness::new(AutonomyLevel::Supervised).await;
    h.server.push_all([
        Scripted::tool_call("agent_delegate", task("level 1")),
        Scripted::tool_call("agent_delegate", task("level 2")),
        Scripted::tool_call("agent_delegate", task("level 3")),
        Scripted::text("level 2 done"),
        Scripted::text("level 1 done"),
        Scripted::text("all done"),
    ]);
    let outcome = h.turn(&Person::default(), "go").await;
    assert_eq!(outcome.text, "all done", "{outcome:?}");
    // No request of a third level: the second's call was refused.
    assert_eq!(h.server.requests().len(), 6);
    let refusal = h.last(3);
    assert!(
        refusal.contains("depth 3, deeper than agent.max_delegation_depth = 2"),
        "{refusal}"
    );
    // Two children, the second a child of the first.
    let jobs = h.jobs().await;
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].origin.as_deref(), Some("delegate:session-1"));
    assert_eq!(jobs[1].parent_id, Some(jobs[0].id));
    assert_eq!(
        jobs[1].origin.as_deref(),
        Some(format!("delegate:job:{}", jobs[0].id).as_str())
    );
    assert_eq!(jobs[1].result.as_deref(), Some("level 2 done"));
}

#[tokio::test]
async fn a_turn_runs_no_more_sub_agents_at_once_than_its_limit() {
    let h = Harness::with_parallel(AutonomyLevel::Supervised, 2).await;
    let gate = || Scripted::tool_call("gate", json!({}));
    h.server.push_all([
        Scripted::tool_calls([
            ("agent_delegate", task("one")),
            ("agent_delegate", task("two")),
            ("agent_delegate", task("three")),
        ]),
        gate(),
        gate(),
    ]);
    let started = || async { h.gate_started.lock().await.recv().await.unwrap() };
    let drive = async {
        started().await;
        started().await;
        // Two sub-agents wait at the gate; the third has not even started.
        assert_eq!(h.jobs().await.len(), 2);
        // The first to go on answers and ends; only then does the third start.
        h.server.push_all([Scripted::text("answer"), gate()]);
        h.gate.open_one();
        started().await;
        assert_eq!(h.jobs().await.len(), 3);
        h.server.push_all([
            Scripted::text("answer"),
            Scripted::text("answer"),
            Scripted::text("done"),
        ]);
        h.gate.open_one();
        h.gate.open_one();
    };
    let person = Person::default();
    let (outcome, ()) = tokio::join!(h.turn(&person, "go"), drive);
    assert_eq!(outcome.text, "done", "{outcome:?}");
    assert_eq!(h.server.requests().len(), 8);
    let jobs = h.jobs().await;
    assert!(
        jobs.iter().all(|j| j.state == JobState::Completed),
        "{jobs:?}"
    );
}

#[tokio::test]
async fn a_child_stops_at_its_max_iterations() {
    let h = Harness::new(AutonomyLevel::Supervised).await;
    h.server.push_all([
        Scripted::tool_call(
            "agent_delegate",
            json!({"task": "Echo forever.", "max_iterations": 2}),
        ),
        Scripted::tool_call("echo", json!({"text": "1"})),
        Scripted::tool_call("echo", json!({"text": "2"})),
        Scripted::text("gave up"),
    ]);
    let outcome = h.turn(&Person::default(), "go").await;
    assert_eq!(outcome.text, "gave up", "{outcome:?}");
    assert_eq!(h.server.requests().len(), 4, "two model calls of the child");
    let result = h.last(3);
    assert!(
        result.contains("stopped after 2 model calls without a final answer (max_iterations)"),
        "{result}"
    );
    let job = &h.jobs().await[0];
    assert_eq!(
        (job.state, job.iterations, job.max_iterations),
        (JobState::Failed, 2, 2)
    );
}

#[tokio::test]
async fn a_child_stops_when_its_budget_is_spent() {
    let h = Harness::new(AutonomyLevel::Supervised).await;
    // Each of the child's calls costs half a cent (5,000 input tokens at $1 per million).
    h.server.push_all([
        Scripted::tool_call(
            "agent_delegate",
            json!({"task": "Echo a lot.", "budget_cents": 1}),
        ),
        Scripted::tool_call("echo", json!({"text": "1"})).with_usage(5_000, 0),
        Scripted::tool_call("echo", json!({"text": "2"})).with_usage(5_000, 0),
        Scripted::text("over budget"),
    ]);
    let outcome = h.turn(&Person::default(), "go").await;
    assert_eq!(outcome.text, "over budget", "{outcome:?}");
    assert_eq!(
        h.server.requests().len(),
        4,
        "the child's third call was not made"
    );
    let child_second = h.messages(2);
    assert_eq!(
        child_second
            .iter()
            .filter(|(role, _)| role == "tool")
            .count(),
        1,
        "the call of the answer that spent the budget did not run"
    );
    let result = h.last(3);
    assert!(
        result.contains("stopped: the budget of $0.01 is spent ($0.01 so far)"),
        "{result}"
    );
    let job = &h.jobs().await[0];
    assert_eq!(
        (job.state, job.cost_micros, job.iterations),
        (JobState::Failed, 10_000, 2)
    );
}

#[tokio::test]
async fn cancelling_the_parent_cancels_its_children() {
    let h = Harness::new(AutonomyLevel::Supervised).await;
    h.server.push_all([
        Scripted::tool_call("agent_delegate", task("Wait at the gate.")),
        Scripted::tool_call("gate", json!({})),
    ]);
    let person = Person::default();
    let cancel = h.ctx.cancel.clone();
    let (outcome, ()) = tokio::join!(h.turn(&person, "go"), async {
        h.gate_started.lock().await.recv().await.unwrap();
        cancel.cancel();
    });
    assert_eq!(outcome.status, LoopStatus::Interrupted, "{outcome:?}");
    let job = h.jobs().await.remove(0);
    // The child ends in its own task: wait for its record to say so.
    let done = h.scheduler.wait(job.id).await.unwrap();
    assert_eq!(done.state, JobState::Cancelled, "{done:?}");
    assert!(
        *h.gate.stopped.lock().unwrap(),
        "the child's tool was stopped"
    );
    assert_eq!(h.server.requests().len(), 2);
}
