//! Who answers when the policy gate says "ask": the [`Approver`] trait, what
//! it is asked ([`ApprovalRequest`]) and answers ([`ApprovalAnswer`]), the two
//! approvers that answer by rule ([`DenyAll`], [`AutoApprove`]), and the one
//! rule that depends on who is there: a call only a person may approve
//! ([`crate::tools::CallPlan::needs_person`]) is refused where
//! [`Approver::person_present`] says nobody is.

use async_trait::async_trait;

use crate::policy::RiskLevel;

/// A user's answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Run this call.
    Yes,
    /// Do not run it.
    No,
    /// Run it, and stop asking about this tool for the rest of the session.
    Always,
    /// Nobody answered within this time; the call is not run.
    Expired(std::time::Duration),
    /// Nobody could be asked (an API client, a webhook or a routine with
    /// no approval channel); the call is not run.
    Unavailable,
}

/// What the user is asked to approve.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The session the call belongs to.
    pub session_id: String,
    /// The provider's call id.
    pub call_id: String,
    /// The canonical tool name.
    pub tool: String,
    /// The tool's risk level.
    pub risk: RiskLevel,
    /// The arguments, with credentials scrubbed.
    pub arguments: serde_json::Value,
    /// A one-line summary of the call for a prompt, credentials scrubbed.
    pub summary: String,
}

impl ApprovalRequest {
    /// The request for `call` of the tool `tool` (canonical name), judged
    /// `risk`: its arguments scrubbed of credentials, and summed up on one line.
    pub(crate) fn for_call(
        call: &cairn_core::chat::ToolCall,
        tool: &str,
        risk: RiskLevel,
        args: &serde_json::Value,
        session_id: &str,
    ) -> Self {
        let args_text = crate::safety::scrub(&args.to_string()).into_owned();
        let arguments = serde_json::from_str(&args_text)
            .unwrap_or(serde_json::Value::String(args_text.clone()));
        let short: String = args_text.chars().take(200).collect();
        let ellipsis = if short.len() < args_text.len() {
            "…"
        } else {
            ""
        };
        Self {
            session_id: session_id.to_string(),
            call_id: call.id.clone(),
            tool: tool.to_string(),
            risk,
            arguments,
            summary: format!("{tool} {short}{ellipsis}"),
        }
    }
}

/// Answers approval requests (a terminal prompt, a WebSocket round-trip, a policy).
#[async_trait]
pub trait Approver: Send + Sync {
    /// Decides whether a pending call may run.
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer;

    /// Whether a person answers this approver's requests (a terminal, a
    /// WebSocket client, a later chat message). Approvers that answer by a
    /// rule (deny-all for `/v1` and `/webhook`, a routine's or job's
    /// `allowed_tools`, auto-approval of background work) say no, the
    /// default: calls only a person may approve ([`crate::tools::CallPlan::needs_person`])
    /// are then refused, whatever the autonomy.
    fn person_present(&self) -> bool {
        false
    }
}

/// Asks nobody: every call that needs approval is not run, the model told
/// that no person was there to approve it; for non-interactive runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DenyAll;

#[async_trait]
impl Approver for DenyAll {
    async fn approve(&self, _: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Unavailable
    }
}

/// Approves everything once (never "always"); for trusted non-interactive runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoApprove;

#[async_trait]
impl Approver for AutoApprove {
    async fn approve(&self, _: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Yes
    }
}

/// What the model is told of a call not approved (`answer` is neither
/// yes nor always): who said no, or that nobody did.
pub(crate) fn not_approved(answer: ApprovalAnswer, tool: &str) -> String {
    match answer {
        ApprovalAnswer::Expired(waited) => format!(
            "`{tool}` was not run: nobody answered the approval request within {}; ask the user whether to run it",
            cairn_core::duration::format(waited)
        ),
        ApprovalAnswer::Unavailable => format!(
            "`{tool}` needs a person's approval and nobody was available to give it (this turn came from an API client, a webhook, a routine or a job), so it was not run; do not retry it, say what you wanted to do so the person can run it or allow it"
        ),
        _ => format!(
            "the user declined to run `{tool}`; do not retry it, ask the user how to proceed instead"
        ),
    }
}

/// Why a call only a person may approve was refused where nobody can.
pub(crate) fn nobody_to_approve(tool: &str) -> String {
    format!(
        "`{tool}` changes what runs on the person's behalf (their routines, schedules or watchers), \
         which only the person may approve, and nobody can approve here (an API client, a webhook, \
         a routine run, a job or background work), so it was not run. Do not retry it; tell the person \
         to make this change in a conversation (`cairn chat`, the WebSocket chat) or with `cairn routine`."
    )
}
