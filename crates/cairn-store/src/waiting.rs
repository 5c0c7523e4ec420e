//! Starting slots that wait their turn (`waiting` runs: buffered by
//! `overlap`, caught up with `catch_up: all`, backfilled). A routine's
//! waiting slots run one at a time, oldest slot first, whenever none of its
//! runs is `running`; the start is a compare-and-set on the run's status in
//! a write transaction that locks the routine's row, so of several engines
//! one starts each slot. A paused routine's slots keep waiting until it is
//! resumed; a disabled routine's are recorded skipped.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use cairn_core::routine::{Routine, RoutineRun, RunStatus, Trigger};

use crate::admit::{count_started, running_total_locked};
use crate::codec::{Cols, micros};
use crate::routines::routine_by_id;
use crate::runs::{COLUMNS, decode};
use crate::{Rerunner, Store, StoreError};

/// A waiting slot now started, `running` under the starter's lease.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedSlot {
    /// Its routine, as read when it started.
    pub routine: Routine,
    /// The run.
    pub run: RoutineRun,
}

impl Store {
    /// Starts the next waiting slot of each routine (or of `routine` only)
    /// that has one and no run going, as `starter`'s runs (the engine that
    /// re-runs what its reaps interrupt starts these too), at `now`; slots
    /// stay waiting while `starter.global_max` runs of all routines run.
    /// Without waiting slots this is one read and no write.
    pub async fn start_waiting(
        &self,
        routine: Option<Uuid>,
        starter: &Rerunner,
        now: DateTime<Utc>,
    ) -> Result<Vec<StartedSlot>, StoreError> {
        self.on_runtime(async {
            let rows = match routine {
                Some(id) => {
                    sqlx::query(
                        "SELECT DISTINCT routine_id FROM routine_runs \
                         WHERE status = 'waiting' AND routine_id = $1",
                    )
                    .bind(id.to_string())
                    .fetch_all(self.pool())
                    .await?
                }
                None => {
                    sqlx::query(
                        "SELECT DISTINCT routine_id FROM routine_runs WHERE status = 'waiting'",
                    )
                    .fetch_all(self.pool())
                    .await?
                }
            };
            let mut ids = rows
                .iter()
                .map(|r| Cols(r).text("routine_id"))
                .collect::<Result<Vec<_>, _>>()?;
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            // Routine rows are locked in id order, as `finish_runs` does.
            ids.sort();
            let mut tx = self.begin_write().await?;
            let mut total = match starter.global_max {
                Some(_) => Some(running_total_locked(&mut tx).await?),
                None => None,
            };
            let mut started = Vec::new();
            for id in ids {
                if let (Some(max), Some(n)) = (starter.global_max, total)
                    && n >= u64::from(max)
                {
                    break;
                }
                if let Some(slot) = start_next(&mut tx, &id, starter, now).await? {
                    total = total.map(|n| n + 1);
                    started.push(slot);
                }
            }
            if !started.is_empty() {
                // New leases for reapers to watch.
                tx.publish(crate::signal::Topic::Runs).await?;
            }
            tx.commit().await?;
            Ok(started)
        })
        .await
    }
}

/// Starts routine `id`'s oldest waiting slot if it may start now.
async fn start_next(
    conn: &mut sqlx::AnyConnection,
    id: &str,
    starter: &Rerunner,
    now: DateTime<Utc>,
) -> Result<Option<StartedSlot>, StoreError> {
    // Locks the row on PostgreSQL, as an admission does.
    let present = sqlx::query("UPDATE routines SET run_count = run_count WHERE id = $1")
        .bind(id)
        .execute(&mut *conn)
        .await?
        .rows_affected()
        > 0;
    let Some(routine) = routine_by_id(conn, id).await?.filter(|_| present) else {
        return Ok(None);
    };
    if routine.runtime.paused.is_some() {
        return Ok(None);
    }
    // A one-shot is disabled by its own claim; any other disabled routine
    // was stopped by someone and its waiting slots are not run.
    if !routine.spec.enabled && !matches!(routine.spec.trigger, Trigger::Once { .. }) {
        sqlx::query(
            "UPDATE routine_runs SET status = 'skipped', completed_at = $2, \
             skip_reason = 'not run: the routine was disabled before this slot''s turn' \
             WHERE routine_id = $1 AND status = 'waiting'",
        )
        .bind(id)
        .bind(micros(now))
        .execute(&mut *conn)
        .await?;
        return Ok(None);
    }
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM routine_runs WHERE routine_id = $1 AND status = 'running'",
    )
    .bind(id)
    .fetch_one(&mut *conn)
    .await?;
    if Cols(&row).uint("n")? > 0 {
        return Ok(None);
    }
    let sql = format!(
        "UPDATE routine_runs SET status = 'running', started_at = $2, owner = $3, lease_until = $4 \
         WHERE id = (SELECT id FROM routine_runs WHERE routine_id = $1 AND status = 'waiting' \
         ORDER BY scheduled_for, started_at, id LIMIT 1) AND status = 'waiting' RETURNING {COLUMNS}"
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(micros(now))
        .bind(&starter.owner)
        .bind(micros(starter.lease_until))
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let run = decode(&row)?;
    debug_assert_eq!(run.status, RunStatus::Running);
    let max_runs = routine
        .spec
        .guardrails
        .max_runs
        .map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX));
    count_started(conn, id, 1, now, max_runs).await?;
    Ok(Some(StartedSlot { routine, run }))
}
