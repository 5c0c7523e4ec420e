//! What a turn lends the turns it starts (sub-agents, `agent_delegate`):
//! its loop, its approver, its place in the delegation tree and its budget.
//!
//! Each turn makes one [`ParentTurn`] and puts it in the context of its
//! tool calls ([`ToolContext::parent`](crate::tools::ToolContext::parent)).
//! A child turn runs on the parent's loop (so on the parent's provider,
//! whose spend is the parent's), and its approval requests travel up a
//! channel the parent's loop answers with its own approver while the tool
//! calls of that step run: the same person, through the same channel,
//! asked one question at a time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::AgentLoop;
use crate::approval::{ApprovalAnswer, ApprovalRequest, Approver};
use crate::cost_guard::format_dollars;

/// A child's approval request on its way to the parent's approver.
pub(super) struct Ask {
    pub(super) request: ApprovalRequest,
    pub(super) reply: oneshot::Sender<ApprovalAnswer>,
}

/// The turn a tool call runs in, as the tools that start turns of their
/// own under it (`agent_delegate`, `job_subtasks`) need it.
pub struct ParentTurn {
    agent: AgentLoop,
    asks: mpsc::UnboundedSender<Ask>,
    person_present: bool,
    depth: u32,
    budget: Arc<Budget>,
    children: OnceLock<Arc<Semaphore>>,
}

impl std::fmt::Debug for ParentTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParentTurn")
            .field("depth", &self.depth)
            .field("person_present", &self.person_present)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl ParentTurn {
    pub(super) fn new(
        agent: AgentLoop,
        asks: mpsc::UnboundedSender<Ask>,
        person_present: bool,
        depth: u32,
        budget: Arc<Budget>,
    ) -> Self {
        Self {
            agent,
            asks,
            person_present,
            depth,
            budget,
            children: OnceLock::new(),
        }
    }

    /// The loop running the turn (pinned: the provider, tools and policy
    /// the turn started with).
    pub fn agent(&self) -> &AgentLoop {
        &self.agent
    }

    /// How deep the turn is: 0 for a person's, a job's or a routine's own
    /// turn, 1 for a sub-agent's, 2 for a sub-agent's sub-agent.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// What the turn (with its children) spends, and its cap.
    pub fn budget(&self) -> &Arc<Budget> {
        &self.budget
    }

    /// The slots the turn's children share (`max` of them, fixed by the
    /// first caller): further children of the same turn wait for one.
    pub fn child_slots(&self, max: usize) -> Arc<Semaphore> {
        Arc::clone(
            self.children
                .get_or_init(|| Arc::new(Semaphore::new(max.max(1)))),
        )
    }

    /// An approver for a child: its requests, labelled with `label`, are
    /// answered by this turn's approver.
    pub fn approver_for(&self, label: &str) -> Arc<dyn Approver> {
        Arc::new(Forward {
            asks: self.asks.clone(),
            label: label.to_string(),
            person_present: self.person_present,
        })
    }
}

/// A child's approver: asks the parent's, through the parent's loop.
struct Forward {
    asks: mpsc::UnboundedSender<Ask>,
    label: String,
    person_present: bool,
}

#[async_trait]
impl Approver for Forward {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        let mut request = request.clone();
        // Every channel shows the summary: that is where the person sees whose call it is.
        request.summary = format!("[{}] {}", self.label, request.summary);
        let (reply, answer) = oneshot::channel();
        if self.asks.send(Ask { request, reply }).is_err() {
            // The parent's turn is over: nobody is left to ask.
            return ApprovalAnswer::No;
        }
        answer.await.unwrap_or(ApprovalAnswer::No)
    }

    fn person_present(&self) -> bool {
        self.person_present
    }
}

/// What a turn and the turns below it spent, against an optional cap; a
/// child's budget counts against each of its ancestors' too.
#[derive(Debug, Default)]
pub struct Budget {
    cap_micros: Option<u64>,
    spent_micros: AtomicU64,
    parent: Option<Arc<Budget>>,
}

impl Budget {
    /// A budget capped at `cap_micros` (none: no cap of its own) inside `parent`'s.
    pub fn new(cap_micros: Option<u64>, parent: Option<Arc<Budget>>) -> Self {
        Self {
            cap_micros,
            spent_micros: AtomicU64::new(0),
            parent,
        }
    }

    /// Counts a model call's cost here and in every ancestor.
    pub fn charge(&self, micros: u64) {
        self.spent_micros.fetch_add(micros, Ordering::SeqCst);
        if let Some(parent) = &self.parent {
            parent.charge(micros);
        }
    }

    /// Spent here (this turn and its children), in micro-dollars.
    pub fn spent_micros(&self) -> u64 {
        self.spent_micros.load(Ordering::SeqCst)
    }

    /// What is left before the nearest cap, if any cap applies.
    pub fn left_micros(&self) -> Option<u64> {
        let own = self
            .cap_micros
            .map(|cap| cap.saturating_sub(self.spent_micros()));
        let above = self.parent.as_ref().and_then(|p| p.left_micros());
        match (own, above) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Why no further model call may be made: a cap here or above is spent.
    pub fn exhausted(&self) -> Option<String> {
        if let Some(cap) = self.cap_micros {
            let spent = self.spent_micros();
            if spent >= cap {
                return Some(format!(
                    "the budget of {} is spent ({} so far)",
                    format_dollars(cap),
                    format_dollars(spent)
                ));
            }
        }
        self.parent.as_ref().and_then(|p| p.exhausted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_s_spend_counts_against_its_ancestors() {
        let top = Arc::new(Budget::new(Some(100), None));
        let child = Arc::new(Budget::new(Some(80), Some(Arc::clone(&top))));
        let grandchild = Budget::new(None, Some(Arc::clone(&child)));
        grandchild.charge(30);
        assert_eq!(
            (
                grandchild.spent_micros(),
                child.spent_micros(),
                top.spent_micros()
            ),
            (30, 30, 30)
        );
        assert_eq!(grandchild.left_micros(), Some(50));
        top.charge(60);
        assert_eq!(
            grandchild.left_micros(),
            Some(10),
            "the top's cap is nearer"
        );
        assert!(grandchild.exhausted().is_none());
        child.charge(50);
        let why = grandchild.exhausted().unwrap();
        assert!(why.contains("$0.00008"), "{why}");
        assert!(Budget::default().exhausted().is_none());
        assert_eq!(Budget::default().left_micros(), None);
    }
}
