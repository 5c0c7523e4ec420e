//! Routine runs: claiming scheduled slots exactly once, leases, and how runs
//! end. Reaping the runs of processes that are gone is in `reap.rs`.

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use uuid::Uuid;

use cairn_core::notification::Notification;
use cairn_core::routine::{RoutineRun, RunStatus};

use crate::codec::{Cols, micros, micros_opt};
use crate::{Store, StoreError};

pub(crate) const COLUMNS: &str = "id, routine_id, trigger_type, trigger_detail, scheduled_for, started_at, completed_at, \
     status, result_summary, tokens_used, job_id, owner, lease_until, notification_id, skip_reason, dedup_key, attempt";

const INSERT: &str = "INSERT INTO routine_runs (id, routine_id, trigger_type, trigger_detail, scheduled_for, \
     started_at, completed_at, status, result_summary, tokens_used, job_id, owner, lease_until, \
     notification_id, skip_reason, dedup_key, attempt) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
     ON CONFLICT DO NOTHING";

/// Deletes a routine's (`$1`) ended runs beyond its newest `$2`.
pub(crate) const PRUNE: &str = "DELETE FROM routine_runs WHERE routine_id = $1 AND status <> 'running' AND id NOT IN \
     (SELECT id FROM routine_runs WHERE routine_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2)";

async fn routine_id_of(conn: &mut sqlx::AnyConnection, run_id: Uuid) -> Result<String, StoreError> {
    let row = sqlx::query("SELECT routine_id FROM routine_runs WHERE id = $1")
        .bind(run_id.to_string())
        .fetch_one(conn)
        .await?;
    Cols(&row).text("routine_id")
}

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
    /// The notification sent about it.
    pub notification_id: Option<Uuid>,
    /// The routine's new JSON state, when the run replaced it.
    pub state: Option<serde_json::Value>,
    /// Keep only this many of the routine's latest runs (pruned in the same
    /// transaction, so a run costs one write transaction to end).
    pub retain: Option<u32>,
}

/// One run to end in [`Store::finish_runs`].
#[derive(Debug, Clone, PartialEq)]
pub struct FinishRun {
    /// The run.
    pub run_id: Uuid,
    /// Its routine.
    pub routine_id: Uuid,
    /// How it ended (`notification_id` names `notification`, if any).
    pub outcome: RunOutcome,
    /// The notification about it, recorded in the same transaction.
    pub notification: Option<Notification>,
}

/// A routine's failure streak after some runs ended, relative to before.
#[derive(Debug, Clone, Copy)]
enum Streak {
    /// Unchanged (no run that counts).
    Keep,
    /// This many more failures.
    Add(i64),
    /// Reset by a success, then this many failures.
    Set(i64),
}

impl Streak {
    /// The streak after a further run ending `status`.
    fn then(self, status: RunStatus) -> Streak {
        match (status, self) {
            (RunStatus::Failed, Streak::Keep) => Streak::Add(1),
            (RunStatus::Failed, Streak::Add(n)) => Streak::Add(n + 1),
            (RunStatus::Failed, Streak::Set(n)) => Streak::Set(n + 1),
            (RunStatus::Ok | RunStatus::Attention, _) => Streak::Set(0),
            (_, s) => s,
        }
    }
}

pub(crate) fn decode(row: &AnyRow) -> Result<RoutineRun, StoreError> {
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
        notification_id: c.uuid_opt("notification_id")?,
        skip_reason: c.text_opt("skip_reason")?,
        dedup_key: c.text_opt("dedup_key")?,
        attempt: u32::try_from(c.uint("attempt")?).unwrap_or(u32::MAX),
    })
}

