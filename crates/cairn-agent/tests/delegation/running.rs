//! Sub-agents at work: side by side, each with only its task, with the
//! tools their parent may use, asking the parent's person, as another
//! agent, and recorded.

use cairn_agent::AutonomyLevel;
use cairn_agent::LoopStatus;
use cairn_agent::jobs::JobState;
use cairn_agent::prompt::SUBAGENT_NOTE;
use cairn_agent::runner::ApprovalAnswer;
use cairn_llm::testing::Scripted;
use serde_json::json;

use crate::fixtures::{Harness, PARENT_PROMPT, Person, delegate, task};

#[tokio::test]
async fn two_delegations_in_one_step_run_side_by_side_each_with_only_its_task() {
    let h = Harness::new(AutonomyLevel::Supervised).await;
    h.server.push_all([
        Scripted::tool_calls([
            delegate(task("Find the opening hours of the library.")),
            delegate(task("Find the bus timetable.")),
        ]),
        // Neither answers until both children asked: they run side by side.
        Scripted::text("first answer").held_until(2),
        Scripted::text("second answer").held_until(2),
        Scripted::text("All found."),
    ]);
    let outcome = h.turn(&Person::default(), "Plan my Saturday.").await;
    assert_eq!(outcome.status, LoopStatus::Answered, "{outcome:?}");
    assert_eq!(outcome.text, "All found.");
    assert_eq!(h.server.requests().len(), 4);
    assert_eq!(h.server.most_in_flight(), 2);

    // Each child saw a system message of its own and its task, nothing of the parent's.
    let mut tasks = Vec::new();
    for i in [1, 2] {
        let messages = h.messages(i);
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[0].0, "system");
        assert!(
            messages[0].1.starts_with(SUBAGENT_NOTE),
            "{}",
            messages[0].1
        );
        assert!(!messages[0].1.contains(PARENT_PROMPT));
        assert_eq!(messages[1].0, "user");
        assert!(!messages[1].1.contains("Saturday"));
        tasks.push(messages[1].1.clone());
    }
    tasks.sort();
    assert_eq!(
        tasks,
        [
            "Find the bus timetable.",
            "Find the opening hours of the library."
        ]
    );

    // The parent's next request carries both answers, each with its usage line.
    let results: Vec<String> = h
        .messages(3)
        .into_iter()
        .filter(|(role, _)| role == "tool")
        .map(|(_, content)| content)
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    let all = results.join("\n");
    assert!(
        all.contains("first answer") && all.contains("second answer"),
        "{all}"
    );
    for result in &results {
        assert!(
            result.contains("1 model call, 10 tokens in / 5 out, $0.00002; job "),
            "{result}"
        );
    }

    // Each child is a job of its own, linked to the parent's session.
    let jobs = h.jobs().await;
    assert_eq!(jobs.len(), 2);
    for job in &jobs {
        assert_eq!(job.state, JobState::Completed, "{job:?}");
        assert_eq!(job.origin.as_deref(), Some("delegate:session-1"));
        assert_eq!(job.parent_id, None);
        assert_eq!((job.iterations, job.cost_micros), (1, 20));
        assert_eq!(job.owner, "ada");
        assert!(all.contains(&job.id.to_string()), "{all}");
    }
}

#[tokio::test]
async fn a_child_gets_only_the_tools_its_parent_may_use() {
    let h = Harness::new(AutonomyLevel::Supervised).await;
    h.server.push_all([
        Scripted::tool_call(
            "agent_delegate",
            json!({"task": "List the files.", "tools": ["shell", "ECHO"]}),
        ),
        Scripted::text("listed"),
        Scripted::tool_call("agent_delegate", json!({"task": "Do anything."})),
        Scripted::text("did"),
        Scripted::text("ok"),
    ]);
    let outcome = h.turn(&Person::default(), "go").await;
    assert_eq!(outcome.text, "ok", "{outcome:?}");
    // Asked for shell and echo: the parent's policy denies shell.
    assert_eq!(h.tools(1), ["echo"]);
    let result = h.last(2);
    assert!(
        result.contains("listed")
            && result.contains("Not given to the sub-agent")
            && result.contains("shell"),
        "{result}"
    );
    // Asked for nothing in particular: everything the parent may use, never shell.
    assert_eq!(h.tools(3), ["agent_delegate", "echo", "gate", "writer"]);
}

#[tokio::test]
async fn a_child_s_approvals_are_asked_of_the_parent_s_person_labelled_with_the_child() {
    let h = Harness::new(AutonomyLevel::Supervised).await;
    h.server.push_all([
        Scripted::tool_call("agent_delegate", task("Write the shopping list.")),
        Scripted::tool_call("writer", json!({})),
        Scripted::text("written"),
        Scripted::text("done"),
    ]);
    let person = Person::default();
    person.answers.lock().unwrap().push(ApprovalAnswer::Yes);
    let outcome = h.turn(&person, "go").await;
    assert_eq!(outcome.text, "done", "{outcome:?}");
    assert_eq!(h.writer.runs(), 1);
    let asked = person.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].tool, "writer");
    assert!(
        asked[0]
            .summary
            .starts_with("[sub-agent \u{b7} \"Write the shopping list.\"] writer"),
        "{}",
        asked[0].summary
    );
    let jobs = h.jobs().await;
    assert_eq!(asked[0].session_id, format!("job:{}", jobs[0].id));
}

#[tokio::test]
async fn a_named_agent_s_child_has_its_identity_and_model_and_no_more_tools() {
    let h = Harness::new(AutonomyLevel::Supervised).await;
    h.with_family();
    h.server.push_all([
        Scripted::tool_call(
            "agent_delegate",
            json!({"agent": "family", "task": "Water the plants?"}),
        ),
        Scripted::text("watered"),
        Scripted::tool_call("agent_delegate", json!({"agent": "nobody", "task": "x"})),
        Scripted::text("ok"),
    ]);
    let outcome = h.turn(&Person::default(), "go").await;
    assert_eq!(outcome.text, "ok", "{outcome:?}");
    let child = &h.server.requests()[1].body;
    assert_eq!(child["model"], "family-model");
    let messages = h.messages(1);
    assert_eq!(messages.len(), 2);
    let system = &messages[0].1;
    assert!(system.starts_with("You are Pip,"), "{system}");
    assert!(system.contains("Pip looks after the garden."), "{system}");
    assert!(system.contains(SUBAGENT_NOTE), "{system}");
    assert!(!system.contains(PARENT_PROMPT));
    // family has echo and agent_delegate; the parent has those and more.
    assert_eq!(h.tools(1), ["agent_delegate", "echo"]);
    let jobs = h.jobs().await;
    assert_eq!(jobs[0].title, "family: Water the plants?");
    // An agent that is not configured is named in the refusal.
    let refused = h.last(3);
    assert!(
        refused.contains("no agent `nobody` is configured; the agents are: family"),
        "{refused}"
    );
}
