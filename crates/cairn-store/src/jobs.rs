//! Full jobs: records, compare-and-set state changes, cancellation requests
//! from other processes, leases and orphan reaping.
//!
//! States only move forward (pending → in_progress ⇄ stuck → completed,
//! failed or cancelled), and every transition is a conditional UPDATE on the
//! state it expects, so a late writer (a worker finishing after the job was
//! reaped or cancelled) changes nothing and learns so from the `false` it gets.

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use uuid::Uuid;

use cairn_core::job::{CancelOutcome, JobOutcome, JobRecord, JobState, UnknownJobState};

use crate::codec::{Cols, micros, micros_opt};
use crate::error::is_unique_violation;
use crate::signal::Topic;
use crate::{Store, StoreError};

const COLUMNS: &str = "id, title, description, owner, origin, parent_id, state, created_at, started_at, \
     completed_at, last_activity_at, result, error, iterations, input_tokens, output_tokens, cost_micros, \
     max_iterations, timeout_ms, use_planning, cancel_requested, lease_owner, lease_until, repair_attempts, \
     needs_attention";

/// The states a holder keeps a lease on, as SQL.
const ACTIVE: &str = "('pending', 'in_progress', 'stuck')";

/// Error text of a running job whose process went away.
pub const INTERRUPTED_RUNNING: &str = "interrupted: the process running it stopped";

/// Error text of a queued job whose process went away before starting it.
pub const INTERRUPTED_PENDING: &str =
    "interrupted: the process that queued it stopped before it started";

/// What [`Store::repair_job`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobRepair {
    /// Counted as restart number `attempt` (from 1).
    Restarted {
        /// This restart's number.
        attempt: u32,
    },
    /// The attempts were used up: the job is now `failed` and needs attention.
    GaveUp,
    /// Nothing changed: the job ended, moved on, or a restart is already pending.
    Unchanged,
}

/// Which jobs [`Store::list_jobs`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFilter {
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs of this user.
    pub owner: Option<String>,
    /// Only subtasks of this job.
    pub parent_id: Option<Uuid>,
    /// At most this many, most recent first.
    pub limit: u32,
}

