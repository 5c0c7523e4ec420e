//! What one admission transaction knows and defers: the runs it counted
//! and the writes it keeps for the end of the batch (see `admit.rs`).

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use cairn_core::routine::RoutineRun;

use crate::StoreError;
use crate::admit::{Admission, insert_new};
use crate::ahead::Ahead;
use crate::codec::{Params, micros};
use crate::exec::Conn;
use crate::runs::insert_many;

/// What one admission transaction knows so far, so that a batch reads and
/// writes per routine once rather than per fire. Valid because the
/// transaction holds the locks: SQLite's write lock, and on PostgreSQL the
/// routine's row (locked by its first admission) and the global counter row.
#[derive(Default)]
pub(crate) struct BatchState {
    /// Running runs of all routines (read once under the global cap's lock).
    pub(crate) running_total: Option<u64>,
    /// Runs waiting in the global queue (read with `running_total`).
    pub(crate) queued_total: Option<u64>,
    /// Runs this batch queued, with their fire: marked when written.
    pub(crate) queued: Vec<(String, Option<serde_json::Value>)>,
    /// Per routine id.
    routines: HashMap<String, RoutineState>,
    /// New runs of rounds read ahead, not yet written (see `ahead.rs`).
    unwritten_runs: Vec<RoutineRun>,
    /// Whether the runs of unscheduled fires may wait to be written together
    /// (see [`BatchState::defer`]).
    pub(crate) defers: bool,
    /// Runs of unscheduled fires not yet written. Unlike a round read ahead
    /// their ids were not checked: one may be taken already (a fire by hand
    /// sent twice with the id its caller chose).
    deferred_runs: Vec<RoutineRun>,
    /// A deferred run's id was taken when it was written: what the batch
    /// decided after believing it recorded is void, and the batch must be
    /// admitted again writing each run at once.
    pub(crate) redo: bool,
}

#[derive(Default)]
pub(crate) struct RoutineState {
    /// Its row is locked by this transaction (and it exists).
    pub(crate) locked: bool,
    /// Why it is paused, if it is (read when it was locked by an unscheduled fire).
    pub(crate) paused: Option<String>,
    /// Its running runs, once counted.
    pub(crate) running: Option<u64>,
    /// Runs started and the latest `last_run_at`, not yet written.
    unwritten: Option<(i64, DateTime<Utc>)>,
}

impl BatchState {
    /// A batch whose unscheduled runs wait to be written together
    /// ([`BatchState::defer`]).
    pub(crate) fn deferring() -> Self {
        Self {
            defers: true,
            ..Self::default()
        }
    }

    pub(crate) fn routine(&mut self, id: &str) -> &mut RoutineState {
        self.routines.entry(id.to_string()).or_default()
    }

    /// Keeps an unscheduled fire's run to be written with the others,
    /// before the next statement that could read it (see
    /// [`BatchState::reads_no_runs`]): one `INSERT` a batch rather than one
    /// a fire. Taken as recorded; [`BatchState::redo`] says otherwise.
    pub(crate) fn defer(&mut self, run: RoutineRun) {
        self.deferred_runs.push(run);
    }

    /// Whether admitting this unscheduled fire of `routine_id` reads no
    /// run, so that the runs deferred so far need not be written first:
    /// its routine is already locked by the batch, and every count its
    /// guardrails need is known (running runs, the global totals); no
    /// dedup or cooldown read. A refusal writes them first itself.
    pub(crate) fn reads_no_runs(
        &self,
        admission: &Admission,
        routine_id: &str,
        first: &RoutineRun,
    ) -> bool {
        let Some(state) = self.routines.get(routine_id) else {
            return false;
        };
        admission.slot.is_none()
            && admission.overlap.is_none()
            && state.locked
            && !(admission.dedup_window.is_some() && first.dedup_key.is_some())
            && admission.cooldown.is_none_or(|c| c.is_zero())
            && (admission.max_concurrent.is_none() || state.running.is_some())
            && (admission.global_max.is_none() || self.running_total.is_some())
    }

    /// Records `run` unless its slot already has one; whether it was
    /// recorded. A round read ahead knows which slots are taken, so its runs
    /// wait to be written together.
    pub(crate) async fn record(
        &mut self,
        conn: &mut Conn,
        ahead: Option<&mut Ahead>,
        run: &RoutineRun,
    ) -> Result<bool, StoreError> {
        match ahead {
            Some(ahead) => {
                let new = ahead.is_new(run);
                if new {
                    self.unwritten_runs.push(run.clone());
                }
                Ok(new)
            }
            None => insert_new(conn, run).await,
        }
    }

