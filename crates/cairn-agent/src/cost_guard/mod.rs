//! The cost guard: a daily LLM budget and an hourly call limit around the provider.
//!
//! Peers check spending on the chat path only, so jobs, routines and
//! heartbeats spend unchecked. Here the guard wraps the provider itself
//! ([`GuardedProvider`]): every LLM call, whoever makes it, is admitted by
//! [`CostGuard::admit`] first and its cost recorded by [`CostGuard::finish`]
//! after. Refusals are [`cairn_llm::LlmError::CostLimit`], never a silent drop.
//!
//! - **Daily budget**: configured in cents, tracked in integer micro-dollars
//!   (the unit of `ChatResponse::cost_micros`) per UTC day; it resets when
//!   the UTC date changes. At 80% a warning is logged once per day (once
//!   across processes) and shown in [`CostStatus::warning`]. A cost is
//!   counted on the day the call ends.
//! - **Hourly limit**: calls admitted in a sliding one-hour window. A call is
//!   counted when admitted (whether it then succeeds or fails, so a failing
//!   loop is throttled too), so this limit is never overshot.
//! - **Fast path**: once today's budget is spent, an atomic flag refuses
//!   calls without taking a lock or asking the store until the UTC date changes.
//! - **Shared across processes** (a guard built by [`CostGuard::load`]): the
//!   store holds the truth. Admission is one store transaction that reads
//!   the day's total and the window and counts the call; a finished call adds
//!   its cost with an atomic increment. So the CLI, the daemon and several
//!   daemons on one database share one budget and one window. A call in
//!   flight reserves the day's dearest call so far: others are refused while
//!   spent + reservations reach the budget, so concurrent processes overshoot
//!   the budget by at most about one call (the first call of a day reserves
//!   nothing, as nothing is known of its price yet).
//! - **Store failures** never stop a call: admission falls back to this
//!   process's last view of the totals, and a cost that could not be added is
//!   retried with the next call.
//! - **Each agent's line**: every call is counted for an agent (`main`, or
//!   the one an [`AgentProvider`] names), whose spend of the day is kept
//!   beside the total. An agent given a share ([`CostGuard::set_agents`]) is
//!   refused once its spend (with its calls in flight) reaches it, as the
//!   whole budget is; the budget and the hourly limit still hold everyone.
//!
//! Architecture invariant: time comes only from the [`Clock`] given at
//! construction, never from the system directly.

mod agents;
mod limit;
mod provider;
mod shared;
mod state;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_core::config::CostConfig;
use cairn_store::{CostLimits, CostTotals, Store, StoreError};
use chrono::{DateTime, Datelike, NaiveDate, Utc};
use serde::Serialize;
use uuid::Uuid;

use agents::AgentLines;
use cairn_core::clock::Clock;
use shared::Shared;
use state::{Counters, reaches_warning};

pub use agents::{AgentCost, AgentProvider, current_agent};
pub use limit::{CostLimitError, format_dollars};
pub use provider::GuardedProvider;

/// The settings key the counters were kept under before they moved to
/// their own tables (migration 11 moves them and removes the key).
pub const STATE_KEY: &str = cairn_store::LEGACY_COST_KEY;

/// Why the guard could not be built from the store.
#[derive(Debug, thiserror::Error)]
pub enum CostGuardError {
    /// The store could not be read.
    #[error("cannot read the LLM cost counters: {0}")]
    Store(#[from] StoreError),
}

/// A snapshot of the guard for display (`cairn cost`, the gateway).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CostStatus {
    /// The UTC day the spend belongs to (today).
    pub date: NaiveDate,
    /// Spent today, in micro-dollars.
    pub spent_micros: u64,
    /// The daily budget in cents (`None`: unlimited).
    pub daily_budget_cents: Option<u64>,
    /// LLM calls in the last hour.
    pub hourly_calls: u64,
    /// Calls allowed per sliding hour (`None`: unlimited).
    pub hourly_limit: Option<u64>,
    /// At least 80% of the daily budget is spent.
    pub warning: bool,
    /// The daily budget is spent: calls are refused until 00:00 UTC.
    pub exceeded: bool,
    /// Each agent's line of the day: the configured agents (`main` first),
    /// then any other that spent today.
    pub agents: Vec<AgentCost>,
}

