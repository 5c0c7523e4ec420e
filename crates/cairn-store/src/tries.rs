//! The tries of runs whose routine has `retry`: each try is a row beside
//! its run (deleted with it), written as the try ends, so a timed-out try
//! is on record before the next one starts.

use uuid::Uuid;

use cairn_core::routine::RunTry;

use crate::codec::{Cols, micros};
use crate::{Store, StoreError};

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Records one try of a run.
    pub async fn record_run_try(&self, t: &RunTry) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO routine_run_tries (run_id, number, started_at, ended_at, status, summary) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(t.run_id.to_string())
        .bind(i64::from(t.number))
        .bind(micros(t.started_at))
        .bind(micros(t.ended_at))
        .bind(t.status.as_str())
        .bind(t.summary.clone())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The tries of a run, first first.
    pub async fn run_tries(&self, run_id: Uuid) -> Result<Vec<RunTry>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, number, started_at, ended_at, status, summary FROM routine_run_tries \
                 WHERE run_id = $1 ORDER BY number",
        )
        .bind(run_id.to_string())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let c = Cols(row);
                let status = c.text("status")?;
                Ok(RunTry {
                    run_id: c.uuid("run_id")?,
                    number: u32::try_from(c.uint("number")?).unwrap_or(u32::MAX),
                    started_at: c.time("started_at")?,
                    ended_at: c.time("ended_at")?,
                    status: status
                        .parse()
                        .map_err(
                            |e: cairn_core::routine::UnknownStatus| StoreError::Corrupt {
                                what: "routine_run_tries.status".to_string(),
                                message: e.to_string(),
                            },
                        )?,
                    summary: c.text_opt("summary")?,
                })
            })
            .collect()
    }
}
