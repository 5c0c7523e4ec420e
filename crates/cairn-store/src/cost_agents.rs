//! Each agent's cost line (migration 25): what every agent spent per UTC
//! day (`cost_agents`), added to by every finished call in the transaction
//! that records it, and read at admission to hold an agent to its share of
//! the daily budget.

use chrono::{DateTime, NaiveDate, Utc};

use crate::codec::{Cols, micros};
use crate::cost::{HOURLY_WINDOW, RESERVATION_TTL};
use crate::exec::Conn;
use crate::{MAIN_AGENT, Store, StoreError};

/// The agent an admission counts a call for, and its share of the daily
/// budget (`None`: only the global limits hold it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentShare<'a> {
    /// The agent's id.
    pub agent: &'a str,
    /// Its share, in micro-dollars.
    pub budget_micros: Option<u64>,
}

impl AgentShare<'static> {
    /// [`MAIN_AGENT`], held by the global limits only.
    pub const MAIN: AgentShare<'static> = AgentShare {
        agent: MAIN_AGENT,
        budget_micros: None,
    };
}

/// One agent's spend today, as an admission judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentTotals {
    /// The agent's id.
    pub agent: String,
    /// Spent today by its finished calls, in micro-dollars.
    pub spent_micros: u64,
    /// Reserved by its calls in flight: each its dearest call of the day.
    pub reserved_micros: u64,
    /// Its answered calls today.
    pub calls: u64,
}

/// What one agent cost on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AgentSpend {
    /// The UTC day.
    pub day: NaiveDate,
    /// The agent.
    pub agent: String,
    /// Its calls' cost, in micro-dollars.
    pub spent_micros: u64,
    /// Its answered calls.
    pub calls: u64,
}

pub(crate) fn day_key(day: NaiveDate) -> String {
    day.format("%Y-%m-%d").to_string()
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `agent`'s spend of `now`'s UTC day and its reservations, on `conn`.
pub(crate) async fn agent_totals_in(
    conn: &mut Conn,
    agent: &str,
    now: DateTime<Utc>,
) -> Result<AgentTotals, StoreError> {
    let row = sqlx::query(
        "SELECT CAST(COALESCE(a.spent_micros, 0) AS BIGINT) AS spent_micros, \
         CAST(COALESCE(a.max_call_micros, 0) AS BIGINT) AS max_call_micros, \
         CAST(COALESCE(a.calls, 0) AS BIGINT) AS calls, o.open \
         FROM (SELECT CAST(COUNT(*) AS BIGINT) AS open FROM llm_calls \
         WHERE finished_at IS NULL AND started_at > $1 AND started_at > $2 AND agent = $3) AS o \
         LEFT JOIN cost_agents AS a ON a.day = $4 AND a.agent = $3",
    )
    .bind(micros(now - RESERVATION_TTL))
    .bind(micros(now - HOURLY_WINDOW))
    .bind(agent)
    .bind(day_key(now.date_naive()))
    .fetch_one(&mut *conn)
    .await?;
    let c = Cols(&row);
    Ok(AgentTotals {
        agent: agent.to_string(),
        spent_micros: c.uint("spent_micros")?,
        reserved_micros: c.uint("max_call_micros")?.saturating_mul(c.uint("open")?),
        calls: c.uint("calls")?,
    })
}

/// Adds a finished call of `agent` costing `cost_micros` to `now`'s UTC
/// day on `conn` (atomically, whoever else is adding); an `answered` call
/// counts as one call. A failed call that cost nothing writes nothing.
pub(crate) async fn add_agent_spend_in(
    conn: &mut Conn,
    agent: &str,
    cost_micros: u64,
    answered: bool,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    if cost_micros == 0 && !answered {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO cost_agents (day, agent, spent_micros, max_call_micros, calls, updated_at) \
         VALUES ($1, $2, $3, $3, $4, $5) ON CONFLICT (day, agent) DO UPDATE SET \
         spent_micros = cost_agents.spent_micros + excluded.spent_micros, \
         max_call_micros = CASE WHEN cost_agents.max_call_micros < excluded.max_call_micros \
             THEN excluded.max_call_micros ELSE cost_agents.max_call_micros END, \
         calls = cost_agents.calls + excluded.calls, updated_at = excluded.updated_at",
    )
    .bind(day_key(now.date_naive()))
    .bind(agent)
    .bind(i64_of(cost_micros))
    .bind(i64::from(answered))
    .bind(micros(now))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Every agent's spend from `from` (a UTC day key) on, unordered.
pub(crate) async fn agent_spend_since(
    store: &Store,
    from: &str,
) -> Result<Vec<AgentSpend>, StoreError> {
    let rows =
        sqlx::query("SELECT day, agent, spent_micros, calls FROM cost_agents WHERE day >= $1")
            .bind(from)
            .fetch_all(store.pool())
            .await?;
    rows.iter()
        .map(|r| {
            let cols = Cols(r);
            let text = cols.text("day")?;
            let day =
                NaiveDate::parse_from_str(&text, "%Y-%m-%d").map_err(|e| StoreError::Corrupt {
                    what: "day".into(),
                    message: format!("{text:?}: {e}"),
                })?;
            Ok(AgentSpend {
                day,
                agent: cols.text("agent")?,
                spent_micros: cols.uint("spent_micros")?,
                calls: cols.uint("calls")?,
            })
        })
        .collect()
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// `agent`'s spend of `now`'s UTC day, with the reservations of its
    /// calls in flight (reads only).
    pub async fn agent_spend(
        &self,
        agent: &str,
        now: DateTime<Utc>,
    ) -> Result<AgentTotals, StoreError> {
        let mut conn = self.pool().acquire().await?;
        agent_totals_in(&mut *conn, agent, now).await
    }

    /// Every agent's spend of the UTC day `day`, by agent id.
    pub async fn agents_spend_on(&self, day: NaiveDate) -> Result<Vec<AgentSpend>, StoreError> {
        let mut rows = agent_spend_since(self, &day_key(day)).await?;
        rows.retain(|r| r.day == day);
        rows.sort_by(|a, b| a.agent.cmp(&b.agent));
        Ok(rows)
    }

    /// Adds a call of `agent` costing `cost_micros` to `now`'s UTC day
    /// outside any admission (atomically, whoever else is adding). Calls the
    /// cost guard finishes count theirs with [`Store::finish_llm_call`].
    pub async fn add_agent_spend(
        &self,
        agent: &str,
        cost_micros: u64,
        answered: bool,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        add_agent_spend_in(&mut *tx, agent, cost_micros, answered, now).await?;
        tx.commit().await?;
        Ok(())
    }
}
