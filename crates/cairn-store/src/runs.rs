//! Routine runs: claiming scheduled slots exactly once, leases, and orphan reaping.

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use uuid::Uuid;

use cairn_core::routine::{RoutineRun, RunStatus};

use crate::codec::{Cols, micros, micros_opt};
use crate::error::is_unique_violation;
use crate::{Store, StoreError};

const COLUMNS: &str = "id, routine_id, trigger_type, trigger_detail, scheduled_for, started_at, completed_at, \
     status, result_summary, tokens_used, job_id, owner, lease_until";

const INSERT: &str = "INSERT INTO routine_runs (id, routine_id, trigger_type, trigger_detail, scheduled_for, \
     started_at, completed_at, status, result_summary, tokens_used, job_id, owner, lease_until) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// Final status (not `Running`).
    pub status: RunStatus,
    /// What it found or why it failed.
    pub summary: Option<String>,
    /// Tokens spent.
    pub tokens_used: Option<u64>,
    /// When it ended.
    pub completed_at: DateTime<Utc>,
}

fn decode(row: &AnyRow) -> Result<RoutineRun, StoreError> {
    let c = Cols(row);
    let status = c.text("status")?;
    Ok(RoutineRun {
        id: c.uuid("id")?,
        routine_id: c.uuid("routine_id")?,
        trigger_type: c.text("trigger_type")?,
        trigger_detail: c.text_opt("trigger_detail")?,
        scheduled_for: c.time_opt("scheduled_for")?,
        started_at: c.time("started_at")?,
        completed_at: c.time_opt("completed_at")?,
        status: status
            .parse()
            .map_err(
                |e: cairn_core::routine::UnknownStatus| StoreError::Corrupt {
                    what: "routine_runs.status".to_string(),
                    message: e.to_string(),
                },
            )?,
        result_summary: c.text_opt("result_summary")?,
        tokens_used: c.uint_opt("tokens_used")?,
        job_id: c.uuid_opt("job_id")?,
        owner: c.text_opt("owner")?,
        lease_until: c.time_opt("lease_until")?,
    })
}

