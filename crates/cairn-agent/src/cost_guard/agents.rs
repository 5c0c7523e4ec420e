//! Each agent's cost line: which agent a call is counted for, and what each
//! agent spent today against its share of the budget.
//!
//! The provider chain is built once and shared by every agent (a reload
//! replaces it whole, guard included), so an agent is named per call rather
//! than per provider: [`AgentProvider`] wraps the shared chain and runs each
//! of its calls in the agent's scope, which the [`super::GuardedProvider`]
//! inside reads ([`current_agent`]). Everything it delegates (a child turn
//! on the same provider) is counted on the same line. A call made outside
//! any scope is `main`'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use cairn_llm::{ChatRequest, ChatResponse, LlmError, LlmProvider, ModelInfo, ResponseStream};
use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use super::limit::cents_to_micros;
use crate::agents::MAIN;

tokio::task_local! {
    /// The agent the calls of this scope are counted for.
    static AGENT: Arc<str>;
}

/// The agent the current call is counted for: the one an enclosing
/// [`AgentProvider`] names, else `main`.
pub fn current_agent() -> Arc<str> {
    AGENT
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::from(MAIN))
}

/// A provider as one agent uses it: every call is counted on the agent's
/// cost line and held to its share by the cost guard inside `inner` (the
/// shared chain, e.g. a reloadable provider around a
/// [`super::GuardedProvider`]).
#[derive(Debug, Clone)]
pub struct AgentProvider {
    inner: Arc<dyn LlmProvider>,
    agent: Arc<str>,
}

impl AgentProvider {
    /// `inner`'s calls, counted for `agent`.
    pub fn new(inner: Arc<dyn LlmProvider>, agent: &str) -> Self {
        Self {
            inner,
            agent: Arc::from(agent),
        }
    }

    /// The agent the calls are counted for.
    pub fn agent(&self) -> &str {
        &self.agent
    }
}

#[async_trait]
impl LlmProvider for AgentProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn context_window(&self) -> Option<u32> {
        self.inner.context_window()
    }

    fn vision(&self) -> bool {
        self.inner.vision()
    }

    /// The pinned inner provider, still counted for the agent.
    fn current(&self) -> Option<Arc<dyn LlmProvider>> {
        self.inner.current().map(|inner| {
            Arc::new(Self {
                inner,
                agent: Arc::clone(&self.agent),
            }) as Arc<dyn LlmProvider>
        })
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, LlmError> {
        self.inner.list_models().await
    }

    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        AGENT
            .scope(Arc::clone(&self.agent), self.inner.complete(request))
            .await
    }

    /// Admission happens when the stream is opened, in the scope; the
    /// guard's ticket remembers the agent for the cost at its end.
    async fn stream(&self, request: &ChatRequest) -> Result<ResponseStream, LlmError> {
        AGENT
            .scope(Arc::clone(&self.agent), self.inner.stream(request))
            .await
    }
}

/// One agent's line of the day, for display (`cairn cost`, the dashboard).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentCost {
    /// The agent's id.
    pub id: String,
    /// Spent today (UTC), in micro-dollars.
    pub spent_micros: u64,
    /// Its answered calls today.
    pub calls: u64,
    /// Its share of the daily budget in cents (`None`: the global budget only).
    pub daily_budget_cents: Option<u64>,
    /// Its share is spent: its calls are refused until 00:00 UTC.
    pub exceeded: bool,
}

/// The configured agents and their shares, and what each spent today as
/// this process last saw it (for a guard in memory, the truth).
#[derive(Debug)]
pub(super) struct AgentLines {
    /// Each configured agent and its share in cents, `main` first.
    configured: Vec<(String, Option<u64>)>,
    /// The UTC day of `spent`.
    day: NaiveDate,
    /// Spend (micro-dollars) and answered calls of each agent on `day`.
    spent: BTreeMap<String, (u64, u64)>,
}

impl AgentLines {
    /// `main` alone, nothing spent on `day`.
    pub fn new(day: NaiveDate) -> Self {
        Self {
            configured: vec![(MAIN.to_string(), None)],
            day,
            spent: BTreeMap::new(),
        }
    }

    /// The agents to show and hold to their shares (`main` is always one).
    pub fn configure(&mut self, agents: Vec<(String, Option<u64>)>) {
        let mut configured = vec![(MAIN.to_string(), None)];
        for (id, share) in agents {
            match configured.iter_mut().find(|(known, _)| *known == id) {
                Some(entry) => entry.1 = share,
                None => configured.push((id, share)),
            }
        }
        self.configured = configured;
    }

    /// `agent`'s share in micro-dollars.
    pub fn share_micros(&self, agent: &str) -> Option<u64> {
        self.configured
            .iter()
            .find(|(id, _)| id == agent)
            .and_then(|(_, share)| *share)
            .map(cents_to_micros)
    }

    fn roll(&mut self, now: DateTime<Utc>) {
        let today = now.date_naive();
        if self.day != today {
            self.day = today;
            self.spent.clear();
        }
    }

    /// What `agent` spent on `now`'s day.
    pub fn spent(&mut self, now: DateTime<Utc>, agent: &str) -> u64 {
        self.roll(now);
        self.spent.get(agent).map_or(0, |(spent, _)| *spent)
    }

    /// `agent`'s spend and calls on `now`'s day, as read from the store.
    pub fn set(&mut self, now: DateTime<Utc>, agent: &str, spent: u64, calls: u64) {
        self.roll(now);
        self.spent.insert(agent.to_string(), (spent, calls));
    }

    /// Adds a finished call of `agent` to `now`'s day.
    pub fn add(&mut self, now: DateTime<Utc>, agent: &str, cost: u64, answered: bool) {
        self.roll(now);
        let entry = self.spent.entry(agent.to_string()).or_default();
        entry.0 = entry.0.saturating_add(cost);
        entry.1 = entry.1.saturating_add(u64::from(answered));
    }

    /// Every agent's spend of `day` (`now`'s), as read from the store.
    pub fn replace(
        &mut self,
        now: DateTime<Utc>,
        rows: impl IntoIterator<Item = (String, u64, u64)>,
    ) {
        self.roll(now);
        self.spent = rows
            .into_iter()
            .map(|(agent, spent, calls)| (agent, (spent, calls)))
            .collect();
    }

    /// The configured agents' lines, then those of any other agent that
    /// spent today (one since removed from the configuration).
    pub fn status(&mut self, now: DateTime<Utc>) -> Vec<AgentCost> {
        self.roll(now);
        let line = |id: &str, share: Option<u64>| {
            let (spent, calls) = self.spent.get(id).copied().unwrap_or_default();
            AgentCost {
                id: id.to_string(),
                spent_micros: spent,
                calls,
                daily_budget_cents: share,
                exceeded: share.is_some_and(|cents| spent >= cents_to_micros(cents)),
            }
        };
        let mut lines: Vec<AgentCost> = self
            .configured
            .iter()
            .map(|(id, share)| line(id, *share))
            .collect();
        for id in self.spent.keys() {
            if !self.configured.iter().any(|(known, _)| known == id) {
                lines.push(line(id, None));
            }
        }
        lines
    }
}
