//! Starting runs that wait: slots buffered by `overlap`, caught up with
//! `catch_up: all` or backfilled, and runs queued behind the global limit
//! (`queue.rs`). They start oldest slot first across all routines (an
//! unscheduled fire's time stands for its slot), as many as the global
//! limit has places for, each once its routine allows it: not paused, and
//! fewer of its runs going than it lets run at once (its `max_concurrent`
//! under `overlap: allow_all`, else one). The start is a compare-and-set on
//! the run's status in a write transaction that locks the routine's row,
//! so of several engines one starts each run. A paused routine's runs keep
//! waiting until it is resumed; a disabled routine's are recorded skipped.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use cairn_core::routine::{Overlap, Routine, RoutineRun, RunStatus, Trigger};

use crate::admit::running_total_locked;
use crate::batch::count_started;
use crate::codec::{Cols, micros};
use crate::exec::Conn;
use crate::routines::routine_by_id;
use crate::runs::{COLUMNS, decode};
use crate::{Rerunner, Store, StoreError};

/// Waiting runs read per statement while looking for ones that may start.
const PAGE: i64 = 64;

/// A waiting run now started, `running` under the starter's lease.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedSlot {
    /// Its routine, as read when it started.
    pub routine: Routine,
    /// The run.
    pub run: RoutineRun,
    /// What its fire handed the action, kept while it waited (an
    /// unscheduled fire queued behind the global limit).
    pub fire: Option<serde_json::Value>,
}

/// What the transaction knows of a routine with waiting runs.
struct Seen {
    routine: Routine,
    /// Its runs going.
    running: u64,
    /// Most of its runs going at once.
    limit: u64,
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Starts the waiting runs (of all routines, or of `routine` only) that
    /// may start at `now`, oldest slot first, as `starter`'s runs (the engine
    /// that re-runs what its reaps interrupt starts these too); while
    /// `starter.global_max` runs of all routines run, none starts. Without
    /// waiting runs, or with every place taken, this is reads and no write.
    pub async fn start_waiting(
        &self,
        routine: Option<Uuid>,
        starter: &Rerunner,
        now: DateTime<Utc>,
    ) -> Result<Vec<StartedSlot>, StoreError> {
        let only = routine.map(|id| id.to_string());
        if !self.any_waiting(only.as_deref(), now).await? {
            return Ok(Vec::new());
        }
        if let Some(max) = starter.global_max {
            let row =
                sqlx::query("SELECT COUNT(*) AS n FROM routine_runs WHERE status = 'running'")
                    .fetch_one(self.pool())
                    .await?;
            if Cols(&row).uint("n")? >= u64::from(max) {
                // A run's end calls again when a place frees.
                return Ok(Vec::new());
            }
        }
        let mut tx = self.begin_write().await?;
        let started = start_in_order(&mut *tx, only.as_deref(), starter, now).await?;
        if !started.is_empty() {
            // New leases for reapers to watch.
            tx.publish(crate::signal::Topic::Runs).await?;
        }
        tx.commit().await?;
        Ok(started)
    }

    /// Whether a run (of routine `only`, if given) waits and may be due at `now`.
    async fn any_waiting(
        &self,
        only: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT id FROM routine_runs WHERE status = 'waiting' AND started_at <= $1 \
             AND ($2 = '' OR routine_id = $2) LIMIT 1",
        )
        .bind(micros(now))
        .bind(only.unwrap_or_default())
        .fetch_optional(self.pool())
        .await?;
        Ok(row.is_some())
    }
}

