//! The cost guard: a daily LLM budget and an hourly call limit around the provider.
//!
//! Peers check spending on the chat path only, so jobs, routines and
//! heartbeats spend unchecked. Here the guard wraps the provider itself
//! ([`GuardedProvider`]): every LLM call, whoever makes it, is admitted by
//! [`CostGuard::admit`] first and its cost recorded by [`CostGuard::record`]
//! after. Refusals are [`cairn_llm::LlmError::CostLimit`], never a silent drop.
//!
//! - **Daily budget**: configured in cents, tracked in integer micro-dollars
//!   (the unit of `ChatResponse::cost_micros`) per UTC day; it resets when
//!   the UTC date changes. At 80% a warning is logged once per day and shown
//!   in [`CostStatus::warning`]. A cost is counted on the day the call ends.
//! - **Hourly limit**: calls admitted in a sliding one-hour window. A call is
//!   counted when admitted (whether it then succeeds or fails, so a failing
//!   loop is throttled too), so this limit is never overshot.
//! - **Fast path**: once today's budget is spent, an atomic flag refuses
//!   calls without taking the lock until the UTC date changes.
//! - **Persistence**: the day's spend and the window's call times live in the
//!   store's settings table under [`STATE_KEY`], written after each recorded
//!   call, so a restart neither resets the day's spend nor the window.
//!
//! Concurrency: admission checks the budget and the cost arrives only when
//! the call ends, so calls already in flight when the budget is reached
//! still complete and may overshoot it by their own cost. One process owns
//! the counters; processes sharing a database overwrite each other's.
//!
//! Architecture invariant: time comes only from the [`Clock`] given at
//! construction, never from the system directly.

mod limit;
mod provider;
mod state;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_core::config::CostConfig;
use cairn_store::{Store, StoreError};
use chrono::{DateTime, Datelike, NaiveDate, Utc};
use serde::Serialize;

use cairn_core::clock::Clock;
use state::{Counters, Stored, reaches_warning};

pub use limit::{CostLimitError, format_dollars};
pub use provider::GuardedProvider;

/// The settings key the counters are stored under.
pub const STATE_KEY: &str = "cost.state";