impl CostStatus {
    /// Whether the hourly limit currently refuses calls.
    pub fn hourly_limit_reached(&self) -> bool {
        self.hourly_limit.is_some_and(|l| self.hourly_calls >= l)
    }
}

/// An admitted call, to hand back to [`CostGuard::finish`] when it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallTicket {
    /// The call's row in the store (`None`: a guard in memory, or a store
    /// that could not be reached at admission).
    call_id: Option<Uuid>,
    /// The agent the call is counted for.
    agent: Arc<str>,
}

/// The limits as configured ([`CostGuard::set_limits`] replaces them).
#[derive(Debug, Clone, Copy)]
struct Configured {
    budget_micros: Option<u64>,
    budget_cents: Option<u64>,
    hourly_limit: Option<u64>,
}

impl Configured {
    fn from(config: &CostConfig) -> Self {
        Self {
            budget_micros: config.daily_budget_cents.map(limit::cents_to_micros),
            budget_cents: config.daily_budget_cents,
            hourly_limit: config.hourly_action_limit,
        }
    }
}

/// Enforces the daily budget and the hourly call limit; share it as `Arc`.
pub struct CostGuard {
    configured: Mutex<Configured>,
    clock: Arc<dyn Clock>,
    /// `None`: counters in memory only.
    shared: Option<Shared>,
    counters: Mutex<Counters>,
    /// Fast path: today's budget is spent (valid for `exceeded_day` only).
    exceeded: AtomicBool,
    /// Days since the common era of the day `exceeded` was set for.
    exceeded_day: AtomicI64,
    /// The last known spend, for the fast path's message.
    spent_seen: AtomicU64,
    /// The agents, their shares and their spend of the day.
    lines: Mutex<AgentLines>,
    /// Leak detection, attached once: every request's secrets are replaced.
    leaks: std::sync::OnceLock<crate::safety::leak::LeakGuard>,
}

