//! The LLM spend shared by every process on the database: one row per UTC
//! day that finished calls add their cost to (`spent = spent + $n`, never a
//! read-modify-write in the caller), and one row per admitted call for the
//! hourly window and for the reservations of calls still in flight.
//!
//! Admission is one write transaction that locks the day's row first, so of
//! two processes admitting at once one reads what the other wrote: the
//! hourly limit is never overshot, and a call in flight reserves the day's
//! dearest call so others do not all start on the last dollar.

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use sqlx::Row;
use uuid::Uuid;

use crate::codec::{Cols, Params, micros};
use crate::cost_agents::{AgentShare, AgentTotals, add_agent_spend_in, agent_totals_in};
use crate::cost_history::add_model_spend_in;
use crate::exec::Conn;
use crate::{Store, StoreError};

/// The sliding window of the hourly limit.
pub const HOURLY_WINDOW: TimeDelta = TimeDelta::hours(1);

/// How long an unfinished call's reservation counts: a process that died
/// mid-call must not hold its reservation for the rest of the day.
pub const RESERVATION_TTL: TimeDelta = TimeDelta::minutes(15);

/// The settings key of the counters before migration 11 (one JSON blob).
pub const LEGACY_COST_KEY: &str = "cost.state";

/// The limits an admission is judged against (`None`: unlimited).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CostLimits {
    /// The daily budget, in micro-dollars.
    pub budget_micros: Option<u64>,
    /// Calls allowed per sliding hour.
    pub hourly_limit: Option<u64>,
}

/// The shared counters as of one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostTotals {
    /// The UTC day of `spent_micros`.
    pub day: NaiveDate,
    /// Spent that day by finished calls, in micro-dollars.
    pub spent_micros: u64,
    /// Reserved by calls still in flight.
    pub reserved_micros: u64,
    /// Calls admitted in the last hour.
    pub hourly_calls: u64,
    /// Whether that day's 80% warning was already given (by any process).
    pub warned: bool,
}

/// What [`Store::admit_llm_call`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmAdmission {
    /// The call may go; finish it with [`Store::finish_llm_call`].
    Admitted {
        /// The call's row (`None` for a check that counted nothing).
        call_id: Option<Uuid>,
        /// The counters before this call.
        totals: CostTotals,
        /// The agent's spend before this call.
        agent: AgentTotals,
    },
    /// Today's spend (with the reservations of calls in flight) reached the budget.
    OverBudget {
        /// The counters.
        totals: CostTotals,
    },
    /// The agent's spend today (with the reservations of its calls in
    /// flight) reached its share of the budget.
    OverShare {
        /// The counters.
        totals: CostTotals,
        /// The agent's.
        agent: AgentTotals,
    },
    /// The last hour holds as many calls as the limit allows.
    HourlyLimit {
        /// The counters.
        totals: CostTotals,
        /// When a call will be allowed again (`None`: never, a limit of 0).
        next_allowed: Option<DateTime<Utc>>,
    },
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn day_key(day: NaiveDate) -> String {
    day.format("%Y-%m-%d").to_string()
}

