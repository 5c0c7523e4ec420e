//! De-duplication of identical tool calls: within one model response always;
//! across the turn only for reusable read-only results, and only until a write
//! or dangerous call has run.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use cairn_agent::tools::RiskLevel;
use cairn_agent::tools::files::{FileReadTool, FileWriteTool, FilesConfig};
use cairn_agent::tools::time::TimeNowTool;
use cairn_agent::{AutonomyLevel, LoopConfig, Tool};
use cairn_core::chat::Role;
use cairn_core::clock::Clock;
use cairn_llm::testing::Scripted;
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::fixtures::{Echo, Harness, Recorder};

async fn harness(tools: Vec<Arc<dyn Tool>>) -> Harness {
    Harness::new(tools, AutonomyLevel::Full, LoopConfig::default()).await
}

fn reused(outcome: &cairn_agent::LoopOutcome) -> Vec<bool> {
    outcome.tool_calls.iter().map(|c| c.reused).collect()
}

fn tool_texts(messages: &[cairn_core::chat::ChatMessage]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect()
}

#[tokio::test]
async fn identical_read_only_calls_are_reused_until_a_write_runs() {
    let echo = Echo::new("echo", RiskLevel::ReadOnly);
    let writer = Echo::new("writer", RiskLevel::Write);
    let h = harness(vec![echo.clone(), writer.clone()]).await;
    let same = json!({"text": "x", "n": {"a": 1, "b": 2}});
    // One response with the same call twice (key order and name case differ).
    h.server.push(Scripted::tool_calls([
        ("echo", same.clone()),
        ("ECHO", json!({"n": {"b": 2, "a": 1}, "text": "x"})),
    ]));
    // A later response, nothing written since: the read-only result is reused.
    h.server.push(Scripted::tool_call("echo", same.clone()));
    // A write runs; afterwards the same read must run again.
    h.server
        .push(Scripted::tool_call("writer", json!({"text": "w"})));
    h.server.push(Scripted::tool_call("echo", same.clone()));
    h.server.push(Scripted::text("done"));
    let d = Recorder::new();
    let (outcome, messages) = h.turn(&d, "repeat yourself").await;
    assert_eq!(outcome.text, "done");
    assert_eq!(reused(&outcome), [false, true, true, false, false]);
    assert_eq!(echo.runs(), 2, "the read after the write ran again");
    assert_eq!(writer.runs(), 1);
    // Every call still got its own answer.
    assert_eq!(tool_texts(&messages).len(), 5);
}

#[tokio::test]
async fn write_and_dangerous_calls_are_never_reused_across_responses() {
    let writer = Echo::new("writer", RiskLevel::Write);
    let fetch = Echo::new("fetcher", RiskLevel::Dangerous);
    let h = harness(vec![writer.clone(), fetch.clone()]).await;
    for _ in 0..2 {
        h.server.push(Scripted::tool_calls([
            ("writer", json!({"text": "append"})),
            ("fetcher", json!({"text": "retry"})),
        ]));
    }
    h.server.push(Scripted::text("done"));
    let d = Recorder::new();
    let (outcome, _) = h.turn(&d, "write and fetch twice").await;
    assert_eq!(outcome.text, "done");
    assert_eq!(reused(&outcome), [false, false, false, false]);
    assert_eq!(writer.runs(), 2, "a repeated write runs again");
    assert_eq!(fetch.runs(), 2, "a retried request runs again");
}

#[tokio::test]
async fn file_read_after_file_write_sees_the_new_content() {
    let files = FilesConfig::default();
    let h = harness(vec![
        Arc::new(FileReadTool::new(files.clone())),
        Arc::new(FileWriteTool::new(files)),
    ])
    .await;
    std::fs::write(h.ctx.workspace.join("notes.txt"), "old content\n").unwrap();
    let read = json!({"path": "notes.txt"});
    h.server
        .push(Scripted::tool_call("file_read", read.clone()));
    h.server.push(Scripted::tool_call(
        "file_write",
        json!({"path": "notes.txt", "content": "new content\n"}),
    ));
    h.server.push(Scripted::tool_call("file_read", read));
    h.server.push(Scripted::text("done"));
    let d = Recorder::new();
    let (outcome, messages) = h.turn(&d, "read, write, read").await;
    assert_eq!(outcome.text, "done");
    let texts = tool_texts(&messages);
    assert!(texts[0].contains("old content"), "{}", texts[0]);
    assert!(
        texts[2].contains("new content"),
        "the second read returned a stale result: {}",
        texts[2]
    );
    assert_eq!(reused(&outcome), [false, false, false]);
}

/// A clock that moves one second forward every time it is read.
struct Ticking(AtomicI64);

impl Clock for Ticking {
    fn now(&self) -> DateTime<Utc> {
        let seconds = self.0.fetch_add(1, Ordering::SeqCst);
        DateTime::from_timestamp(seconds, 0).unwrap()
    }
    fn sleep_until(&self, _: DateTime<Utc>) -> cairn_core::clock::Sleep<'_> {
        Box::pin(std::future::ready(()))
    }
}

#[tokio::test]
async fn time_now_in_two_responses_runs_twice() {
    let mut h = harness(vec![Arc::new(TimeNowTool)]).await;
    h.ctx = h
        .ctx
        .clone()
        .with_clock(Arc::new(Ticking(AtomicI64::new(1_800_000_000))));
    h.server.push(Scripted::tool_call("time_now", json!({})));
    h.server.push(Scripted::tool_call("time_now", json!({})));
    h.server.push(Scripted::text("done"));
    let d = Recorder::new();
    let (outcome, messages) = h.turn(&d, "what time is it, twice").await;
    assert_eq!(outcome.text, "done");
    assert_eq!(reused(&outcome), [false, false], "time_now ran both times");
    let texts = tool_texts(&messages);
    assert!(texts[0].contains("unix: 1800000000"), "{}", texts[0]);
    assert!(texts[1].contains("unix: 1800000001"), "{}", texts[1]);
}
