//! The approval desk (`agent.approval_channel`): where the tool calls of
//! turns nobody attends (`/v1`, webhooks, routines) are put to the owner,
//! with buttons in their own chat of the channel it names, and wait up to
//! `agent.approval_timeout_secs` for an answer.
//!
//! The channel may be stopped, restarted or changed by a reload, so the
//! desk is a slot the inbound channels fill ([`ApprovalDesk::set`]); with
//! nobody there, a call is answered [`ApprovalAnswer::Unavailable`] and the
//! model is told that no person could approve it (never that the user
//! declined).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_agent::runner::{ApprovalAnswer, ApprovalRequest, Approver};
use cairn_core::live::Live;

use super::{Approvals, Conversation, ask_with_buttons};

/// The owner's chat on the approval channel, and the approvals its button
/// presses answer.
#[derive(Clone)]
pub struct Desk {
    /// The owner's chat.
    pub conversation: Arc<dyn Conversation>,
    /// The channel's waiting approvals.
    pub approvals: Approvals,
}

/// Where unattended turns ask for approvals; clones share the slot.
#[derive(Clone)]
pub struct ApprovalDesk {
    slot: Live<Option<Desk>>,
    timeout: Duration,
}

impl std::fmt::Debug for ApprovalDesk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalDesk")
            .field("open", &self.slot.get().is_some())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ApprovalDesk {
    /// A desk with nobody at it yet, whose requests wait `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            slot: Live::new(Arc::new(None)),
            timeout,
        }
    }

    /// Puts `desk` in force (`None`: nobody to ask).
    pub fn set(&self, desk: Option<Desk>) {
        self.slot.set(Arc::new(desk));
    }

    /// Whether a channel is there to ask.
    pub fn is_open(&self) -> bool {
        self.slot.get().is_some()
    }

    /// The approver of turns from `source` (`an API client`, `webhook
    /// hooks/x`, `routine morning`), which labels each request with it.
    pub fn approver(&self, source: impl Into<String>) -> DeskApprover {
        DeskApprover {
            desk: self.clone(),
            source: source.into(),
        }
    }
}

/// Asks at the desk on behalf of one source of turns.
#[derive(Debug, Clone)]
pub struct DeskApprover {
    desk: ApprovalDesk,
    source: String,
}

#[async_trait]
impl Approver for DeskApprover {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let Some(desk) = (*self.desk.slot.get()).clone() else {
            return ApprovalAnswer::Unavailable;
        };
        let mut labelled = request.clone();
        labelled.summary = format!("[{}] {}", self.source, request.summary);
        let conversation = desk.conversation.as_ref();
        ask_with_buttons(conversation, &desk.approvals, &labelled, self.desk.timeout).await
    }

    fn person_present(&self) -> bool {
        self.desk.is_open()
    }
}