    /// Writes the runs waiting to be written: before a statement that reads
    /// runs, and at the end of the batch.
    pub(crate) async fn write_runs(&mut self, conn: &mut Conn) -> Result<(), StoreError> {
        if !self.deferred_runs.is_empty() {
            let runs = std::mem::take(&mut self.deferred_runs);
            if insert_many(conn, &runs).await? != runs.len() as u64 {
                self.redo = true;
            }
        }
        if self.unwritten_runs.is_empty() {
            return Ok(());
        }
        let runs = std::mem::take(&mut self.unwritten_runs);
        let written = insert_many(conn, &runs).await?;
        if written != runs.len() as u64 {
            // Their slots were read as free under the batch's locks: a
            // difference is a bug, and the whole batch rolls back.
            return Err(StoreError::Conflict(format!(
                "{} of {} runs read ahead as new already had their slot",
                runs.len() as u64 - written,
                runs.len()
            )));
        }
        Ok(())
    }

    /// Writes everything the batch deferred: its runs, then each routine's
    /// started runs and last fire time (one statement per chunk of routines).
    pub(crate) async fn flush(&mut self, conn: &mut Conn) -> Result<(), StoreError> {
        self.write_runs(conn).await?;
        self.mark_queued(conn).await?;
        let mut counts: Vec<(String, i64, DateTime<Utc>)> = self
            .routines
            .iter_mut()
            .filter_map(|(id, state)| {
                let (n, at) = state.unwritten.take()?;
                Some((id.clone(), n, at))
            })
            .collect();
        counts.sort_by(|a, b| a.0.cmp(&b.0));
        let params = Params::of(conn);
        for chunk in Params::pieces(&counts, params.rows_per_statement(3)) {
            let sql = format!(
                "UPDATE routines SET last_run_at = v.column2, run_count = run_count + v.column3 \
                 FROM (VALUES {}) AS v WHERE routines.id = v.column1",
                params.rows(chunk.len(), 3, 1)
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (id, n, at) in chunk {
                query = query.bind(id.clone()).bind(micros(*at)).bind(*n);
            }
            query.execute(&mut *conn).await?;
        }
        Ok(())
    }
}

/// Writes a routine's started runs and last fire time.
pub(crate) async fn count_started(
    conn: &mut Conn,
    routine_id: &str,
    started: i64,
    last_run_at: DateTime<Utc>,
    max_runs: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE routines SET last_run_at = $2, run_count = run_count + $3, \
         enabled = CASE WHEN $4 > 0 AND run_count + $3 >= $4 THEN 0 ELSE enabled END WHERE id = $1",
    )
    .bind(routine_id)
    .bind(micros(last_run_at))
    .bind(started)
    .bind(max_runs)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Writes what the batch deferred for one routine (see [`admit_one`]).
async fn flush_routine(
    conn: &mut Conn,
    routine_id: &str,
    state: &mut RoutineState,
) -> Result<(), StoreError> {
    if let Some((started, at)) = state.unwritten.take() {
        count_started(conn, routine_id, started, at, 0).await?;
    }
    Ok(())
}

impl BatchState {
    /// Counts `started` runs of a routine (and its last fire at `at`) for
    /// the batch: at once when a run limit needs the counter current, else
    /// once at the end of the batch.
    pub(crate) async fn count(
        &mut self,
        routine_id: &str,
        admission: &Admission,
        started: u64,
        at: DateTime<Utc>,
        conn: &mut Conn,
    ) -> Result<(), StoreError> {
        if let Some(total) = self.running_total.as_mut() {
            *total += started;
        }
        let state = self.routine(routine_id);
        if let Some(n) = state.running.as_mut() {
            *n += started;
        }
        let count = i64::try_from(started).unwrap_or(i64::MAX);
        match admission.max_runs {
            // Without a run limit nothing in the batch reads the counter: one
            // write per routine at the end of the batch.
            None => {
                let (n, _) = state.unwritten.unwrap_or((0, at));
                state.unwritten = Some((n + count, at));
            }
            Some(max_runs) => {
                flush_routine(conn, routine_id, state).await?;
                let max_runs = i64::try_from(max_runs).unwrap_or(i64::MAX);
                count_started(conn, routine_id, count, at, max_runs).await?;
            }
        }
        Ok(())
    }
}
