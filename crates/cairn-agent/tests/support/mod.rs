//! Fake tools and helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver};
use cairn_agent::tools::{RiskLevel, Tool, ToolContext, ToolError, ToolOutput};
use cairn_core::chat::ToolCall;

/// A tool with a fixed name and risk that returns a fixed text.
pub struct Fixed {
    pub name: &'static str,
    pub risk: RiskLevel,
    pub text: String,
}

#[async_trait]
impl Tool for Fixed {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "returns a fixed text"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn risk(&self) -> RiskLevel {
        self.risk
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        _: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::ok(self.text.clone()))
    }
}

pub fn fixed(name: &'static str, risk: RiskLevel, text: &str) -> Arc<dyn Tool> {
    Arc::new(Fixed {
        name,
        risk,
        text: text.to_string(),
    })
}

/// Sleeps for the given time, then succeeds.
pub struct Sleeper(pub Duration);

#[async_trait]
impl Tool for Sleeper {
    fn name(&self) -> &str {
        "sleeper"
    }
    fn description(&self) -> &str {
        "sleeps"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        _: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        tokio::time::sleep(self.0).await;
        Ok(ToolOutput::ok("woke up"))
    }
}

/// Panics when executed.
pub struct Panicker;

#[async_trait]
impl Tool for Panicker {
    fn name(&self) -> &str {
        "panicker"
    }
    fn description(&self) -> &str {
        "panics"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn risk(&self) -> RiskLevel {
        RiskLevel::ReadOnly
    }
    async fn execute(
        &self,
        _: serde_json::Value,
        _: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        panic!("boom")
    }
}

/// Answers with a fixed answer and counts how often it was asked.
pub struct Scripted {
    pub answer: ApprovalAnswer,
    pub asked: AtomicUsize,
    pub last: std::sync::Mutex<Option<ApprovalRequest>>,
}

impl Scripted {
    pub fn new(answer: ApprovalAnswer) -> Self {
        Self {
            answer,
            asked: AtomicUsize::new(0),
            last: std::sync::Mutex::new(None),
        }
    }
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Approver for Scripted {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.fetch_add(1, Ordering::SeqCst);
        *self.last.lock().unwrap() = Some(request.clone());
        self.answer
    }
}

pub fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments,
    }
}