fn tokens(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

async fn insert(conn: &mut sqlx::AnyConnection, run: &RoutineRun) -> Result<(), sqlx::Error> {
    sqlx::query(INSERT)
        .bind(run.id.to_string())
        .bind(run.routine_id.to_string())
        .bind(&run.trigger_type)
        .bind(run.trigger_detail.clone())
        .bind(micros_opt(run.scheduled_for))
        .bind(micros(run.started_at))
        .bind(micros_opt(run.completed_at))
        .bind(run.status.as_str())
        .bind(run.result_summary.clone())
        .bind(tokens(run.tokens_used))
        .bind(run.job_id.map(|j| j.to_string()))
        .bind(run.owner.clone())
        .bind(micros_opt(run.lease_until))
        .execute(conn)
        .await
        .map(|_| ())
}

impl Store {
    /// Claims the scheduled slot `run.scheduled_for` of a routine and records the run, atomically.
    ///
    /// Succeeds only if the routine is enabled and its `next_fire_at` still
    /// equals the slot (compare-and-set), moving it to `next`; the unique
    /// `(routine_id, scheduled_for)` key backs this up. Returns `false` when
    /// another process (or an earlier call) already took the slot.
    pub async fn claim_slot(
        &self,
        run: &RoutineRun,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        self.on_runtime(async {
            let Some(slot) = run.scheduled_for else {
                return Err(StoreError::Conflict(
                    "claim_slot needs a run with scheduled_for".to_string(),
                ));
            };
            let mut tx = self.begin_write().await?;
            let moved = sqlx::query(
                "UPDATE routines SET next_fire_at = $3, last_run_at = $4, run_count = run_count + 1, updated_at = $4 \
                 WHERE id = $1 AND enabled = 1 AND next_fire_at = $2",
            )
            .bind(run.routine_id.to_string())
            .bind(micros(slot))
            .bind(micros_opt(next))
            .bind(micros(run.started_at))
            .execute(&mut *tx)
            .await?;
            if moved.rows_affected() == 0 {
                tx.rollback().await?;
                return Ok(false);
            }
            match insert(&mut tx, run).await {
                Ok(()) => {
                    tx.commit().await?;
                    Ok(true)
                }
                Err(e) if is_unique_violation(&e) => {
                    tx.rollback().await?;
                    Ok(false)
                }
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// Records an unscheduled run (manual, event, webhook) and counts it on its routine.
    /// A run with `scheduled_for` set whose slot is taken is a conflict.
    pub async fn start_run(&self, run: &RoutineRun) -> Result<(), StoreError> {
        self.on_runtime(async {
            let mut tx = self.begin_write().await?;
            let counted = sqlx::query("UPDATE routines SET last_run_at = $2, run_count = run_count + 1, updated_at = $2 WHERE id = $1")
                .bind(run.routine_id.to_string())
                .bind(micros(run.started_at))
                .execute(&mut *tx)
                .await?;
            if counted.rows_affected() == 0 {
                return Err(StoreError::NotFound {
                    what: "routine",
                    id: run.routine_id.to_string(),
                });
            }
            match insert(&mut tx, run).await {
                Ok(()) => Ok(tx.commit().await?),
                Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(format!(
                    "routine {} already has a run for slot {}",
                    run.routine_id,
                    run.scheduled_for
                        .map(|s| s.to_rfc3339())
                        .unwrap_or_default()
                ))),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// Ends a running run and updates its routine's failure streak.
    /// Returns `false` if the run had already ended (reaped as interrupted, say).
    pub async fn finish_run(&self, run_id: Uuid, outcome: &RunOutcome) -> Result<bool, StoreError> {
        self.on_runtime(async {
            let mut tx = self.begin_write().await?;
            let done = sqlx::query(
                "UPDATE routine_runs SET status = $2, result_summary = $3, tokens_used = $4, completed_at = $5, \
                 owner = NULL, lease_until = NULL WHERE id = $1 AND status = 'running'",
            )
            .bind(run_id.to_string())
            .bind(outcome.status.as_str())
            .bind(outcome.summary.clone())
            .bind(tokens(outcome.tokens_used))
            .bind(micros(outcome.completed_at))
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                tx.rollback().await?;
                return Ok(false);
            }
            let streak = match outcome.status {
                RunStatus::Failed => Some("consecutive_failures + 1"),
                RunStatus::Ok | RunStatus::Attention => Some("0"),
                _ => None,
            };
            if let Some(expr) = streak {
                let sql = format!(
                    "UPDATE routines SET consecutive_failures = {expr} \
                     WHERE id = (SELECT routine_id FROM routine_runs WHERE id = $1)"
                );
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(run_id.to_string())
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    /// One run by id.
    pub async fn get_run(&self, id: Uuid) -> Result<Option<RoutineRun>, StoreError> {
        self.on_runtime(async {
            let sql = format!("SELECT {COLUMNS} FROM routine_runs WHERE id = $1");
            let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(id.to_string())
                .fetch_optional(self.pool())
                .await?;
            row.as_ref().map(decode).transpose()
        })
        .await
    }

    /// The latest runs of a routine, newest first.
    pub async fn list_runs(
        &self,
        routine_id: Uuid,
        limit: u32,
    ) -> Result<Vec<RoutineRun>, StoreError> {
        self.on_runtime(async {
            let sql = format!(
                "SELECT {COLUMNS} FROM routine_runs WHERE routine_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2"
            );
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(routine_id.to_string())
                .bind(i64::from(limit))
                .fetch_all(self.pool())
                .await?;
            rows.iter().map(decode).collect()
        })
        .await
    }

    /// Runs of one routine (or of all, when `None`) still `running`.
    pub async fn count_running(&self, routine_id: Option<Uuid>) -> Result<u64, StoreError> {
        self.on_runtime(async {
            let row = match routine_id {
                Some(id) => {
                    sqlx::query("SELECT COUNT(*) AS n FROM routine_runs WHERE status = 'running' AND routine_id = $1")
                        .bind(id.to_string())
                        .fetch_one(self.pool())
                        .await?
                }
                None => {
                    sqlx::query("SELECT COUNT(*) AS n FROM routine_runs WHERE status = 'running'")
                        .fetch_one(self.pool())
                        .await?
                }
            };
            Cols(&row).uint("n")
        })
        .await
    }

    /// Extends the lease of every running run held by `owner`; returns how many.
    pub async fn renew_leases(&self, owner: &str, until: DateTime<Utc>) -> Result<u64, StoreError> {
        self.on_runtime(async {
            let done = sqlx::query(
                "UPDATE routine_runs SET lease_until = $2 WHERE owner = $1 AND status = 'running'",
            )
            .bind(owner)
            .bind(micros(until))
            .execute(self.pool())
            .await?;
            Ok(done.rows_affected())
        })
        .await
    }

    /// Marks `interrupted` every running run whose lease ended before `now`
    /// (its process is gone); returns their ids so they can be reported.
    ///
    /// One conditional `UPDATE … RETURNING` (SQLite ≥ 3.35 and PostgreSQL): the
    /// lease is checked on the row being written, so a renewal committed while
    /// the reaper waits for the row wins. A select-then-update-by-id lost it.
    pub async fn reap_orphans(&self, now: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        self.on_runtime(async {
            let rows = sqlx::query(
                "UPDATE routine_runs SET status = 'interrupted', completed_at = $1, owner = NULL, lease_until = NULL, \
                 result_summary = COALESCE(result_summary, 'interrupted: the process running it stopped') \
                 WHERE status = 'running' AND (lease_until IS NULL OR lease_until < $1) RETURNING id",
            )
            .bind(micros(now))
            .fetch_all(self.pool())
            .await?;
            rows.iter().map(|r| Cols(r).uuid("id")).collect()
        })
        .await
    }
}
