//! The spend over past days: the budget's total per UTC day
//! (`cost_days`), per day and model since migration 17 (`cost_models`,
//! which every answered call adds to) and per day and agent since
//! migration 25 (`cost_agents`).

use chrono::{DateTime, NaiveDate, Utc};

use crate::codec::{Cols, micros};
use crate::cost_agents::{AgentSpend, agent_spend_since};
use crate::exec::Conn;
use crate::{Store, StoreError};

/// What one model cost on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelSpend {
    /// The UTC day.
    pub day: NaiveDate,
    /// The model that answered.
    pub model: String,
    /// Its calls' cost, in micro-dollars.
    pub spent_micros: u64,
    /// Its answered calls.
    pub calls: u64,
}

/// The spend since a day, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CostHistory {
    /// Each day with a spend row, and its total in micro-dollars.
    pub days: Vec<(NaiveDate, u64)>,
    /// Each (day, model) with calls.
    pub models: Vec<ModelSpend>,
    /// Each (day, agent) with spend or calls.
    pub agents: Vec<AgentSpend>,
}

fn day_of(cols: &Cols<'_>) -> Result<NaiveDate, StoreError> {
    let text = cols.text("day")?;
    NaiveDate::parse_from_str(&text, "%Y-%m-%d").map_err(|e| StoreError::Corrupt {
        what: "day".into(),
        message: format!("{text:?}: {e}"),
    })
}

/// Adds one answered call of `model` costing `cost_micros` to `now`'s UTC
/// day, on `conn` (atomically, whoever else is adding).
pub(crate) async fn add_model_spend_in(
    conn: &mut Conn,
    model: &str,
    cost_micros: u64,
    now: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO cost_models (day, model, spent_micros, calls, updated_at) \
         VALUES ($1, $2, $3, 1, $4) ON CONFLICT (day, model) DO UPDATE SET \
         spent_micros = cost_models.spent_micros + excluded.spent_micros, \
         calls = cost_models.calls + 1, updated_at = excluded.updated_at",
    )
    .bind(now.date_naive().format("%Y-%m-%d").to_string())
    .bind(model)
    .bind(i64::try_from(cost_micros).unwrap_or(i64::MAX))
    .bind(micros(now))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Adds one answered call of `model` costing `cost_micros` to `now`'s
    /// UTC day (atomically, whoever else is adding). Calls the cost guard
    /// finishes count theirs with [`Store::finish_llm_call`].
    pub async fn add_model_spend(
        &self,
        model: &str,
        cost_micros: u64,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        add_model_spend_in(&mut *tx, model, cost_micros, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The spend of every day from `from` (UTC) on, in total, per model and
    /// per agent.
    pub async fn cost_history(&self, from: NaiveDate) -> Result<CostHistory, StoreError> {
        let from = from.format("%Y-%m-%d").to_string();
        // ISO day keys compare as dates in any collation; the order
        // is set in Rust, as everywhere in the store.
        let days = sqlx::query("SELECT day, spent_micros FROM cost_days WHERE day >= $1")
            .bind(&from)
            .fetch_all(self.pool())
            .await?;
        let models =
            sqlx::query("SELECT day, model, spent_micros, calls FROM cost_models WHERE day >= $1")
                .bind(&from)
                .fetch_all(self.pool())
                .await?;
        let mut days: Vec<(NaiveDate, u64)> = days
            .iter()
            .map(|r| {
                let cols = Cols(r);
                Ok((day_of(&cols)?, cols.uint("spent_micros")?))
            })
            .collect::<Result<_, StoreError>>()?;
        let mut models: Vec<ModelSpend> = models
            .iter()
            .map(|r| {
                let cols = Cols(r);
                Ok(ModelSpend {
                    day: day_of(&cols)?,
                    model: cols.text("model")?,
                    spent_micros: cols.uint("spent_micros")?,
                    calls: cols.uint("calls")?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        let mut agents = agent_spend_since(self, &from).await?;
        days.sort();
        models.sort_by(|a, b| (a.day, &a.model).cmp(&(b.day, &b.model)));
        agents.sort_by(|a, b| (a.day, &a.agent).cmp(&(b.day, &b.agent)));
        Ok(CostHistory {
            days,
            models,
            agents,
        })
    }
}
