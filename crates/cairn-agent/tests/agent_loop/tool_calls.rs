//! Tool calls through the loop: single, parallel, approvals, scrubbing, and
//! calls recovered from text (de-duplication is in `reuse.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn_agent::runner::ApprovalAnswer;
use cairn_agent::tools::RiskLevel;
use cairn_agent::{AutonomyLevel, LoopConfig, LoopEvent, LoopStatus, Tool, ToolStatus};
use cairn_core::chat::Role;
use cairn_llm::testing::Scripted;
use serde_json::json;

use crate::fixtures::{Echo, Harness, Recorder, Rendezvous};

async fn harness(tools: Vec<Arc<dyn Tool>>, autonomy: AutonomyLevel) -> Harness {
    Harness::new(tools, autonomy, LoopConfig::default()).await
}

#[tokio::test]
async fn one_tool_call_then_answer() {
    let echo = Echo::new("echo", RiskLevel::ReadOnly);
    let h = harness(vec![echo.clone()], AutonomyLevel::Supervised).await;
    h.server
        .push(Scripted::tool_call("echo", json!({"text": "hello"})));
    h.server.push(Scripted::text("The tool said hello."));
    let d = Recorder::new();
    let (outcome, messages) = h.turn(&d, "say hello via the tool").await;
    assert_eq!(outcome.status, LoopStatus::Answered);
    assert_eq!(outcome.text, "The tool said hello.");
    assert_eq!(echo.runs(), 1);
    assert_eq!(outcome.tool_calls.len(), 1);
    assert_eq!(outcome.tool_calls[0].status, ToolStatus::Success);
    let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ]
    );
    // The second request carried the tool result, answering the call id.
    let sent = h.sent_messages(1);
    let tool_msg = sent.iter().find(|m| m["role"] == "tool").unwrap();
    assert!(
        tool_msg["content"]
            .as_str()
            .unwrap()
            .contains("echo: hello")
    );
    assert_eq!(tool_msg["tool_call_id"], messages[2].tool_calls[0].id);
}

#[tokio::test]
async fn three_calls_run_in_parallel_and_report_in_call_order() {
    let finish_order = Arc::new(Mutex::new(Vec::new()));
    let tool = Arc::new(Rendezvous {
        barrier: Arc::new(tokio::sync::Barrier::new(3)),
        finish_order: finish_order.clone(),
        gates: Arc::new(Default::default()),
    });
    let h = harness(vec![tool], AutonomyLevel::Supervised).await;
    h.server.push(Scripted::tool_calls(
        (0..3).map(|n| ("rendezvous", json!({"n": n}))),
    ));
    h.server.push(Scripted::text("all three met"));
    let d = Recorder::new();
    // Run sequentially, the first call would wait at the barrier forever.
    let (outcome, messages) = tokio::time::timeout(Duration::from_secs(20), h.turn(&d, "meet"))
        .await
        .expect("the three calls must overlap; sequential execution deadlocks at the barrier");
    assert_eq!(outcome.text, "all three met");
    assert_eq!(
        *finish_order.lock().unwrap(),
        vec![2, 1, 0],
        "they finished in reverse"
    );

    // Overlap, from the events: all three started before any finished.
    let events = d.events();
    let first_finish = events
        .iter()
        .position(|e| matches!(e, LoopEvent::ToolFinished { .. }))
        .unwrap();
    let starts_before = events[..first_finish]
        .iter()
        .filter(|e| matches!(e, LoopEvent::ToolStarted { .. }))
        .count();
    assert_eq!(starts_before, 3);

    // Results went back in call order regardless.
    let tool_texts: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    for (n, text) in tool_texts.iter().enumerate() {
        assert!(text.contains(&format!("rendezvous {n} done")), "{text}");
    }
    let call_ids: Vec<&str> = messages[2]
        .tool_calls
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    let answered: Vec<&str> = messages
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(call_ids, answered);
}

