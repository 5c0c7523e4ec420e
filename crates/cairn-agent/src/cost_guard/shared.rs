//! The guard on the counters the store shares with every process: admission
//! as one store transaction, costs written as calls finish (those the store
//! could not take retried with the next), and this process's last view of
//! the totals when the store cannot answer.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use cairn_store::{AgentShare, CostTotals, LlmAdmission, Store, StoreError};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{CallTicket, CostGuard, CostLimitError, lock, roll_totals};

/// The shared counters' state as this process last saw them.
pub(super) struct Shared {
    pub(super) store: Store,
    /// Calls admitted here and not yet finished, oldest first, with their
    /// agents (for [`CostGuard::record`]).
    pub(super) open: Mutex<VecDeque<(Uuid, Arc<str>)>>,
    /// Costs the store could not take yet; added with the next call.
    pub(super) unrecorded: Mutex<Vec<Unrecorded>>,
    /// The totals as last read or written.
    pub(super) seen: Mutex<CostTotals>,
}

/// A finished call's cost the store could not take yet.
pub(super) struct Unrecorded {
    pub(super) call_id: Option<Uuid>,
    pub(super) agent: Arc<str>,
    pub(super) cost: u64,
    /// The model that answered, for its spend of the day.
    pub(super) answered: Option<String>,
}

impl CostGuard {
    /// The shared part of [`CostGuard::finish`]: this call's cost and any
    /// the store could not take before, written; returns the totals after.
    pub(super) async fn finish_shared(
        &self,
        shared: &Shared,
        ticket: CallTicket,
        cost_micros: u64,
        answered: Option<&str>,
        now: DateTime<Utc>,
    ) -> CostTotals {
        if let Some(id) = ticket.call_id {
            lock(&shared.open).retain(|(open, _)| *open != id);
        }
        let mut pending = std::mem::take(&mut *lock(&shared.unrecorded));
        pending.push(Unrecorded {
            call_id: ticket.call_id,
            agent: ticket.agent,
            cost: cost_micros,
            answered: answered.map(str::to_string),
        });
        let mut latest = None;
        for call in pending {
            let (cost, answered) = (call.cost, call.answered.as_deref());
            let written = match call.call_id {
                Some(id) => {
                    (shared.store)
                        .finish_llm_call(id, &call.agent, cost, answered, now)
                        .await
                }
                None => add_unadmitted(shared, &call, now).await,
            };
            match written {
                Ok(totals) => latest = Some(totals),
                Err(error) => {
                    tracing::warn!(%error, "could not add an LLM call's cost to the shared total; the next call retries");
                    lock(&shared.unrecorded).push(call);
                    let mut seen = lock(&shared.seen);
                    roll_totals(&mut seen, now);
                    seen.spent_micros = seen.spent_micros.saturating_add(cost);
                }
            }
        }
        match latest {
            Some(totals) => {
                *lock(&shared.seen) = totals.clone();
                totals
            }
            None => lock(&shared.seen).clone(),
        }
    }

    /// Admission by the store's counters, in one transaction: the budget,
    /// the agent's share, the hourly limit.
    pub(super) async fn gate_shared(
        &self,
        shared: &Shared,
        now: DateTime<Utc>,
        agent: Arc<str>,
        count: bool,
    ) -> Result<CallTicket, CostLimitError> {
        let share = AgentShare {
            agent: &agent,
            budget_micros: lock(&self.lines).share_micros(&agent),
        };
        let admission = match shared
            .store
            .admit_agent_llm_call(now, self.limits(), share, count)
            .await
        {
            Ok(admission) => admission,
            Err(error) => {
                tracing::warn!(%error, "could not reach the shared LLM cost totals; judging by this process's last view");
                return self.gate_on_seen(shared, now, agent);
            }
        };
        match admission {
            LlmAdmission::Admitted {
                call_id,
                mut totals,
                agent: line,
            } => {
                self.settle(totals.day, totals.spent_micros);
                lock(&self.lines).set(now, &agent, line.spent_micros, line.calls);
                if let Some(id) = call_id {
                    totals.hourly_calls = totals.hourly_calls.saturating_add(1);
                    lock(&shared.open).push_back((id, Arc::clone(&agent)));
                }
                *lock(&shared.seen) = totals;
                Ok(CallTicket { call_id, agent })
            }
            LlmAdmission::OverShare {
                totals,
                agent: line,
            } => {
                self.settle(totals.day, totals.spent_micros);
                *lock(&shared.seen) = totals;
                lock(&self.lines).set(now, &agent, line.spent_micros, line.calls);
                let committed = line.spent_micros.saturating_add(line.reserved_micros);
                Err(CostLimitError::AgentShare {
                    agent: agent.to_string(),
                    spent_micros: committed,
                    share_micros: share.budget_micros.unwrap_or(0),
                })
            }
            LlmAdmission::OverBudget { totals } => {
                self.settle(totals.day, totals.spent_micros);
                let committed = totals.spent_micros.saturating_add(totals.reserved_micros);
                *lock(&shared.seen) = totals;
                Err(CostLimitError::DailyBudget {
                    spent_micros: committed,
                    budget_micros: self.configured().budget_micros.unwrap_or(0),
                })
            }
            LlmAdmission::HourlyLimit {
                totals,
                next_allowed,
            } => {
                self.settle(totals.day, totals.spent_micros);
                *lock(&shared.seen) = totals;
                Err(CostLimitError::HourlyLimit {
                    limit: self.configured().hourly_limit.unwrap_or(0),
                    next_allowed,
                })
            }
        }
    }

    /// Admission by the last totals seen, when the store cannot answer.
    pub(super) fn gate_on_seen(
        &self,
        shared: &Shared,
        now: DateTime<Utc>,
        agent: Arc<str>,
    ) -> Result<CallTicket, CostLimitError> {
        let mut seen = lock(&shared.seen);
        roll_totals(&mut seen, now);
        if let Some(budget) = self.configured().budget_micros
            && seen.spent_micros >= budget
        {
            return Err(CostLimitError::DailyBudget {
                spent_micros: seen.spent_micros,
                budget_micros: budget,
            });
        }
        drop(seen);
        let spent = lock(&self.lines).spent(now, &agent);
        if let Some(refusal) = self.over_share(&agent, spent) {
            return Err(refusal);
        }
        Ok(CallTicket {
            call_id: None,
            agent,
        })
    }
}

/// The cost of a call admitted while the store could not answer
/// (rare): the budget's total first (what limits calls), then the
/// agent's and the model's spend, each a write of its own, logged if it
/// fails.
async fn add_unadmitted(
    shared: &Shared,
    call: &Unrecorded,
    now: DateTime<Utc>,
) -> Result<CostTotals, StoreError> {
    let (cost, answered) = (call.cost, call.answered.as_deref());
    let written = shared.store.add_llm_spend(cost, now).await?;
    let agent = &*call.agent;
    if let Err(error) = shared
        .store
        .add_agent_spend(agent, cost, answered.is_some(), now)
        .await
    {
        tracing::warn!(%error, agent, "could not add an LLM call's cost to its agent's daily spend");
    }
    if let Some(model) = answered
        && let Err(error) = shared.store.add_model_spend(model, cost, now).await
    {
        tracing::warn!(%error, model, "could not add an LLM call's cost to its model's daily spend");
    }
    Ok(written)
}
