//! Routine runs: claiming scheduled slots exactly once, leases, and how runs
//! end. Reaping the runs of processes that are gone is in `reap.rs`.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use uuid::Uuid;

use cairn_core::routine::{RoutineRun, RunStatus};

use crate::codec::{Cols, Params, micros, micros_opt};
use crate::exec::Conn;
use crate::{Store, StoreError};

pub(crate) const COLUMNS: &str = "id, routine_id, trigger_type, trigger_detail, scheduled_for, started_at, completed_at, \
     status, result_summary, tokens_used, job_id, owner, lease_until, notification_id, skip_reason, dedup_key, attempt";

/// `INSERT` of `rows` runs (a slot that already has its run is left as it is).
fn insert_sql(params: Params, rows: usize) -> String {
    format!(
        "INSERT INTO routine_runs ({COLUMNS}) VALUES {} ON CONFLICT DO NOTHING",
        params.rows(rows, 17, 1)
    )
}

/// Deletes the ended runs of `routine_ids` beyond each one's newest `keep`
/// (runs running or waiting their turn keep their place and are kept
/// whatever their age); how many were deleted. The caller holds the write
/// lock (SQLite) or the routines' row locks (PostgreSQL), so the counts
/// read first still hold when the runs are deleted.
pub(crate) async fn prune(
    conn: &mut Conn,
    routine_ids: &[String],
    keep: u32,
) -> Result<u64, StoreError> {
    let mut deleted = 0;
    let params = Params::of(conn);
    for chunk in Params::pieces(routine_ids, params.rows_per_statement(1)) {
        let over = beyond(conn, params, chunk, keep).await?;
        for routines in over.chunks(PRUNED_PER_STATEMENT) {
            // A routine's `count - keep` oldest runs are the ones past its
            // newest `keep`: walked from the old end of the
            // `(routine_id, started_at)` index, they are all its part reads
            // (ranking every run of the routine cost 7 times as much).
            let parts: Vec<String> = (0..routines.len())
                .map(|i| {
                    format!(
                        "SELECT id FROM (SELECT id FROM routine_runs WHERE routine_id = {} \
                         ORDER BY started_at, id LIMIT {}) AS old{i}",
                        params.one(2 * i + 1),
                        params.one(2 * i + 2)
                    )
                })
                .collect();
            let sql = format!(
                "DELETE FROM routine_runs WHERE id IN ({}) AND status NOT IN ('running', 'waiting')",
                parts.join(" UNION ALL ")
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (id, count) in routines {
                query = query
                    .bind(id.clone())
                    .bind(count.saturating_sub(i64::from(keep)));
            }
            deleted += query.execute(&mut *conn).await?.rows_affected();
        }
    }
    Ok(deleted)
}

/// Routines whose old runs one `DELETE` takes: well under SQLite's 500
/// terms of a compound `SELECT`.
const PRUNED_PER_STATEMENT: usize = 64;

/// Which of `routine_ids` have more than `keep` runs, with how many: only
/// those can have runs to prune. Counted on the `(routine_id, started_at)`
/// index alone, so a burst of routines with a run or two each deletes
/// nothing for 0.2 ms a batch of 256.
async fn beyond(
    conn: &mut Conn,
    params: Params,
    routine_ids: &[String],
    keep: u32,
) -> Result<Vec<(String, i64)>, StoreError> {
    let sql = format!(
        "SELECT routine_id, COUNT(*) AS n FROM routine_runs WHERE routine_id IN {} \
         GROUP BY routine_id HAVING COUNT(*) > {}",
        params.rows(1, routine_ids.len(), 1),
        params.one(routine_ids.len() + 1)
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for id in routine_ids {
        query = query.bind(id.clone());
    }
    let rows = query.bind(i64::from(keep)).fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|row| Ok((Cols(row).text("routine_id")?, Cols(row).int("n")?)))
        .collect()
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

pub(crate) fn tokens(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

/// Inserts a run; 0 rows when its slot already has one (the unique key).
pub(crate) async fn insert(conn: &mut Conn, run: &RoutineRun) -> Result<u64, sqlx::Error> {
    insert_many(conn, std::slice::from_ref(run)).await
}

/// Records runs, a multi-row `INSERT` per chunk; how many were recorded.
pub(crate) async fn insert_many(conn: &mut Conn, runs: &[RoutineRun]) -> Result<u64, sqlx::Error> {
    let mut recorded = 0;
    let params = Params::of(conn);
    for chunk in Params::pieces(runs, params.rows_per_statement(17)) {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(insert_sql(params, chunk.len())));
        for run in chunk {
            query = query
                .bind(run.id.to_string())
                .bind(run.routine_id.to_string())
                .bind(run.trigger_type.clone())
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
                .bind(i64::from(run.attempt));
        }
        recorded += query.execute(&mut *conn).await?.rows_affected();
    }
    Ok(recorded)
}

/// Gives back the routine's runs of claims made ahead of their slot and not
/// yet begun, as though the claim had not been made: a pause, a disable or
/// an edit before the slot decides that slot. Each claim's row is locked
/// first (on PostgreSQL; SQLite's writer lock serialises the rest), so a
/// claim being begun either waits for this or has already begun and is
/// left alone. The runs are deleted, counted in their claim's
/// `given_back` and no longer in `run_count`; returns the earliest slot
/// given back, if any (the caller decides whether the routine's next slot
/// goes back to it).
pub(crate) async fn give_back_unbegun(
    conn: &mut Conn,
    routine_id: &str,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    let lock = if Params::of(conn) == Params::Numbered {
        " FOR UPDATE"
    } else {
        ""
    };
    let sql = format!(
        "SELECT id FROM run_claims WHERE id IN (SELECT claim_id FROM routine_runs \
         WHERE routine_id = $1 AND status = 'running' AND claim_id IS NOT NULL){lock}"
    );
    let claims = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(routine_id)
        .fetch_all(&mut *conn)
        .await?;
    let mut earliest: Option<DateTime<Utc>> = None;
    let mut given = 0i64;
    for claim in &claims {
        let claim = Cols(claim).text("id")?;
        let rows = sqlx::query(
            "DELETE FROM routine_runs WHERE routine_id = $1 AND status = 'running' \
             AND claim_id = $2 RETURNING scheduled_for",
        )
        .bind(routine_id)
        .bind(&claim)
        .fetch_all(&mut *conn)
        .await?;
        for row in &rows {
            if let Some(slot) = Cols(row).time_opt("scheduled_for")? {
                earliest = Some(earliest.map_or(slot, |e| e.min(slot)));
            }
        }
        let n = i64::try_from(rows.len()).unwrap_or(i64::MAX);
        sqlx::query("UPDATE run_claims SET given_back = given_back + $2 WHERE id = $1")
            .bind(&claim)
            .bind(n)
            .execute(&mut *conn)
            .await?;
        given += n;
    }
    if given > 0 {
        sqlx::query(
            "UPDATE routines SET run_count = CASE WHEN run_count > $2 THEN run_count - $2 ELSE 0 END \
             WHERE id = $1",
        )
        .bind(routine_id)
        .bind(given)
        .execute(&mut *conn)
        .await?;
    }
    Ok(earliest)
}

/// Records claim `claim` of `slot`, made ahead of it, and marks runs `ids`
/// (just recorded, `running`) as its runs: unbegun until
/// [`Store::begin_claim`].
pub(crate) async fn mark_claimed(
    conn: &mut Conn,
    claim: Uuid,
    slot: DateTime<Utc>,
    ids: &[String],
) -> Result<(), sqlx::Error> {
    let claim = claim.to_string();
    sqlx::query("INSERT INTO run_claims (id, slot) VALUES ($1, $2) ON CONFLICT DO NOTHING")
        .bind(&claim)
        .bind(micros(slot))
        .execute(&mut *conn)
        .await?;
    let params = Params::of(conn);
    for chunk in Params::pieces(ids, params.rows_per_statement(1) - 1) {
        let sql = format!(
            "UPDATE routine_runs SET claim_id = {} WHERE id IN {}",
            params.one(1),
            params.rows(1, chunk.len(), 2)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(claim.clone());
        for id in chunk {
            query = query.bind(id.clone());
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Puts routine `id`'s next slot back to `slot` (given back by
/// [`give_back_unbegun`]); `reenable_once` also enables a one-shot again,
/// which its claim had disabled.
pub(crate) async fn restore_slot(
    conn: &mut Conn,
    id: &str,
    slot: DateTime<Utc>,
    reenable_once: bool,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE routines SET next_fire_at = $2, due_at = $2 + jitter_us, \
         enabled = CASE WHEN $3 = 1 AND trigger_type = 'once' THEN 1 ELSE enabled END \
         WHERE id = $1",
    )
    .bind(id)
    .bind(micros(slot))
    .bind(i64::from(reenable_once))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Records that a run started a job (so it shows while the run lasts).
    pub async fn set_run_job(&self, run_id: Uuid, job_id: Uuid) -> Result<(), StoreError> {
        sqlx::query("UPDATE routine_runs SET job_id = $2 WHERE id = $1")
            .bind(run_id.to_string())
            .bind(job_id.to_string())
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Deletes a routine's ended runs beyond the newest `keep`; returns how many.
    pub async fn prune_runs(&self, routine_id: Uuid, keep: u32) -> Result<u64, StoreError> {
        let ids = [routine_id.to_string()];
        let mut tx = self.begin_write().await?;
        crate::ahead::lock_routines(&mut *tx, self.backend(), &ids).await?;
        let deleted = prune(&mut *tx, &ids, keep).await?;
        tx.commit().await?;
        Ok(deleted)
    }

    /// When the routine's latest failed run ended (for backoff). An
    /// interrupted run is not the routine's failure and does not count.
    pub async fn last_failure_at(
        &self,
        routine_id: Uuid,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        let row = sqlx::query(
            "SELECT MAX(completed_at) AS at FROM routine_runs WHERE routine_id = $1 \
                 AND status = 'failed'",
        )
        .bind(routine_id.to_string())
        .fetch_one(self.pool())
        .await?;
        Cols(&row).time_opt("at")
    }

    /// One run by id.
    pub async fn get_run(&self, id: Uuid) -> Result<Option<RoutineRun>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM routine_runs WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(decode).transpose()
    }

    /// The latest runs of a routine, newest first.
    pub async fn list_runs(
        &self,
        routine_id: Uuid,
        limit: u32,
    ) -> Result<Vec<RoutineRun>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM routine_runs WHERE routine_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(routine_id.to_string())
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(decode).collect()
    }

    /// The runs of a routine's slots from `from` to `to` (both included),
    /// every attempt, oldest slot first.
    pub async fn slot_runs(
        &self,
        routine_id: Uuid,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<RoutineRun>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM routine_runs WHERE routine_id = $1 AND scheduled_for >= $2 \
                 AND scheduled_for <= $3 ORDER BY scheduled_for, attempt"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(routine_id.to_string())
            .bind(micros(from))
            .bind(micros(to))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(decode).collect()
    }

    /// Begins claim `claim`, made ahead of its slot, as the slot comes
    /// (the engine, a moment before it): from here a pause no longer gives
    /// its runs back. Returns how
    /// many were given back meanwhile (`None`: no such claim, so none can be
    /// vouched for). Claims that crashed engines left unbegun a day ago or
    /// more go too.
    pub async fn begin_claim(
        &self,
        claim: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<u64>, StoreError> {
        let mut tx = self.begin_write().await?;
        let row = sqlx::query("DELETE FROM run_claims WHERE id = $1 RETURNING given_back")
            .bind(claim.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        let given = row
            .as_ref()
            .map(|r| Cols(r).uint("given_back"))
            .transpose()?;
        sqlx::query("DELETE FROM run_claims WHERE slot < $1")
            .bind(micros(now - chrono::Duration::days(1)))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(given)
    }

    /// Which of the runs `ids` are still `running` (the others were given
    /// back, deleted or ended).
    pub async fn still_running(&self, ids: &[Uuid]) -> Result<HashSet<Uuid>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let params = Params::of(&*conn);
        let mut running = HashSet::with_capacity(ids.len());
        for chunk in Params::pieces(ids, params.rows_per_statement(1)) {
            let sql = format!(
                "SELECT id FROM routine_runs WHERE status = 'running' AND id IN {}",
                params.rows(1, chunk.len(), 1)
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(id.to_string());
            }
            for row in query.fetch_all(&mut *conn).await? {
                running.insert(Cols(&row).uuid("id")?);
            }
        }
        Ok(running)
    }

    /// Runs of one routine (or of all, when `None`) still `running`.
    pub async fn count_running(&self, routine_id: Option<Uuid>) -> Result<u64, StoreError> {
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
    }

    /// Extends one running run's lease; `false` if it is no longer running.
    pub async fn renew_run_lease(
        &self,
        run_id: Uuid,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE routine_runs SET lease_until = $2 WHERE id = $1 AND status = 'running'",
        )
        .bind(run_id.to_string())
        .bind(micros(until))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Extends the lease of every running run held by `owner`; returns how many.
    pub async fn renew_leases(&self, owner: &str, until: DateTime<Utc>) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE routine_runs SET lease_until = $2 WHERE owner = $1 AND status = 'running'",
        )
        .bind(owner)
        .bind(micros(until))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }
}
