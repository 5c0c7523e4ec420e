//! The approver of an unattended run (a routine's `tool_call`, `full_job`
//! or an agent's turn): the routine's `allowed_tools` are approved, the
//! owner is asked about the rest at the approval desk when there is one,
//! and what nobody approved is declined and remembered for the run's
//! outcome.

use std::sync::Mutex;

use async_trait::async_trait;
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver, ToolRunner};

use crate::inbound::desk::{ApprovalDesk, DeskApprover};

/// The approver of an unattended run: yes for the routine's `allowed_tools`,
/// no for the rest, remembering what it declined.
#[derive(Debug)]
pub struct Unattended {
    allowed: Vec<String>,
    declined: Mutex<Vec<String>>,
    /// Asks the owner about the others (`agent.approval_channel`).
    desk: Option<DeskApprover>,
}

impl Unattended {
    /// Approves these tools (aliases resolved through the runner's registry).
    pub fn new(runner: &ToolRunner, allowed_tools: &[String]) -> Self {
        let registry = runner.registry();
        Self {
            allowed: allowed_tools
                .iter()
                .map(|t| registry.resolve(t).unwrap_or(t).to_string())
                .collect(),
            declined: Mutex::new(Vec::new()),
            desk: None,
        }
    }

    /// Asks the owner at `desk` about the tools not allowed, labelled with
    /// the routine `name`.
    #[must_use]
    pub fn asking(mut self, desk: Option<&ApprovalDesk>, name: &str) -> Self {
        self.desk = desk.map(|d| d.approver(format!("routine {name}")));
        self
    }

    /// The tools declined so far, once each.
    pub fn declined(&self) -> Vec<String> {
        self.declined
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[async_trait]
impl Approver for Unattended {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        if self.allowed.contains(&request.tool) {
            return ApprovalAnswer::Yes;
        }
        let answer = match &self.desk {
            Some(desk) => desk.approve(request).await,
            None => ApprovalAnswer::Unavailable,
        };
        if !matches!(answer, ApprovalAnswer::Yes | ApprovalAnswer::Always) {
            let mut declined = self.declined.lock().unwrap_or_else(|e| e.into_inner());
            if !declined.contains(&request.tool) {
                declined.push(request.tool.clone());
            }
        }
        answer
    }

    fn person_present(&self) -> bool {
        self.desk.as_ref().is_some_and(Approver::person_present)
    }
}