impl std::fmt::Debug for CostGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let configured = self.configured();
        f.debug_struct("CostGuard")
            .field("budget_micros", &configured.budget_micros)
            .field("hourly_limit", &configured.hourly_limit)
            .field("persistent", &self.shared.is_some())
            .field("exceeded", &self.exceeded.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

fn zero_totals(day: NaiveDate) -> CostTotals {
    CostTotals {
        day,
        spent_micros: 0,
        reserved_micros: 0,
        hourly_calls: 0,
        warned: false,
    }
}

impl CostGuard {
    /// A guard whose counters live in memory only (tests, one-off runs).
    pub fn new(config: &CostConfig, clock: Arc<dyn Clock>) -> Self {
        let counters = Counters::new(clock.now());
        Self::build(config, clock, None, counters)
    }

    /// The agents whose lines [`CostGuard::status`] shows, each with its
    /// share of the daily budget in cents (`None`: the budget only); `main`
    /// is always one. Replaces the previous set.
    pub fn set_agents(&self, agents: Vec<(String, Option<u64>)>) {
        lock(&self.lines).configure(agents);
    }

    /// A guard on the counters `store` shares with every process using it.
    pub async fn load(
        store: Store,
        config: &CostConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, CostGuardError> {
        let now = clock.now();
        let totals = store.cost_totals(now).await?;
        let spent = store.agents_spend_on(now.date_naive()).await?;
        let shared = Shared {
            store,
            open: Mutex::new(VecDeque::new()),
            unrecorded: Mutex::new(Vec::new()),
            seen: Mutex::new(totals),
        };
        let guard = Self::build(config, clock, Some(shared), Counters::new(now));
        lock(&guard.lines).replace(
            now,
            spent
                .into_iter()
                .map(|a| (a.agent, a.spent_micros, a.calls)),
        );
        Ok(guard)
    }

    fn build(
        config: &CostConfig,
        clock: Arc<dyn Clock>,
        shared: Option<Shared>,
        counters: Counters,
    ) -> Self {
        let clock_day = clock.now().date_naive();
        let guard = Self {
            configured: Mutex::new(Configured::from(config)),
            clock,
            shared,
            counters: Mutex::new(counters),
            exceeded: AtomicBool::new(false),
            exceeded_day: AtomicI64::new(i64::MIN),
            spent_seen: AtomicU64::new(0),
            lines: Mutex::new(AgentLines::new(clock_day)),
            leaks: std::sync::OnceLock::new(),
        };
        guard.settle_seen();
        guard
    }

    /// Attaches leak detection: from then on every request any provider
    /// behind this guard sends has its secrets replaced by their names.
    pub fn attach_leaks(&self, leaks: crate::safety::leak::LeakGuard) {
        let _ = self.leaks.set(leaks);
    }

    /// The request as it may leave: `None` when it holds no secret.
    pub(crate) async fn redact(
        &self,
        request: &cairn_llm::ChatRequest,
        model: &str,
    ) -> Option<cairn_llm::ChatRequest> {
        let origin = crate::safety::leak::LeakOrigin {
            agent: Some(current_agent().to_string()),
            ..Default::default()
        };
        let messages = self
            .leaks
            .get()?
            .redact_messages(&request.messages, model, &origin)
            .await?;
        Some(cairn_llm::ChatRequest {
            messages,
            ..request.clone()
        })
    }

    /// Puts new limits in force (a configuration reload): the next call is
    /// judged by them, on the spend and calls already counted.
    pub fn set_limits(&self, config: &CostConfig) {
        *lock(&self.configured) = Configured::from(config);
        self.settle_seen();
    }

    /// The fast-path flag brought in line with the last totals seen.
    fn settle_seen(&self) {
        match &self.shared {
            Some(shared) => {
                let seen = lock(&shared.seen).clone();
                self.settle(seen.day, seen.spent_micros);
            }
            None => {
                let counters = self.lock();
                self.settle(counters.date, counters.spent_micros);
            }
        }
    }

    fn configured(&self) -> Configured {
        *lock(&self.configured)
    }

    fn limits(&self) -> CostLimits {
        let configured = self.configured();
        CostLimits {
            budget_micros: configured.budget_micros,
            hourly_limit: configured.hourly_limit,
        }
    }

    /// Whether a call of the agent in scope ([`current_agent`]) would be
    /// allowed now, without counting one.
    pub async fn check(&self) -> Result<(), CostLimitError> {
        self.gate(current_agent(), false).await.map(|_| ())
    }

    /// Admits one call of the agent in scope ([`current_agent`]) now and
    /// counts it in the hourly window, or refuses it. Follow with
    /// [`CostGuard::finish`] once the call ends.
    pub async fn admit(&self) -> Result<CallTicket, CostLimitError> {
        self.gate(current_agent(), true).await
    }

    /// [`CostGuard::check`] for `agent`.
    pub async fn check_as(&self, agent: &str) -> Result<(), CostLimitError> {
        self.gate(Arc::from(agent), false).await.map(|_| ())
    }

    /// [`CostGuard::admit`] for `agent`.
    pub async fn admit_as(&self, agent: &str) -> Result<CallTicket, CostLimitError> {
        self.gate(Arc::from(agent), true).await
    }

    /// Adds a finished call's cost (0 for a failed call) to today's spend,
    /// to its agent's, and to the spend of the model that `answered` (the
    /// dashboard's costs), and releases its reservation, in one write. A
    /// failed store write is logged, not returned: the call has happened,
    /// and the cost is retried with the next call.
    pub async fn finish(&self, ticket: CallTicket, cost_micros: u64, answered: Option<&str>) {
        let now = self.clock.now();
        lock(&self.lines).add(now, &ticket.agent, cost_micros, answered.is_some());
        let Some(shared) = &self.shared else {
            self.record_in_memory(cost_micros, now);
            return;
        };
        let totals = self
            .finish_shared(shared, ticket, cost_micros, answered, now)
            .await;
        self.after_spend(&totals).await;
    }

    /// Like [`CostGuard::finish`] for the oldest call admitted here and not
    /// yet finished (or, with none, a cost outside any admission, counted
    /// for the agent in scope).
    pub async fn record(&self, cost_micros: u64) {
        let open = self
            .shared
            .as_ref()
            .and_then(|shared| lock(&shared.open).pop_front());
        let ticket = match open {
            Some((id, agent)) => CallTicket {
                call_id: Some(id),
                agent,
            },
            None => CallTicket {
                call_id: None,
                agent: current_agent(),
            },
        };
        self.finish(ticket, cost_micros, None).await;
    }

    /// Warnings and the fast-path flag after the shared total moved.
    async fn after_spend(&self, totals: &CostTotals) {
        let Some(budget) = self.configured().budget_micros else {
            return;
        };
        let spent = totals.spent_micros;
        if reaches_warning(spent, budget) && !totals.warned {
            let first = match &self.shared {
                Some(shared) => shared
                    .store
                    .claim_cost_warning(totals.day)
                    .await
                    .unwrap_or(true),
                None => true,
            };
            if first {
                tracing::warn!(
                    spent = %format_dollars(spent),
                    budget = %format_dollars(budget),
                    "80% of today's LLM budget is spent (UTC day)"
                );
            }
        }
        let was_exceeded = self.exceeded.load(Ordering::Acquire);
        if spent >= budget && !was_exceeded {
            tracing::warn!(
                spent = %format_dollars(spent),
                budget = %format_dollars(budget),
                "today's LLM budget is spent; LLM calls are refused until 00:00 UTC"
            );
        }
        self.settle(totals.day, spent);
    }

    fn record_in_memory(&self, cost_micros: u64, now: DateTime<Utc>) {
        let mut warn = None;
        let mut reached = None;
        {
            let mut counters = self.lock();
            self.roll(&mut counters, now);
            counters.spent_micros = counters.spent_micros.saturating_add(cost_micros);
            if let Some(budget) = self.configured().budget_micros {
                let spent = counters.spent_micros;
                if !counters.warned && reaches_warning(spent, budget) {
                    counters.warned = true;
                    warn = Some((spent, budget));
                }
                let was_exceeded = self.exceeded.load(Ordering::Acquire);
                if spent >= budget && !was_exceeded {
                    reached = Some((spent, budget));
                }
            }
            self.settle(counters.date, counters.spent_micros);
        }
        if let Some((spent, budget)) = warn {
            tracing::warn!(
                spent = %format_dollars(spent),
                budget = %format_dollars(budget),
                "80% of today's LLM budget is spent (UTC day)"
            );
        }
        if let Some((spent, budget)) = reached {
            tracing::warn!(
                spent = %format_dollars(spent),
                budget = %format_dollars(budget),
                "today's LLM budget is spent; LLM calls are refused until 00:00 UTC"
            );
        }
    }

    /// A snapshot for display: this process's last view of the totals (see
    /// [`CostGuard::refresh`] for a fresh one).
    pub fn status(&self) -> CostStatus {
        let now = self.clock.now();
        let (date, spent, calls) = match &self.shared {
            Some(shared) => {
                let mut seen = lock(&shared.seen);
                roll_totals(&mut seen, now);
                (seen.day, seen.spent_micros, seen.hourly_calls)
            }
            None => {
                let mut counters = self.lock();
                self.roll(&mut counters, now);
                counters.prune(now);
                (counters.date, counters.spent_micros, counters.window_len())
            }
        };
        let configured = self.configured();
        CostStatus {
            date,
            spent_micros: spent,
            daily_budget_cents: configured.budget_cents,
            hourly_calls: calls,
            hourly_limit: configured.hourly_limit,
            warning: configured
                .budget_micros
                .is_some_and(|b| reaches_warning(spent, b)),
            exceeded: configured.budget_micros.is_some_and(|b| spent >= b),
            agents: lock(&self.lines).status(now),
        }
    }

    /// Reads the shared totals again (other processes' calls included) and
    /// returns the status.
    pub async fn refresh(&self) -> CostStatus {
        if let Some(shared) = &self.shared {
            let now = self.clock.now();
            match shared.store.cost_totals(now).await {
                Ok(totals) => {
                    self.settle(totals.day, totals.spent_micros);
                    *lock(&shared.seen) = totals;
                }
                Err(error) => tracing::warn!(%error, "could not read the shared LLM cost totals"),
            }
            match shared.store.agents_spend_on(now.date_naive()).await {
                Ok(rows) => lock(&self.lines).replace(
                    now,
                    rows.into_iter().map(|a| (a.agent, a.spent_micros, a.calls)),
                ),
                Err(error) => tracing::warn!(%error, "could not read each agent's LLM spend"),
            }
        }
        self.status()
    }

    async fn gate(&self, agent: Arc<str>, count: bool) -> Result<CallTicket, CostLimitError> {
        let now = self.clock.now();
        if let Some(refusal) = self.fast_refusal(now) {
            return Err(refusal);
        }
        match &self.shared {
            Some(shared) => self.gate_shared(shared, now, agent, count).await,
            None => self.gate_in_memory(now, agent, count),
        }
    }

    /// The refusal of `agent`'s call when its spend (`committed`: with its
    /// calls in flight) reached its share.
    fn over_share(&self, agent: &str, committed: u64) -> Option<CostLimitError> {
        let share = lock(&self.lines).share_micros(agent)?;
        (committed >= share).then(|| CostLimitError::AgentShare {
            agent: agent.to_string(),
            spent_micros: committed,
            share_micros: share,
        })
    }

    fn gate_in_memory(
        &self,
        now: DateTime<Utc>,
        agent: Arc<str>,
        count: bool,
    ) -> Result<CallTicket, CostLimitError> {
        let configured = self.configured();
        let mut counters = self.lock();
        self.roll(&mut counters, now);
        if let Some(budget) = configured.budget_micros
            && counters.spent_micros >= budget
        {
            self.settle(counters.date, counters.spent_micros);
            return Err(CostLimitError::DailyBudget {
                spent_micros: counters.spent_micros,
                budget_micros: budget,
            });
        }
        let spent = lock(&self.lines).spent(now, &agent);
        if let Some(refusal) = self.over_share(&agent, spent) {
            return Err(refusal);
        }
        counters.prune(now);
        if let Some(limit) = configured.hourly_limit
            && counters.window_len() >= limit
        {
            return Err(CostLimitError::HourlyLimit {
                limit,
                next_allowed: counters.next_slot(limit),
            });
        }
        if count {
            counters.push_call(now);
        }
        Ok(CallTicket {
            call_id: None,
            agent,
        })
    }

    /// The lock-free refusal once today's budget is known to be spent.
    fn fast_refusal(&self, now: DateTime<Utc>) -> Option<CostLimitError> {
        if !self.exceeded.load(Ordering::Acquire) {
            return None;
        }
        if self.exceeded_day.load(Ordering::Relaxed) != day_number(now.date_naive()) {
            // Another day: the slow path reads the new day and clears the flag.
            return None;
        }
        Some(CostLimitError::DailyBudget {
            spent_micros: self.spent_seen.load(Ordering::Relaxed),
            budget_micros: self.configured().budget_micros.unwrap_or(0),
        })
    }

    fn roll(&self, counters: &mut Counters, now: DateTime<Utc>) {
        if counters.roll_to(now) {
            self.settle(counters.date, counters.spent_micros);
        }
    }

    /// Brings the fast-path atomics in line with `spent` on `day`. Spend
    /// only grows within a day, so a flag set here stays true all day
    /// whatever other processes do.
    fn settle(&self, day: NaiveDate, spent: u64) {
        self.spent_seen.store(spent, Ordering::Relaxed);
        let over = self.configured().budget_micros.is_some_and(|b| spent >= b);
        if over {
            self.exceeded_day.store(day_number(day), Ordering::Relaxed);
        }
        // Release: a reader that sees the flag also sees the day above.
        self.exceeded.store(over, Ordering::Release);
    }

    fn lock(&self) -> MutexGuard<'_, Counters> {
        lock(&self.counters)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data stays consistent even if a holder panicked: keep using it.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Another UTC day: the totals seen belong to yesterday.
fn roll_totals(totals: &mut CostTotals, now: DateTime<Utc>) {
    if totals.day != now.date_naive() {
        let calls = totals.hourly_calls;
        *totals = zero_totals(now.date_naive());
        // The window slides across midnight.
        totals.hourly_calls = calls;
    }
}

fn day_number(date: NaiveDate) -> i64 {
    i64::from(date.num_days_from_ce())
}

#[cfg(test)]
mod tests;