/// Starts waiting runs in slot order while the global limit has places.
async fn start_in_order(
    conn: &mut Conn,
    only: Option<&str>,
    starter: &Rerunner,
    now: DateTime<Utc>,
) -> Result<Vec<StartedSlot>, StoreError> {
    let mut total = match starter.global_max {
        Some(_) => Some(running_total_locked(conn).await?),
        None => None,
    };
    let full = |total: Option<u64>| matches!((starter.global_max, total), (Some(max), Some(n)) if n >= u64::from(max));
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let mut blocked: HashSet<String> = HashSet::new();
    let mut started = Vec::new();
    // Keyset paging: (slot, id) of the last run looked at.
    let mut after: (i64, String) = (i64::MIN, String::new());
    // The page's size written out, as in `Store::due_routines`.
    let sql = format!(
        "SELECT id, routine_id, COALESCE(scheduled_for, started_at) AS slot FROM routine_runs \
         WHERE status = 'waiting' AND started_at <= $1 AND ($2 = '' OR routine_id = $2) \
         AND (COALESCE(scheduled_for, started_at) > $3 \
         OR (COALESCE(scheduled_for, started_at) = $3 AND id > $4)) \
         ORDER BY COALESCE(scheduled_for, started_at), id LIMIT {PAGE}"
    );
    while !full(total) {
        let page = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(micros(now))
            .bind(only.unwrap_or_default())
            .bind(after.0)
            .bind(after.1.clone())
            .fetch_all(&mut *conn)
            .await?;
        if page.is_empty() {
            break;
        }
        for row in &page {
            let c = Cols(row);
            let (id, routine_id) = (c.text("id")?, c.text("routine_id")?);
            after = (c.int("slot")?, id.clone());
            if full(total) {
                break;
            }
            if blocked.contains(&routine_id) {
                continue;
            }
            if !seen.contains_key(&routine_id) {
                match look(conn, &routine_id, now).await? {
                    Some(s) => {
                        seen.insert(routine_id.clone(), s);
                    }
                    None => {
                        blocked.insert(routine_id);
                        continue;
                    }
                }
            }
            let Some(state) = seen.get_mut(&routine_id) else {
                continue;
            };
            if state.running >= state.limit {
                blocked.insert(routine_id);
                continue;
            }
            if let Some(slot) = start_one(conn, &id, state, starter, now).await? {
                total = total.map(|n| n + 1);
                started.push(slot);
            }
        }
        if page.len() < PAGE as usize {
            break;
        }
    }
    Ok(started)
}

/// Locks and reads routine `id` for its waiting runs: `None` when none of
/// them may start (gone, paused, or disabled, whose runs are then skipped).
async fn look(conn: &mut Conn, id: &str, now: DateTime<Utc>) -> Result<Option<Seen>, StoreError> {
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
    // A one-shot stays enabled while its run waits (it is disabled when the
    // run starts), so a disabled routine here was stopped by someone.
    if !routine.spec.enabled {
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
    let limit = match routine.spec.overlap() {
        Overlap::AllowAll => u64::from(routine.spec.guardrails.max_concurrent.max(1)),
        _ => 1,
    };
    Ok(Some(Seen {
        running: Cols(&row).uint("n")?,
        limit,
        routine,
    }))
}

/// Starts waiting run `id` of the routine `state` describes, unless another
/// engine started it first.
async fn start_one(
    conn: &mut Conn,
    id: &str,
    state: &mut Seen,
    starter: &Rerunner,
    now: DateTime<Utc>,
) -> Result<Option<StartedSlot>, StoreError> {
    let sql = format!(
        "UPDATE routine_runs SET status = 'running', started_at = $2, owner = $3, lease_until = $4, \
         skip_reason = NULL WHERE id = $1 AND status = 'waiting' RETURNING {COLUMNS}, fire"
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
    let fire = match Cols(&row).text_opt("fire")? {
        Some(text) => Some(
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                what: "routine_runs.fire".to_string(),
                message: e.to_string(),
            })?,
        ),
        None => None,
    };
    let routine_id = run.routine_id.to_string();
    let spec = &state.routine.spec;
    let max_runs = spec
        .guardrails
        .max_runs
        .map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX));
    count_started(conn, &routine_id, 1, now, max_runs).await?;
    if matches!(spec.trigger, Trigger::Once { .. }) {
        // Its one slot has started: done.
        sqlx::query("UPDATE routines SET enabled = 0 WHERE id = $1")
            .bind(&routine_id)
            .execute(&mut *conn)
            .await?;
    }
    state.running += 1;
    Ok(Some(StartedSlot {
        routine: state.routine.clone(),
        run,
        fire,
    }))
}