fn tokens(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

/// Inserts a run; 0 rows when its slot already has one (the unique key).
pub(crate) async fn insert(
    conn: &mut sqlx::AnyConnection,
    run: &RoutineRun,
) -> Result<u64, sqlx::Error> {
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
        .bind(run.notification_id.map(|n| n.to_string()))
        .bind(run.skip_reason.clone())
        .bind(run.dedup_key.clone())
        .bind(i64::from(run.attempt))
        .execute(conn)
        .await
        .map(|done| done.rows_affected())
}

/// Rows per multi-row run-ending `UPDATE` (7 parameters each; kept small
/// for the same reason as notification inserts).
const END_CHUNK: usize = 16;

/// Ends the batch's runs that are still running; per entry, whether it was.
/// One `UPDATE … FROM (VALUES …) RETURNING` per chunk (SQLite ≥ 3.35 and
/// PostgreSQL both name the values' columns `column1`, `column2`, …); a
/// batch naming a run twice is ended row by row, in order, instead.
async fn end_runs(
    conn: &mut sqlx::AnyConnection,
    batch: &[FinishRun],
) -> Result<Vec<bool>, StoreError> {
    let mut ids: Vec<Uuid> = batch.iter().map(|f| f.run_id).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() < batch.len() {
        let mut ended = Vec::with_capacity(batch.len());
        for f in batch {
            let o = &f.outcome;
            let done = sqlx::query(
                "UPDATE routine_runs SET status = $2, result_summary = $3, tokens_used = $4, completed_at = $5, \
                 notification_id = $6, owner = NULL, lease_until = NULL WHERE id = $1 AND status = 'running'",
            )
            .bind(f.run_id.to_string())
            .bind(o.status.as_str())
            .bind(o.summary.clone())
            .bind(tokens(o.tokens_used))
            .bind(micros(o.completed_at))
            .bind(o.notification_id.map(|n| n.to_string()))
            .execute(&mut *conn)
            .await?;
            ended.push(done.rows_affected() > 0);
        }
        return Ok(ended);
    }
    let mut done = std::collections::HashSet::with_capacity(batch.len());
    for chunk in batch.chunks(END_CHUNK) {
        let mut values = String::new();
        for i in 0..chunk.len() {
            let b = i * 6;
            if i > 0 {
                values.push_str(", ");
            }
            values.push_str(&format!(
                "(${}, ${}, ${}, ${}, ${}, ${})",
                b + 1,
                b + 2,
                b + 3,
                b + 4,
                b + 5,
                b + 6
            ));
        }
        let sql = format!(
            "UPDATE routine_runs SET status = v.column2, result_summary = v.column3, \
             tokens_used = v.column4, completed_at = v.column5, notification_id = v.column6, \
             owner = NULL, lease_until = NULL FROM (VALUES {values}) AS v \
             WHERE routine_runs.id = v.column1 AND routine_runs.status = 'running' \
             RETURNING routine_runs.id AS id"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for f in chunk {
            let o = &f.outcome;
            q = q
                .bind(f.run_id.to_string())
                .bind(o.status.as_str())
                .bind(o.summary.clone())
                .bind(tokens(o.tokens_used))
                .bind(micros(o.completed_at))
                .bind(o.notification_id.map(|n| n.to_string()));
        }
        for row in q.fetch_all(&mut *conn).await? {
            done.insert(Cols(&row).text("id")?);
        }
    }
    Ok(batch
        .iter()
        .map(|f| done.contains(&f.run_id.to_string()))
        .collect())
}

impl Store {
    /// Records that a run started a job (so it shows while the run lasts).
    pub async fn set_run_job(&self, run_id: Uuid, job_id: Uuid) -> Result<(), StoreError> {
        self.on_runtime(async {
            sqlx::query("UPDATE routine_runs SET job_id = $2 WHERE id = $1")
                .bind(run_id.to_string())
                .bind(job_id.to_string())
                .execute(self.pool())
                .await?;
            Ok(())
        })
        .await
    }

    /// Deletes a routine's ended runs beyond the newest `keep`; returns how many.
    pub async fn prune_runs(&self, routine_id: Uuid, keep: u32) -> Result<u64, StoreError> {
        self.on_runtime(async {
            let done = sqlx::query(PRUNE)
                .bind(routine_id.to_string())
                .bind(i64::from(keep))
                .execute(self.pool())
                .await?;
            Ok(done.rows_affected())
        })
        .await
    }

    /// When the routine's latest failed run ended (for backoff). An
    /// interrupted run is not the routine's failure and does not count.
    pub async fn last_failure_at(
        &self,
        routine_id: Uuid,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.on_runtime(async {
            let row = sqlx::query(
                "SELECT MAX(completed_at) AS at FROM routine_runs WHERE routine_id = $1 \
                 AND status = 'failed'",
            )
            .bind(routine_id.to_string())
            .fetch_one(self.pool())
            .await?;
            Cols(&row).time_opt("at")
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
                 notification_id = $6, owner = NULL, lease_until = NULL WHERE id = $1 AND status = 'running'",
            )
            .bind(run_id.to_string())
            .bind(outcome.status.as_str())
            .bind(outcome.summary.clone())
            .bind(tokens(outcome.tokens_used))
            .bind(micros(outcome.completed_at))
            .bind(outcome.notification_id.map(|n| n.to_string()))
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
            if let Some(keep) = outcome.retain {
                sqlx::query(PRUNE)
                    .bind(routine_id_of(&mut tx, run_id).await?)
                    .bind(i64::from(keep))
                    .execute(&mut *tx)
                    .await?;
            }
            if let Some(state) = &outcome.state {
                sqlx::query(
                    "UPDATE routines SET state = $2 WHERE id = (SELECT routine_id FROM routine_runs WHERE id = $1)",
                )
                .bind(run_id.to_string())
                .bind(crate::codec::json(state, "state")?)
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    /// Ends several running runs in one transaction, each with the
    /// notification sent about it (recorded in the same transaction, whether
    /// or not its run was still running, so it is never lost). Returns, per
    /// entry, whether its run was still running (as [`Store::finish_run`]).
    ///
    /// Failure streaks, state and retention are applied once per routine
    /// for the batch, with the same result as ending the runs one by one in
    /// order; a routine's runs beyond its retention are pruned after the
    /// batch rather than after each run.
    pub async fn finish_runs(&self, batch: &[FinishRun]) -> Result<Vec<bool>, StoreError> {
        self.on_runtime(async {
            let mut tx = self.begin_write().await?;
            let notes: Vec<Notification> = batch
                .iter()
                .filter_map(|f| f.notification.clone())
                .collect();
            crate::notifications::insert_notifications(&mut tx, &notes).await?;
            let ended = end_runs(&mut tx, batch).await?;
            // Per routine: streak, state, retention.
            let mut routines: Vec<(Uuid, Streak, Option<&serde_json::Value>, Option<u32>)> =
                Vec::new();
            for (f, was_running) in batch.iter().zip(&ended) {
                if !was_running {
                    continue;
                }
                let o = &f.outcome;
                let at = match routines.iter().position(|r| r.0 == f.routine_id) {
                    Some(i) => i,
                    None => {
                        routines.push((f.routine_id, Streak::Keep, None, None));
                        routines.len() - 1
                    }
                };
                let entry = &mut routines[at];
                entry.1 = entry.1.then(o.status);
                if let Some(state) = &o.state {
                    entry.2 = Some(state);
                }
                if o.retain.is_some() {
                    entry.3 = o.retain;
                }
            }
            // In id order, so two processes' batches lock routine rows in
            // the same order on PostgreSQL (no deadlock between them).
            routines.sort_by_key(|r| r.0);
            for (routine_id, streak, state, retain) in routines {
                let id = routine_id.to_string();
                match streak {
                    Streak::Keep | Streak::Add(0) => {}
                    Streak::Add(n) => {
                        sqlx::query("UPDATE routines SET consecutive_failures = consecutive_failures + $2 WHERE id = $1")
                            .bind(&id)
                            .bind(n)
                            .execute(&mut *tx)
                            .await?;
                    }
                    Streak::Set(n) => {
                        sqlx::query("UPDATE routines SET consecutive_failures = $2 WHERE id = $1")
                            .bind(&id)
                            .bind(n)
                            .execute(&mut *tx)
                            .await?;
                    }
                }
                if let Some(state) = state {
                    sqlx::query("UPDATE routines SET state = $2 WHERE id = $1")
                        .bind(&id)
                        .bind(crate::codec::json(state, "state")?)
                        .execute(&mut *tx)
                        .await?;
                }
                if let Some(keep) = retain {
                    sqlx::query(PRUNE)
                        .bind(&id)
                        .bind(i64::from(keep))
                        .execute(&mut *tx)
                        .await?;
                }
            }
            tx.commit().await?;
            Ok(ended)
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

    /// Extends one running run's lease; `false` if it is no longer running.
    pub async fn renew_run_lease(
        &self,
        run_id: Uuid,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.on_runtime(async {
            let done = sqlx::query(
                "UPDATE routine_runs SET lease_until = $2 WHERE id = $1 AND status = 'running'",
            )
            .bind(run_id.to_string())
            .bind(micros(until))
            .execute(self.pool())
            .await?;
            Ok(done.rows_affected() > 0)
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
}