impl Default for JobFilter {
    fn default() -> Self {
        Self {
            state: None,
            owner: None,
            parent_id: None,
            limit: 50,
        }
    }
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn u32_of(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn decode(row: &AnyRow) -> Result<JobRecord, StoreError> {
    let c = Cols(row);
    let state = c.text("state")?;
    let timeout_ms = c.uint("timeout_ms")?;
    Ok(JobRecord {
        id: c.uuid("id")?,
        title: c.text("title")?,
        description: c.text("description")?,
        owner: c.text("owner")?,
        origin: c.text_opt("origin")?,
        parent_id: c.uuid_opt("parent_id")?,
        state: state
            .parse()
            .map_err(|e: UnknownJobState| StoreError::Corrupt {
                what: "jobs.state".to_string(),
                message: e.to_string(),
            })?,
        created_at: c.time("created_at")?,
        started_at: c.time_opt("started_at")?,
        completed_at: c.time_opt("completed_at")?,
        last_activity_at: c.time_opt("last_activity_at")?,
        result: c.text_opt("result")?,
        error: c.text_opt("error")?,
        iterations: u32_of(c.uint("iterations")?),
        input_tokens: c.uint("input_tokens")?,
        output_tokens: c.uint("output_tokens")?,
        cost_micros: c.uint("cost_micros")?,
        max_iterations: u32_of(c.uint("max_iterations")?),
        timeout: std::time::Duration::from_millis(timeout_ms),
        use_planning: c.boolean("use_planning")?,
        cancel_requested: c.boolean("cancel_requested")?,
        lease_owner: c.text_opt("lease_owner")?,
        lease_until: c.time_opt("lease_until")?,
        repair_attempts: u32_of(c.uint("repair_attempts")?),
        needs_attention: c.boolean("needs_attention")?,
    })
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Stores a new job; an id already used is a conflict.
    pub async fn create_job(&self, job: &JobRecord) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "INSERT INTO jobs ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
             $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)"
        );
        let timeout_ms = u64::try_from(job.timeout.as_millis()).unwrap_or(u64::MAX);
        let result = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(job.id.to_string())
            .bind(&job.title)
            .bind(&job.description)
            .bind(&job.owner)
            .bind(job.origin.clone())
            .bind(job.parent_id.map(|p| p.to_string()))
            .bind(job.state.as_str())
            .bind(micros(job.created_at))
            .bind(micros_opt(job.started_at))
            .bind(micros_opt(job.completed_at))
            .bind(micros_opt(job.last_activity_at))
            .bind(job.result.clone())
            .bind(job.error.clone())
            .bind(i64::from(job.iterations))
            .bind(i64_of(job.input_tokens))
            .bind(i64_of(job.output_tokens))
            .bind(i64_of(job.cost_micros))
            .bind(i64::from(job.max_iterations))
            .bind(i64_of(timeout_ms))
            .bind(i64::from(job.use_planning))
            .bind(i64::from(job.cancel_requested))
            .bind(job.lease_owner.clone())
            .bind(micros_opt(job.lease_until))
            .bind(i64::from(job.repair_attempts))
            .bind(i64::from(job.needs_attention))
            .execute(&mut *tx)
            .await;
        match result {
            Ok(_) => {
                // Schedulers watching leases (to reap orphans) hear of it.
                tx.publish(Topic::Jobs).await?;
                Ok(tx.commit().await?)
            }
            Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(format!(
                "a job with id {} already exists",
                job.id
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// One job by id.
    pub async fn get_job(&self, id: Uuid) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM jobs WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(decode).transpose()
    }

    /// The ids of the jobs a person's text names (`cairn_core::job::id_digits`):
    /// those whose hex digits start or end with it (the short form shown is
    /// the end), of `owner` only when given; at most 10, so "several" can
    /// be told from "one".
    pub async fn job_ids_like(
        &self,
        digits: &str,
        owner: Option<&str>,
    ) -> Result<Vec<Uuid>, StoreError> {
        let digits: String = digits
            .chars()
            .filter(char::is_ascii_hexdigit)
            .collect::<String>()
            .to_ascii_lowercase();
        let rows = sqlx::query(
            "SELECT id FROM jobs \
             WHERE (REPLACE(id, '-', '') LIKE $1 OR REPLACE(id, '-', '') LIKE $2) \
             AND ($3 IS NULL OR owner = $3) ORDER BY id LIMIT 10",
        )
        .bind(format!("{digits}%"))
        .bind(format!("%{digits}"))
        .bind(owner.map(str::to_owned))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(|r| Cols(r).uuid("id")).collect()
    }

    /// Jobs matching the filter, most recently created first.
    pub async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError> {
        // Absent filters bind NULL and match everything, so one query text serves all.
        let sql = format!(
            "SELECT {COLUMNS} FROM jobs \
             WHERE ($1 IS NULL OR state = $1) AND ($2 IS NULL OR owner = $2) AND ($3 IS NULL OR parent_id = $3) \
             ORDER BY created_at DESC, id DESC LIMIT $4"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(filter.state.map(JobState::as_str))
            .bind(filter.owner.clone())
            .bind(filter.parent_id.map(|p| p.to_string()))
            .bind(i64::from(filter.limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(decode).collect()
    }

    /// Moves a pending job to `in_progress` under `lease_owner`'s lease.
    /// Returns `false` (and changes nothing) unless it was still pending and
    /// no one asked to cancel it.
    pub async fn start_job(
        &self,
        id: Uuid,
        lease_owner: &str,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE jobs SET state = 'in_progress', started_at = $4, last_activity_at = $4, \
             lease_owner = $2, lease_until = $3 \
             WHERE id = $1 AND state = 'pending' AND cancel_requested = 0",
        )
        .bind(id.to_string())
        .bind(lease_owner)
        .bind(micros(lease_until))
        .bind(micros(now))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records how an active job ended and releases its lease. Returns `false`
    /// if it had already ended (cancelled, reaped): that verdict stands.
    pub async fn finish_job(&self, id: Uuid, outcome: &JobOutcome) -> Result<bool, StoreError> {
        outcome
            .ensure_terminal(id)
            .map_err(|e| StoreError::Conflict(e.to_string()))?;
        let sql = format!(
            "UPDATE jobs SET state = $2, result = $3, error = $4, iterations = $5, input_tokens = $6, \
             output_tokens = $7, cost_micros = $8, completed_at = $9, lease_owner = NULL, lease_until = NULL \
             WHERE id = $1 AND state IN {ACTIVE}"
        );
        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .bind(outcome.state.as_str())
            .bind(outcome.result.clone())
            .bind(outcome.error.clone())
            .bind(i64::from(outcome.iterations))
            .bind(i64_of(outcome.input_tokens))
            .bind(i64_of(outcome.output_tokens))
            .bind(i64_of(outcome.cost_micros))
            .bind(micros(outcome.completed_at))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Asks for a job to stop: a pending job is cancelled at once; a running
    /// (or stuck) one gets `cancel_requested`, which its process acts on.
    pub async fn request_job_cancel(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError> {
        let mut tx = self.begin_write().await?;
        let cancelled = sqlx::query(
            "UPDATE jobs SET state = 'cancelled', cancel_requested = 1, completed_at = $2, \
                 error = 'cancelled before it started', lease_owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND state = 'pending'",
        )
        .bind(id.to_string())
        .bind(micros(now))
        .execute(&mut *tx)
        .await?;
        if cancelled.rows_affected() == 1 {
            tx.publish(Topic::Jobs).await?;
            tx.commit().await?;
            return Ok(CancelOutcome::Cancelled);
        }
        // States never return to pending, so if the job is not running now it has ended.
        let requested = sqlx::query(
            "UPDATE jobs SET cancel_requested = 1 WHERE id = $1 AND state IN ('in_progress', 'stuck')",
        )
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
        if requested.rows_affected() == 1 {
            // The process running it hears this at once.
            tx.publish(Topic::Jobs).await?;
            tx.commit().await?;
            return Ok(CancelOutcome::Requested);
        }
        tx.rollback().await?;
        match self.get_job(id).await? {
            Some(job) => Ok(CancelOutcome::AlreadyEnded(job.state)),
            None => Err(StoreError::NotFound {
                what: "job",
                id: id.to_string(),
            }),
        }
    }

    /// Active jobs held by `lease_owner` that someone asked to cancel.
    pub async fn cancel_requested_jobs(&self, lease_owner: &str) -> Result<Vec<Uuid>, StoreError> {
        let sql = format!(
            "SELECT id FROM jobs WHERE lease_owner = $1 AND cancel_requested = 1 AND state IN {ACTIVE}"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(lease_owner)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| Cols(r).uuid("id")).collect()
    }

    /// Extends the lease of every active job held by `lease_owner`; returns how many.
    pub async fn renew_job_leases(
        &self,
        lease_owner: &str,
        until: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let sql = format!(
            "UPDATE jobs SET lease_until = $2 WHERE lease_owner = $1 AND state IN {ACTIVE}"
        );
        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(lease_owner)
            .bind(micros(until))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }

    /// Records the last sign of progress of a running (or stuck) job.
    pub async fn touch_job(&self, id: Uuid, at: DateTime<Utc>) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE jobs SET last_activity_at = $2 WHERE id = $1 AND state IN ('in_progress', 'stuck')",
        )
        .bind(id.to_string())
        .bind(micros(at))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks a running job `stuck` (or a stuck one `in_progress` again when
    /// `stuck` is false), recording its last activity. Returns `false` if the
    /// job was not in the expected state.
    pub async fn set_job_stuck(
        &self,
        id: Uuid,
        stuck: bool,
        last_activity_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let (to, from) = if stuck {
            ("stuck", "in_progress")
        } else {
            ("in_progress", "stuck")
        };
        let done = sqlx::query(
            "UPDATE jobs SET state = $2, last_activity_at = $4 WHERE id = $1 AND state = $3",
        )
        .bind(id.to_string())
        .bind(to)
        .bind(from)
        .bind(micros(last_activity_at))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records one self-repair of a running (or stuck) job that made no
    /// progress: below `max_attempts` restarts it counts a restart, puts the
    /// job back `in_progress` with fresh activity and, when `ask_holder`, flags
    /// it for the process holding it ([`Store::take_job_restart`]); at the
    /// limit it ends the job `failed` with `needs_attention` and `reason`.
    /// Both are compare-and-set, so concurrent repairers count once.
    pub async fn repair_job(
        &self,
        id: Uuid,
        max_attempts: u32,
        ask_holder: bool,
        reason: &str,
        now: DateTime<Utc>,
    ) -> Result<JobRepair, StoreError> {
        let restarted = sqlx::query(
            "UPDATE jobs SET repair_attempts = repair_attempts + 1, state = 'in_progress', \
                 last_activity_at = $3, restart_requested = $4 \
                 WHERE id = $1 AND state IN ('in_progress', 'stuck') AND repair_attempts < $2 \
                 AND restart_requested = 0 RETURNING repair_attempts",
        )
        .bind(id.to_string())
        .bind(i64::from(max_attempts))
        .bind(micros(now))
        .bind(i64::from(ask_holder))
        .fetch_optional(self.pool())
        .await?;
        if let Some(row) = restarted {
            if ask_holder {
                // The holder hears the request at once.
                self.publish(&[Topic::Jobs]).await?;
            }
            return Ok(JobRepair::Restarted {
                attempt: u32_of(Cols(&row).uint("repair_attempts")?),
            });
        }
        // The holder keeps its name (not its lease) so that, asked through
        // `restart_requested`, it finds the job and stops its worker.
        let given_up = sqlx::query(
            "UPDATE jobs SET state = 'failed', needs_attention = 1, error = $3, completed_at = $4, \
                 restart_requested = $5, lease_until = NULL \
                 WHERE id = $1 AND state IN ('in_progress', 'stuck') AND repair_attempts >= $2",
        )
        .bind(id.to_string())
        .bind(i64::from(max_attempts))
        .bind(reason)
        .bind(micros(now))
        .bind(i64::from(ask_holder))
        .execute(self.pool())
        .await?;
        if given_up.rows_affected() == 1 && ask_holder {
            self.publish(&[Topic::Jobs]).await?;
        }
        Ok(if given_up.rows_affected() == 1 {
            JobRepair::GaveUp
        } else {
            JobRepair::Unchanged
        })
    }

    /// Jobs held by `lease_owner` that self-repair asked it to act on: to
    /// restart (still active) or to stop (given up: `failed`, `needs_attention`).
    pub async fn restart_requested_jobs(&self, lease_owner: &str) -> Result<Vec<Uuid>, StoreError> {
        let sql = "SELECT id FROM jobs WHERE lease_owner = $1 AND restart_requested = 1";
        let rows = sqlx::query(sql)
            .bind(lease_owner)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| Cols(r).uuid("id")).collect()
    }

    /// Clears a restart request; `true` for the one caller that takes it.
    pub async fn take_job_restart(&self, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE jobs SET restart_requested = 0 WHERE id = $1 AND restart_requested = 1",
        )
        .bind(id.to_string())
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Running (or stuck) jobs whose holder is alive (lease not lapsed at
    /// `now`) but whose last activity is before `quiet_since`, oldest first.
    pub async fn quiet_jobs(
        &self,
        quiet_since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM jobs WHERE state IN ('in_progress', 'stuck') \
                 AND lease_until >= $2 AND COALESCE(last_activity_at, started_at, created_at) < $1"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(micros(quiet_since))
            .bind(micros(now))
            .fetch_all(self.pool())
            .await?;
        let mut jobs = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        jobs.sort_by_key(|j| j.last_activity_at);
        Ok(jobs)
    }

    /// Fails every active job whose lease ended before `now` (its process is
    /// gone) with an "interrupted" error; returns their ids. A job without a
    /// lease has no holder and is reaped too.
    pub async fn reap_orphan_jobs(&self, now: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        let sql = format!(
            "SELECT id, state FROM jobs WHERE state IN {ACTIVE} AND (lease_until IS NULL OR lease_until < $1)"
        );
        let mut tx = self.begin_write().await?;
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(micros(now))
            .fetch_all(&mut *tx)
            .await?;
        let mut reaped = Vec::with_capacity(rows.len());
        for row in &rows {
            let c = Cols(row);
            let (id, state) = (c.uuid("id")?, c.text("state")?);
            let error = if state == "pending" {
                INTERRUPTED_PENDING
            } else {
                INTERRUPTED_RUNNING
            };
            // The conditions are repeated so a lease renewed meanwhile wins.
            let done = sqlx::query(
                "UPDATE jobs SET state = 'failed', error = $3, completed_at = $4, lease_owner = NULL, lease_until = NULL \
                 WHERE id = $1 AND state = $2 AND (lease_until IS NULL OR lease_until < $4)",
            )
            .bind(id.to_string())
            .bind(&state)
            .bind(error)
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 1 {
                reaped.push(id);
            }
        }
        tx.commit().await?;
        Ok(reaped)
    }
}
