//! Tool health, shared by every process: each tool's consecutive failures
//! (a success resets them) and whether it is disabled for the agent.
//!
//! Disabling is a compare-and-set from enabled, so when several processes
//! see the fifth failure at once exactly one of them learns it disabled the
//! tool (and sends the one notification).

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;

use crate::codec::{Cols, micros};
use crate::{Store, StoreError};

/// One tool's health as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolHealthRow {
    /// The canonical tool name.
    pub name: String,
    /// Failures since the last success.
    pub consecutive_failures: u64,
    /// The last failure's text (as the model saw it, scrubbed).
    pub last_error: Option<String>,
    /// When it last failed.
    pub last_failure_at: Option<DateTime<Utc>>,
    /// Hidden from the agent and refused until re-enabled.
    pub disabled: bool,
    /// When it was disabled.
    pub disabled_at: Option<DateTime<Utc>>,
}

/// What [`Store::record_tool_failure`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// The tool's row after the failure.
    pub health: ToolHealthRow,
    /// This call disabled the tool (true for exactly one caller).
    pub newly_disabled: bool,
}

const COLUMNS: &str =
    "name, consecutive_failures, last_error, last_failure_at, disabled, disabled_at";

fn decode(row: &AnyRow) -> Result<ToolHealthRow, StoreError> {
    let c = Cols(row);
    Ok(ToolHealthRow {
        name: c.text("name")?,
        consecutive_failures: c.uint("consecutive_failures")?,
        last_error: c.text_opt("last_error")?,
        last_failure_at: c.time_opt("last_failure_at")?,
        disabled: c.boolean("disabled")?,
        disabled_at: c.time_opt("disabled_at")?,
    })
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Counts one more consecutive failure of `name` (atomically) and, when
    /// the count reaches `limit` (`None`: never), disables the tool.
    pub async fn record_tool_failure(
        &self,
        name: &str,
        error: &str,
        limit: Option<u64>,
        now: DateTime<Utc>,
    ) -> Result<ToolFailure, StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO tool_health (name, consecutive_failures, last_error, last_failure_at, updated_at) \
                 VALUES ($1, 1, $2, $3, $3) \
                 ON CONFLICT (name) DO UPDATE SET consecutive_failures = tool_health.consecutive_failures + 1, \
                 last_error = excluded.last_error, last_failure_at = excluded.last_failure_at, \
                 updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(error)
        .bind(micros(now))
        .execute(&mut *tx)
        .await?;
        let newly_disabled = match limit {
            Some(limit) => {
                sqlx::query(
                    "UPDATE tool_health SET disabled = 1, disabled_at = $2 \
                         WHERE name = $1 AND disabled = 0 AND consecutive_failures >= $3",
                )
                .bind(name)
                .bind(micros(now))
                .bind(i64::try_from(limit).unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await?
                .rows_affected()
                    == 1
            }
            None => false,
        };
        let sql = format!("SELECT {COLUMNS} FROM tool_health WHERE name = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .fetch_one(&mut *tx)
            .await?;
        let health = decode(&row)?;
        tx.commit().await?;
        Ok(ToolFailure {
            health,
            newly_disabled,
        })
    }

    /// Resets `name`'s consecutive failures after a success; returns whether
    /// there were any. A disabled tool stays disabled (only `enable` lifts it).
    pub async fn record_tool_success(
        &self,
        name: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE tool_health SET consecutive_failures = 0, updated_at = $2 \
                 WHERE name = $1 AND consecutive_failures > 0",
        )
        .bind(name)
        .bind(micros(now))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Re-enables `name` and clears its failures; returns whether it was disabled.
    pub async fn enable_tool(&self, name: &str, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let was = sqlx::query(
            "UPDATE tool_health SET disabled = 0, disabled_at = NULL, consecutive_failures = 0, updated_at = $2 \
                 WHERE name = $1 AND disabled = 1",
        )
        .bind(name)
        .bind(micros(now))
        .execute(self.pool())
        .await?
        .rows_affected()
            == 1;
        if !was {
            sqlx::query(
                "UPDATE tool_health SET consecutive_failures = 0, updated_at = $2 WHERE name = $1",
            )
            .bind(name)
            .bind(micros(now))
            .execute(self.pool())
            .await?;
        }
        Ok(was)
    }

    /// Every tool with a health row (failed at least once), by name.
    pub async fn list_tool_health(&self) -> Result<Vec<ToolHealthRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM tool_health");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await?;
        let mut list = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        // Sorted here: PostgreSQL's ORDER BY follows the database's collation.
        list.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(list)
    }
}