/// Why the guard could not be built from the store.
#[derive(Debug, thiserror::Error)]
pub enum CostGuardError {
    /// The store could not be read.
    #[error("cannot read the LLM cost counters: {0}")]
    Store(#[from] StoreError),
    /// The stored counters do not have the expected shape.
    #[error("stored LLM cost counters (setting `{STATE_KEY}`) are unreadable: {message}")]
    Corrupt {
        /// What is wrong with them.
        message: String,
    },
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
}

impl CostStatus {
    /// Whether the hourly limit currently refuses calls.
    pub fn hourly_limit_reached(&self) -> bool {
        self.hourly_limit.is_some_and(|l| self.hourly_calls >= l)
    }
}

/// Enforces the daily budget and the hourly call limit; share it as `Arc`.
pub struct CostGuard {
    budget_micros: Option<u64>,
    budget_cents: Option<u64>,
    hourly_limit: Option<u64>,
    clock: Arc<dyn Clock>,
    store: Option<Store>,
    counters: Mutex<Counters>,
    /// Fast path: today's budget is spent (valid for `exceeded_day` only).
    exceeded: AtomicBool,
    /// Days since the common era of the day `exceeded` was set for.
    exceeded_day: AtomicI64,
    /// The last known spend, for the fast path's message.
    spent_seen: AtomicU64,
    /// Serialises writes so the last one written is the newest snapshot.
    write_turn: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for CostGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CostGuard")
            .field("budget_micros", &self.budget_micros)
            .field("hourly_limit", &self.hourly_limit)
            .field("persistent", &self.store.is_some())
            .field("exceeded", &self.exceeded.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl CostGuard {
    /// A guard whose counters live in memory only (tests, one-off runs).
    pub fn new(config: &CostConfig, clock: Arc<dyn Clock>) -> Self {
        let counters = Counters::new(clock.now());
        Self::build(config, clock, None, counters)
    }

    /// A guard that resumes today's counters from `store` and saves them there.
    ///
    /// Counters from another UTC day start today at zero; a missing entry is
    /// a fresh start; a malformed one is an error rather than a silent reset.
    pub async fn load(
        store: Store,
        config: &CostConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, CostGuardError> {
        let now = clock.now();
        let counters = match store.get_setting(STATE_KEY).await? {
            None => Counters::new(now),
            Some(value) => {
                let stored: Stored =
                    serde_json::from_value(value).map_err(|e| CostGuardError::Corrupt {
                        message: e.to_string(),
                    })?;
                Counters::from_stored(stored, now)
                    .map_err(|message| CostGuardError::Corrupt { message })?
            }
        };
        Ok(Self::build(config, clock, Some(store), counters))
    }

    fn build(
        config: &CostConfig,
        clock: Arc<dyn Clock>,
        store: Option<Store>,
        counters: Counters,
    ) -> Self {
        let guard = Self {
            budget_micros: config.daily_budget_cents.map(limit::cents_to_micros),
            budget_cents: config.daily_budget_cents,
            hourly_limit: config.hourly_action_limit,
            clock,
            store,
            counters: Mutex::new(counters),
            exceeded: AtomicBool::new(false),
            exceeded_day: AtomicI64::new(i64::MIN),
            spent_seen: AtomicU64::new(0),
            write_turn: tokio::sync::Mutex::new(()),
        };
        guard.settle(&guard.lock());
        guard
    }

    /// Whether a call would be allowed now, without counting one.
    pub fn check(&self) -> Result<(), CostLimitError> {
        self.gate(false)
    }

    /// Admits one call now and counts it in the hourly window, or refuses it.
    /// Follow with [`CostGuard::record`] once the call ends.
    pub fn admit(&self) -> Result<(), CostLimitError> {
        self.gate(true)
    }

    /// Adds a finished call's cost to today's spend (0 for a failed call)
    /// and saves the counters. A failed save is logged, not returned: the
    /// call has happened, and the next save carries the counters anyway.
    pub async fn record(&self, cost_micros: u64) {
        let now = self.clock.now();
        let mut warn = None;
        let mut reached = None;
        {
            let mut counters = self.lock();
            self.roll(&mut counters, now);
            counters.spent_micros = counters.spent_micros.saturating_add(cost_micros);
            if let Some(budget) = self.budget_micros {
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
            self.settle(&counters);
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
        self.persist().await;
    }

    /// A snapshot for display.
    pub fn status(&self) -> CostStatus {
        let now = self.clock.now();
        let mut counters = self.lock();
        self.roll(&mut counters, now);
        counters.prune(now);
        let spent = counters.spent_micros;
        CostStatus {
            date: counters.date,
            spent_micros: spent,
            daily_budget_cents: self.budget_cents,
            hourly_calls: counters.window_len(),
            hourly_limit: self.hourly_limit,
            warning: self
                .budget_micros
                .is_some_and(|b| reaches_warning(spent, b)),
            exceeded: self.budget_micros.is_some_and(|b| spent >= b),
        }
    }

    fn gate(&self, count: bool) -> Result<(), CostLimitError> {
        let now = self.clock.now();
        if let Some(refusal) = self.fast_refusal(now) {
            return Err(refusal);
        }
        let mut counters = self.lock();
        self.roll(&mut counters, now);
        if let Some(budget) = self.budget_micros
            && counters.spent_micros >= budget
        {
            self.settle(&counters);
            return Err(CostLimitError::DailyBudget {
                spent_micros: counters.spent_micros,
                budget_micros: budget,
            });
        }
        counters.prune(now);
        if let Some(limit) = self.hourly_limit
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
        Ok(())
    }

    /// The lock-free refusal once today's budget is known to be spent.
    fn fast_refusal(&self, now: DateTime<Utc>) -> Option<CostLimitError> {
        if !self.exceeded.load(Ordering::Acquire) {
            return None;
        }
        if self.exceeded_day.load(Ordering::Relaxed) != day_number(now.date_naive()) {
            // Another day: the slow path rolls the counters and clears the flag.
            return None;
        }
        Some(CostLimitError::DailyBudget {
            spent_micros: self.spent_seen.load(Ordering::Relaxed),
            budget_micros: self.budget_micros.unwrap_or(0),
        })
    }

    fn roll(&self, counters: &mut Counters, now: DateTime<Utc>) {
        if counters.roll_to(now) {
            self.settle(counters);
        }
    }

    /// Brings the fast-path atomics in line with the counters (lock held).
    fn settle(&self, counters: &Counters) {
        self.spent_seen
            .store(counters.spent_micros, Ordering::Relaxed);
        let over = self
            .budget_micros
            .is_some_and(|b| counters.spent_micros >= b);
        if over {
            self.exceeded_day
                .store(day_number(counters.date), Ordering::Relaxed);
        }
        // Release: a reader that sees the flag also sees the day above.
        self.exceeded.store(over, Ordering::Release);
    }

    async fn persist(&self) {
        let Some(store) = &self.store else {
            return;
        };
        let _turn = self.write_turn.lock().await;
        // Snapshot taken inside the turn, so writes land oldest first.
        let stored = self.lock().to_stored();
        let value = match serde_json::to_value(&stored) {
            Ok(value) => value,
            Err(error) => {
                tracing::warn!(%error, "could not encode the LLM cost counters");
                return;
            }
        };
        if let Err(error) = store.set_setting(STATE_KEY, &value).await {
            tracing::warn!(%error, "could not save the LLM cost counters; the next call retries");
        }
    }

    fn lock(&self) -> MutexGuard<'_, Counters> {
        // The counters stay consistent even if a holder panicked: keep using them.
        self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn day_number(date: NaiveDate) -> i64 {
    i64::from(date.num_days_from_ce())
}

#[cfg(test)]
mod tests;
