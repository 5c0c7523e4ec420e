//! Why the guard refused a call, and money as people read it.

use cairn_llm::{LlmError, MICROS_PER_DOLLAR};
use chrono::{DateTime, Utc};

/// A limit that refused an LLM call; becomes [`LlmError::CostLimit`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostLimitError {
    /// Today's (UTC) spend reached the daily budget.
    #[error(
        "daily LLM budget of {} reached ({} spent today, UTC); raise cost.daily_budget_cents or wait until 00:00 UTC",
        format_dollars(*budget_micros),
        format_dollars(*spent_micros)
    )]
    DailyBudget {
        /// Spent today, in micro-dollars.
        spent_micros: u64,
        /// The daily budget, in micro-dollars.
        budget_micros: u64,
    },
    /// The agent's spend today (UTC) reached its share of the daily budget
    /// (`daily_budget_cents` of its `[[agents]]` entry).
    #[error(
        "agent {agent}'s daily LLM budget share of {} reached ({} spent today, UTC); raise its daily_budget_cents in [[agents]] or wait until 00:00 UTC",
        format_dollars(*share_micros),
        format_dollars(*spent_micros)
    )]
    AgentShare {
        /// The agent's id.
        agent: String,
        /// Spent today by the agent, in micro-dollars.
        spent_micros: u64,
        /// Its share, in micro-dollars.
        share_micros: u64,
    },
    /// The last hour already holds as many calls as the hourly limit allows.
    #[error("hourly limit of {limit} LLM calls reached; {}", next_call(*next_allowed))]
    HourlyLimit {
        /// The configured limit.
        limit: u64,
        /// When a call will be allowed again (`None`: never, the limit is 0).
        next_allowed: Option<DateTime<Utc>>,
    },
}

impl From<CostLimitError> for LlmError {
    fn from(error: CostLimitError) -> Self {
        LlmError::cost_limit(error.to_string())
    }
}

/// The time part of the hourly message, rounded *up* to the minute so a
/// person who waits until the time shown is not refused again.
fn next_call(next_allowed: Option<DateTime<Utc>>) -> String {
    let Some(at) = next_allowed else {
        return "raise cost.hourly_action_limit to allow any".to_owned();
    };
    let seconds = at.timestamp();
    let partial = seconds.rem_euclid(60) != 0 || at.timestamp_subsec_nanos() != 0;
    let minute = seconds.div_euclid(60) + i64::from(partial);
    let shown = DateTime::from_timestamp(minute.saturating_mul(60), 0).unwrap_or(at);
    format!("next call allowed at {} UTC", shown.format("%H:%M"))
}

/// Micro-dollars as dollars with at least two decimals and no rounding:
/// `$5.00`, `$0.80`, `$0.00002`.
pub fn format_dollars(micros: u64) -> String {
    let whole = micros / MICROS_PER_DOLLAR;
    let mut fraction = format!("{:06}", micros % MICROS_PER_DOLLAR);
    while fraction.len() > 2 && fraction.ends_with('0') {
        fraction.pop();
    }
    format!("${whole}.{fraction}")
}

/// Cents (as configured) to micro-dollars (as tracked).
pub(super) fn cents_to_micros(cents: u64) -> u64 {
    cents.saturating_mul(MICROS_PER_DOLLAR / 100)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn dollars_keep_two_decimals_and_every_micro() {
        assert_eq!(format_dollars(0), "$0.00");
        assert_eq!(format_dollars(5_000_000), "$5.00");
        assert_eq!(format_dollars(5_020_000), "$5.02");
        assert_eq!(format_dollars(800_000), "$0.80");
        assert_eq!(format_dollars(20), "$0.00002");
        assert_eq!(format_dollars(1_234_567), "$1.234567");
        assert_eq!(cents_to_micros(500), 5_000_000);
        assert_eq!(cents_to_micros(u64::MAX), u64::MAX);
    }

    #[test]
    fn messages_name_the_limit_and_the_way_out() {
        let daily = CostLimitError::DailyBudget {
            spent_micros: 5_020_000,
            budget_micros: 5_000_000,
        };
        assert_eq!(
            daily.to_string(),
            "daily LLM budget of $5.00 reached ($5.02 spent today, UTC); raise cost.daily_budget_cents or wait until 00:00 UTC"
        );
        let hourly = |at| CostLimitError::HourlyLimit {
            limit: 100,
            next_allowed: Some(at),
        };
        let exact = Utc.with_ymd_and_hms(2026, 3, 9, 14, 3, 0).unwrap();
        assert_eq!(
            hourly(exact).to_string(),
            "hourly limit of 100 LLM calls reached; next call allowed at 14:03 UTC"
        );
        let partial = Utc.with_ymd_and_hms(2026, 3, 9, 14, 2, 1).unwrap();
        assert!(hourly(partial).to_string().ends_with("at 14:03 UTC"));
        let never = CostLimitError::HourlyLimit {
            limit: 0,
            next_allowed: None,
        };
        assert!(never.to_string().contains("raise cost.hourly_action_limit"));
        let share = CostLimitError::AgentShare {
            agent: "family".into(),
            spent_micros: 520_000,
            share_micros: 500_000,
        };
        assert_eq!(
            share.to_string(),
            "agent family's daily LLM budget share of $0.50 reached ($0.52 spent today, UTC); raise its daily_budget_cents in [[agents]] or wait until 00:00 UTC"
        );
        assert_eq!(
            LlmError::from(share).kind(),
            cairn_llm::LlmErrorKind::CostLimit
        );
        let llm: LlmError = daily.into();
        assert_eq!(llm.kind(), cairn_llm::LlmErrorKind::CostLimit);
        assert!(llm.to_string().starts_with("daily LLM budget of $5.00"));
    }
}
