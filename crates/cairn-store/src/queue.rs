//! The global run limit's queue. `routines.max_concurrent` is a resource
//! limit: a run admitted while that many runs of all routines are going
//! (or while others already wait for a place) is recorded `waiting`, with
//! `queued_at` set and the reason, and starts when a place frees, oldest
//! slot first (`waiting.rs`). Only a full queue (`routines.max_waiting`)
//! refuses a run, recorded `skipped` with [`QUEUE_FULL`] in its reason.

use chrono::{DateTime, Utc};

use cairn_core::routine::{RoutineRun, RunStatus};

use crate::StoreError;
use crate::admit::Admission;
use crate::batch::BatchState;
use crate::codec::{Cols, Params, micros};
use crate::exec::Conn;

/// The start of the reason a run refused by a full queue is recorded with.
pub const QUEUE_FULL: &str = "global queue full";

/// Where the global limit puts one more run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// A place is free: it runs now.
    Start,
    /// Every place is taken: it waits, with this reason.
    Queue(String),
    /// The queue is full too: it is refused, with this reason.
    Full(String),
}

/// `run` as a run waiting in the global queue for `reason`.
pub(crate) fn queued(run: &RoutineRun, reason: &str) -> RoutineRun {
    let mut waiting = run.clone();
    waiting.status = RunStatus::Waiting;
    waiting.owner = None;
    waiting.lease_until = None;
    waiting.skip_reason = Some(match &run.skip_reason {
        Some(note) => format!("{note}; then {reason}"),
        None => reason.to_string(),
    });
    waiting
}

impl BatchState {
    /// Reads the totals the global limit needs, once per batch, under the
    /// global cap's lock (`lock_global_cap`).
    pub(crate) async fn read_totals(
        &mut self,
        conn: &mut Conn,
        admission: &Admission,
    ) -> Result<(), StoreError> {
        if admission.global_max.is_none() {
            return Ok(());
        }
        // Both are read here, together, and only here.
        if self.running_total.is_some() {
            return Ok(());
        }
        crate::admit::lock_global_cap(conn).await?;
        // Both in one statement, each count on its own index.
        let row = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM routine_runs WHERE status = 'running') AS running, \
             (SELECT COUNT(*) FROM routine_runs WHERE status = 'waiting' \
             AND queued_at IS NOT NULL) AS queued",
        )
        .fetch_one(&mut *conn)
        .await?;
        let c = Cols(&row);
        self.running_total = Some(c.uint("running")?);
        self.queued_total = Some(c.uint("queued")?);
        Ok(())
    }

    /// Where the global limit puts one more run of `admission` now. A run
    /// starts only while the runs going and those already queued leave a
    /// place, so none jumps the queue.
    pub(crate) fn place(&self, admission: &Admission) -> Place {
        let (Some(max), Some(running)) = (admission.global_max, self.running_total) else {
            return Place::Start;
        };
        let queued = self.queued_total.unwrap_or(0);
        if running + queued < u64::from(max) {
            return Place::Start;
        }
        match admission.queue_max {
            Some(most) if queued >= u64::from(most) => Place::Full(format!(
                "{QUEUE_FULL} (routines.max_waiting = {most}): {running} running, {queued} waiting"
            )),
            _ => Place::Queue(format!(
                "global limit: {running} running (routines.max_concurrent = {max})"
            )),
        }
    }

    /// Notes a run recorded in the global queue: counted, and marked (with
    /// its fire, if it has one) when the batch is written.
    pub(crate) fn note_queued(&mut self, run: &RoutineRun, fire: Option<&serde_json::Value>) {
        if let Some(n) = self.queued_total.as_mut() {
            *n += 1;
        }
        self.queued.push((run.id.to_string(), fire.cloned()));
    }

    /// Marks the runs the batch queued (`queued_at`, their fire): after
    /// they are written.
    pub(crate) async fn mark_queued(&mut self, conn: &mut Conn) -> Result<(), StoreError> {
        let marks = std::mem::take(&mut self.queued);
        if marks.is_empty() {
            return Ok(());
        }
        let params = Params::of(conn);
        let ids: Vec<&String> = marks.iter().map(|(id, _)| id).collect();
        for chunk in Params::pieces(&ids, params.rows_per_statement(1)) {
            let sql = format!(
                "UPDATE routine_runs SET queued_at = started_at WHERE id IN {}",
                params.rows(1, chunk.len(), 1)
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind((*id).clone());
            }
            query.execute(&mut *conn).await?;
        }
        for (id, fire) in &marks {
            if let Some(fire) = fire {
                sqlx::query("UPDATE routine_runs SET fire = $2 WHERE id = $1")
                    .bind(id)
                    .bind(crate::codec::json(fire, "fire")?)
                    .execute(&mut *conn)
                    .await?;
            }
        }
        Ok(())
    }
}

/// After a one-shot's slot was admitted (its claim disabled it): a
/// one-shot is disabled only once a run of it starts. While its run waits
/// it stays enabled (with no next slot); refused by a full queue, it stays
/// enabled and its slot moves to the admission's `retry` time, so it is
/// tried again rather than lost.
pub(crate) async fn settle_one_shot(
    conn: &mut Conn,
    admission: &Admission,
    routine_id: &str,
    recorded: &[RoutineRun],
) -> Result<(), StoreError> {
    let Some(slot) = admission.slot.as_ref().filter(|s| s.disable) else {
        return Ok(());
    };
    if recorded.iter().any(|r| r.status == RunStatus::Running) {
        return Ok(());
    }
    let full = recorded.iter().any(|r| {
        r.status == RunStatus::Skipped
            && r.skip_reason
                .as_deref()
                .is_some_and(|s| s.contains(QUEUE_FULL))
    });
    if recorded.iter().any(|r| r.status == RunStatus::Waiting) {
        sqlx::query("UPDATE routines SET enabled = 1 WHERE id = $1")
            .bind(routine_id)
            .execute(&mut *conn)
            .await?;
    } else if let (true, Some(retry)) = (full, slot.retry) {
        retry_at(conn, routine_id, retry).await?;
    }
    Ok(())
}

/// Enables routine `id` again with its next slot at `at`.
async fn retry_at(conn: &mut Conn, id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE routines SET enabled = 1, next_fire_at = $2, due_at = $2 + jitter_us WHERE id = $1",
    )
    .bind(id)
    .bind(micros(at))
    .execute(&mut *conn)
    .await?;
    Ok(())
}