/// Reads the counters inside `conn` (a transaction or the pool's
/// connection), in one statement: the day's row (absent: nothing spent yet)
/// beside the last hour's calls (counted on their index) and the
/// reservations of those still open (`llm_calls_open`, migration 20).
async fn totals_in(conn: &mut Conn, now: DateTime<Utc>) -> Result<(CostTotals, u64), StoreError> {
    let day = now.date_naive();
    // CAST: PostgreSQL's SUM of BIGINT is NUMERIC, which the Any driver cannot read.
    let row = sqlx::query(
        "SELECT CAST(COALESCE(d.spent_micros, 0) AS BIGINT) AS spent_micros, \
         CAST(COALESCE(d.max_call_micros, 0) AS BIGINT) AS max_call_micros, \
         CAST(COALESCE(d.warned, 0) AS BIGINT) AS warned, c.calls, c.reserved \
         FROM (SELECT (SELECT CAST(COUNT(*) AS BIGINT) FROM llm_calls WHERE started_at > $1) AS calls, \
         (SELECT CAST(COALESCE(SUM(reserved_micros), 0) AS BIGINT) FROM llm_calls \
         WHERE finished_at IS NULL AND started_at > $2 AND started_at > $1) AS reserved) AS c \
         LEFT JOIN cost_days AS d ON d.day = $3",
    )
    .bind(micros(now - HOURLY_WINDOW))
    .bind(micros(now - RESERVATION_TTL))
    .bind(day_key(day))
    .fetch_one(&mut *conn)
    .await?;
    let c = Cols(&row);
    Ok((
        CostTotals {
            day,
            spent_micros: c.uint("spent_micros")?,
            reserved_micros: c.uint("reserved")?,
            hourly_calls: c.uint("calls")?,
            warned: c.boolean("warned")?,
        },
        c.uint("max_call_micros")?,
    ))
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// The shared counters at `now` (reads only).
    pub async fn cost_totals(&self, now: DateTime<Utc>) -> Result<CostTotals, StoreError> {
        let mut conn = self.pool().acquire().await?;
        Ok(totals_in(&mut *conn, now).await?.0)
    }

    /// Admits one LLM call of the main agent at `now` against `limits`
    /// ([`Store::admit_agent_llm_call`] without a share).
    pub async fn admit_llm_call(
        &self,
        now: DateTime<Utc>,
        limits: CostLimits,
        count: bool,
    ) -> Result<LlmAdmission, StoreError> {
        self.admit_agent_llm_call(now, limits, AgentShare::MAIN, count)
            .await
    }

    /// Admits one LLM call of `share.agent` at `now` against `limits` and
    /// the agent's share, or refuses it, in one transaction holding the
    /// day's row: refused when today's spend plus the reservations of calls
    /// in flight reached the budget, when the agent's spend plus its own
    /// reservations reached its share, or when the last hour holds
    /// `hourly_limit` calls. With `count`, an admitted call is counted in
    /// the window (and for the agent) at once and reserves the day's
    /// dearest call so far; without, nothing is written (a check).
    pub async fn admit_agent_llm_call(
        &self,
        now: DateTime<Utc>,
        limits: CostLimits,
        share: AgentShare<'_>,
        count: bool,
    ) -> Result<LlmAdmission, StoreError> {
        let mut tx = self.begin_write().await?;
        // Concurrent admissions queue here and read each other's rows.
        lock_day(&mut *tx, now).await?;
        sqlx::query("DELETE FROM llm_calls WHERE started_at <= $1")
            .bind(micros(now - HOURLY_WINDOW - RESERVATION_TTL))
            .execute(&mut *tx)
            .await?;
        let (totals, max_call) = totals_in(&mut *tx, now).await?;
        if let Some(budget) = limits.budget_micros
            && totals.spent_micros.saturating_add(totals.reserved_micros) >= budget
        {
            tx.rollback().await?;
            return Ok(LlmAdmission::OverBudget { totals });
        }
        let agent = agent_totals_in(&mut *tx, share.agent, now).await?;
        if let Some(budget) = share.budget_micros
            && agent.spent_micros.saturating_add(agent.reserved_micros) >= budget
        {
            tx.rollback().await?;
            return Ok(LlmAdmission::OverShare { totals, agent });
        }
        if let Some(limit) = limits.hourly_limit
            && totals.hourly_calls >= limit
        {
            let next_allowed = next_slot(&mut *tx, now, limit, totals.hourly_calls).await?;
            tx.rollback().await?;
            return Ok(LlmAdmission::HourlyLimit {
                totals,
                next_allowed,
            });
        }
        if !count {
            tx.rollback().await?;
            return Ok(LlmAdmission::Admitted {
                call_id: None,
                totals,
                agent,
            });
        }
        let call_id = Uuid::now_v7();
        sqlx::query(
            "INSERT INTO llm_calls (id, started_at, reserved_micros, agent) VALUES ($1, $2, $3, $4)",
        )
        .bind(call_id.to_string())
        .bind(micros(now))
        .bind(i64_of(max_call))
        .bind(share.agent)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(LlmAdmission::Admitted {
            call_id: Some(call_id),
            totals,
            agent,
        })
    }

    /// Ends an admitted call of `agent`: releases its reservation and adds
    /// its cost to the spend of `now`'s UTC day (atomically, whoever else is
    /// adding) and to the agent's, and, when a model `answered`, to that
    /// model's spend of the day, in the same transaction. Returns the day's
    /// new total. Finishing a call twice adds nothing.
    pub async fn finish_llm_call(
        &self,
        call_id: Uuid,
        agent: &str,
        cost_micros: u64,
        answered: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<CostTotals, StoreError> {
        let mut tx = self.begin_write().await?;
        // The day's row first, as admission takes it: the same lock order
        // everywhere, so the two cannot deadlock on PostgreSQL.
        lock_day(&mut *tx, now).await?;
        let done = sqlx::query(
            "UPDATE llm_calls SET cost_micros = $2, finished_at = $3, reserved_micros = 0 \
                 WHERE id = $1 AND finished_at IS NULL",
        )
        .bind(call_id.to_string())
        .bind(i64_of(cost_micros))
        .bind(micros(now))
        .execute(&mut *tx)
        .await?;
        // A call pruned meanwhile (very long) still counts: its cost was spent.
        let first = done.rows_affected() == 1
            || sqlx::query("SELECT id FROM llm_calls WHERE id = $1")
                .bind(call_id.to_string())
                .fetch_optional(&mut *tx)
                .await?
                .is_none();
        if first {
            add_spend(&mut *tx, now, cost_micros).await?;
            add_agent_spend_in(&mut *tx, agent, cost_micros, answered.is_some(), now).await?;
            if let Some(model) = answered {
                add_model_spend_in(&mut *tx, model, cost_micros, now).await?;
            }
        }
        let (totals, _) = totals_in(&mut *tx, now).await?;
        tx.commit().await?;
        Ok(totals)
    }

    /// Adds `cost_micros` to `now`'s UTC day outside any admission (a cost
    /// learnt after its call was finished); returns the day's new total.
    pub async fn add_llm_spend(
        &self,
        cost_micros: u64,
        now: DateTime<Utc>,
    ) -> Result<CostTotals, StoreError> {
        let mut tx = self.begin_write().await?;
        lock_day(&mut *tx, now).await?;
        add_spend(&mut *tx, now, cost_micros).await?;
        let (totals, _) = totals_in(&mut *tx, now).await?;
        tx.commit().await?;
        Ok(totals)
    }

    /// Claims the 80% warning of `day` for the caller: `true` for exactly
    /// one caller across processes.
    pub async fn claim_cost_warning(&self, day: NaiveDate) -> Result<bool, StoreError> {
        let done = sqlx::query("UPDATE cost_days SET warned = 1 WHERE day = $1 AND warned = 0")
            .bind(day_key(day))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

/// Creates `now`'s day row if needed and locks it on PostgreSQL (SQLite's
/// write lock is already held by the transaction).
async fn lock_day(conn: &mut Conn, now: DateTime<Utc>) -> Result<(), StoreError> {
    let day = day_key(now.date_naive());
    sqlx::query(
        "INSERT INTO cost_days (day, updated_at) VALUES ($1, $2) ON CONFLICT (day) DO NOTHING",
    )
    .bind(&day)
    .bind(micros(now))
    .execute(&mut *conn)
    .await?;
    if Params::of(conn) == Params::Numbered {
        sqlx::query("UPDATE cost_days SET updated_at = updated_at WHERE day = $1")
            .bind(&day)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

async fn add_spend(
    conn: &mut Conn,
    now: DateTime<Utc>,
    cost_micros: u64,
) -> Result<(), StoreError> {
    let cost = i64_of(cost_micros);
    sqlx::query(
        "INSERT INTO cost_days (day, spent_micros, max_call_micros, updated_at) VALUES ($1, $2, $2, $3) \
         ON CONFLICT (day) DO UPDATE SET spent_micros = cost_days.spent_micros + excluded.spent_micros, \
         max_call_micros = CASE WHEN cost_days.max_call_micros < excluded.max_call_micros \
             THEN excluded.max_call_micros ELSE cost_days.max_call_micros END, \
         updated_at = excluded.updated_at",
    )
    .bind(day_key(now.date_naive()))
    .bind(cost)
    .bind(micros(now))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// When the window has room for one more call under `limit`.
async fn next_slot(
    conn: &mut Conn,
    now: DateTime<Utc>,
    limit: u64,
    calls: u64,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    if limit == 0 {
        return Ok(None);
    }
    // Room appears when the oldest `calls - limit + 1` calls have left.
    let offset = calls.saturating_sub(limit);
    let row = sqlx::query(
        "SELECT started_at FROM llm_calls WHERE started_at > $1 ORDER BY started_at, id LIMIT 1 OFFSET $2",
    )
    .bind(micros(now - HOURLY_WINDOW))
    .bind(i64_of(offset))
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match row {
        Some(r) => Some(Cols(&r).time("started_at")? + HOURLY_WINDOW),
        None => None,
    })
}

/// Migration 11: moves the old settings blob (`cost.state`: date,
/// spent_micros, warned, calls_ms) into the new tables and removes it. A
/// blob that cannot be read is left in place with a warning rather than
/// failing the upgrade: the spend it held is at most one day's.
pub(crate) async fn convert_settings_blob(conn: &mut Conn) -> Result<(), StoreError> {
    let row = sqlx::query("SELECT value FROM settings WHERE key = $1")
        .bind(LEGACY_COST_KEY)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Ok(());
    };
    let text: String = row.try_get("value")?;
    let Some((day, spent, warned, calls)) = parse_legacy(&text) else {
        tracing::warn!(
            key = LEGACY_COST_KEY,
            "the old LLM cost counters are unreadable; left in place, today's spend starts at zero"
        );
        return Ok(());
    };
    let now = micros(Utc::now());
    sqlx::query(
        "INSERT INTO cost_days (day, spent_micros, max_call_micros, warned, updated_at) VALUES ($1, $2, 0, $3, $4)",
    )
    .bind(day_key(day))
    .bind(i64_of(spent))
    .bind(i64::from(warned))
    .bind(now)
    .execute(&mut *conn)
    .await?;
    for at in calls {
        sqlx::query(
            "INSERT INTO llm_calls (id, started_at, reserved_micros, cost_micros, finished_at) VALUES ($1, $2, 0, 0, $2)",
        )
        .bind(Uuid::new_v4().to_string())
        .bind(at)
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query("DELETE FROM settings WHERE key = $1")
        .bind(LEGACY_COST_KEY)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// The old blob's day, spend, warning flag and call times (micros).
fn parse_legacy(text: &str) -> Option<(NaiveDate, u64, bool, Vec<i64>)> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let day = NaiveDate::parse_from_str(value.get("date")?.as_str()?, "%Y-%m-%d").ok()?;
    let spent = value.get("spent_micros")?.as_u64()?;
    let warned = value
        .get("warned")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let calls = match value.get("calls_ms") {
        None => Vec::new(),
        Some(list) => list
            .as_array()?
            .iter()
            .map(|ms| ms.as_i64().and_then(|ms| ms.checked_mul(1000)))
            .collect::<Option<Vec<_>>>()?,
    };
    Some((day, spent, warned, calls))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_blobs_parse_or_are_refused() {
        let ok = r#"{"date":"2026-03-09","spent_micros":1050000,"warned":true,"calls_ms":[1000]}"#;
        let (day, spent, warned, calls) = parse_legacy(ok).unwrap();
        assert_eq!(day.to_string(), "2026-03-09");
        assert_eq!((spent, warned, calls), (1_050_000, true, vec![1_000_000]));
        assert!(parse_legacy(r#"{"spent":"lots"}"#).is_none());
        assert!(parse_legacy(r#"{"date":"2026-03-09","spent_micros":1}"#).is_some());
    }
}