#[tokio::test]
async fn approvals_are_asked_in_order_and_denials_are_results() {
    let writer = Echo::new("writer", RiskLevel::Write);
    let h = harness(vec![writer.clone()], AutonomyLevel::Supervised).await;
    h.server.push(Scripted::tool_calls([
        ("writer", json!({"text": "first"})),
        ("writer", json!({"text": "second"})),
    ]));
    h.server.push(Scripted::text("ok"));
    let d = Recorder::answering(&[ApprovalAnswer::No, ApprovalAnswer::Yes]);
    let (outcome, messages) = h.turn(&d, "write twice").await;
    assert_eq!(outcome.text, "ok");
    let asked: Vec<String> = d
        .asked()
        .iter()
        .map(|r| r.arguments["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(asked, ["first", "second"], "asked in call order");
    assert_eq!(writer.runs(), 1);
    let statuses: Vec<ToolStatus> = outcome.tool_calls.iter().map(|c| c.status).collect();
    assert_eq!(statuses, [ToolStatus::Declined, ToolStatus::Success]);
    let declined = messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert!(
        declined.content.contains("declined"),
        "{}",
        declined.content
    );
}

#[tokio::test]
async fn always_adds_the_tool_to_the_session_allow_list() {
    let writer = Echo::new("writer", RiskLevel::Write);
    let h = harness(vec![writer.clone()], AutonomyLevel::Supervised).await;
    h.server
        .push(Scripted::tool_call("writer", json!({"text": "a"})));
    h.server
        .push(Scripted::tool_call("writer", json!({"text": "b"})));
    h.server.push(Scripted::text("done"));
    let d = Recorder::answering(&[ApprovalAnswer::Always]);
    let (outcome, _) = h.turn(&d, "write").await;
    assert_eq!(outcome.text, "done");
    assert_eq!(
        d.asked().len(),
        1,
        "asked once, then allowed for the session"
    );
    assert_eq!(writer.runs(), 2);
}

#[tokio::test]
async fn credentials_in_tool_output_never_reach_the_model() {
    let leaky = Echo::new("leaky", RiskLevel::ReadOnly);
    let h = harness(vec![leaky], AutonomyLevel::Supervised).await;
    let secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789";
    h.server.push(Scripted::tool_call("leaky", json!({"text": format!("api_key={secret} Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk")})));
    h.server.push(Scripted::text("done"));
    let d = Recorder::new();
    let (outcome, messages) = h.turn(&d, "leak").await;
    assert_eq!(outcome.text, "done");
    let sent = h.sent_messages(1);
    let tool_part = sent.iter().find(|m| m["role"] == "tool").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!tool_part.contains(secret), "{tool_part}");
    assert!(!tool_part.contains("eyJzdWIiOiIxIn0"), "{tool_part}");
    assert!(tool_part.contains("[REDACTED]"), "{tool_part}");
    let tool_msg = messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert!(!tool_msg.content.contains(secret));
    assert!(
        !serde_json::to_string(&outcome.tool_calls)
            .unwrap()
            .contains(secret),
        "records are scrubbed too"
    );
}

#[tokio::test]
async fn tool_calls_written_as_text_are_recovered() {
    let echo = Echo::new("echo", RiskLevel::ReadOnly);
    let h = harness(vec![echo.clone()], AutonomyLevel::Supervised).await;
    let formats = [
        "<tool_call>{\"name\": \"echo\", \"arguments\": {\"text\": \"xml\"}}</tool_call>"
            .to_string(),
        "{\"name\": \"echo\", \"arguments\": {\"text\": \"json\"}}".to_string(),
        "Running it:\n```json\n{\"name\": \"echo\", \"arguments\": {\"text\": \"fenced\"}}\n```"
            .to_string(),
    ];
    for (i, text) in formats.iter().enumerate() {
        h.server.push(Scripted::text(text.clone()));
        h.server.push(Scripted::text(format!("answer {i}")));
        let d = Recorder::new();
        let (outcome, messages) = h.turn(&d, "use the tool").await;
        assert_eq!(outcome.text, format!("answer {i}"), "format {i}: {text}");
        assert_eq!(echo.runs(), i + 1, "format {i} ran the tool");
        let tool_msg = messages.iter().find(|m| m.role == Role::Tool).unwrap();
        let expected = ["xml", "json", "fenced"][i];
        assert!(
            tool_msg.content.contains(&format!("echo: {expected}")),
            "{}",
            tool_msg.content
        );
    }
}

#[tokio::test]
async fn denied_and_unknown_tools_come_back_as_results() {
    let danger = Echo::new("danger", RiskLevel::Dangerous);
    let h = harness(vec![danger.clone()], AutonomyLevel::ReadOnly).await;
    h.server.push(Scripted::tool_calls([
        ("danger", json!({})),
        ("nosuchtool", json!({})),
    ]));
    h.server.push(Scripted::text("understood"));
    let d = Recorder::new();
    let (outcome, messages) = h.turn(&d, "try").await;
    assert_eq!(outcome.text, "understood");
    assert_eq!(danger.runs(), 0);
    assert!(
        d.asked().is_empty(),
        "read-only autonomy denies without asking"
    );
    let statuses: Vec<ToolStatus> = outcome.tool_calls.iter().map(|c| c.status).collect();
    assert_eq!(statuses, [ToolStatus::Denied, ToolStatus::UnknownTool]);
    let texts: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert!(texts[0].contains("denied by policy"), "{}", texts[0]);
    assert!(texts[1].contains("unknown tool"), "{}", texts[1]);
}
