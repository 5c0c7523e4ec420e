//! Reading ahead for a batch of scheduled rounds: the slot claims, the runs
//! going and the slots already run of every routine the batch claims are
//! each one statement per chunk of routines rather than one per round, so a
//! burst of routines due together costs a few statements, not thousands.
//!
//! Only a routine's first admission in the batch is read ahead: nothing the
//! batch writes before it touches that routine, so what was read is still
//! what a statement of its own would read. Later admissions of the same
//! routine read as they go. The runs such a round records are certain to be
//! new (their slots were read), so they are written together at the end of
//! the batch, or before any admission that reads as it goes.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;

use cairn_core::routine::{Going, RoutineRun};

use crate::admit::{Admission, SlotMove};
use crate::codec::{Cols, Params, json, micros, micros_opt};
use crate::exec::Conn;
use crate::{Backend, StoreError};

/// What the batch read for one admission.
#[derive(Debug)]
pub(crate) struct Ahead {
    /// The slot's compare-and-set succeeded.
    pub(crate) claimed: bool,
    /// The routine's runs going.
    pub(crate) going: Going,
    /// Slots (micros, attempt) that already have a run.
    taken: HashSet<(i64, i64)>,
}

impl Ahead {
    /// Whether `run` is new: its slot has no run yet (and now has this one).
    pub(crate) fn is_new(&mut self, run: &RoutineRun) -> bool {
        match run.scheduled_for {
            Some(slot) => self.taken.insert((micros(slot), i64::from(run.attempt))),
            None => true,
        }
    }
}

/// Reads ahead for the admissions of `fires` that can be: scheduled rounds
/// (a slot claim under an `overlap` rule), each its routine's first in the
/// batch. Claims their slots (locking the routines' rows on PostgreSQL, in
/// id order) and reads their runs; by index in `fires`.
pub(crate) async fn read_ahead(
    conn: &mut Conn,
    backend: Backend,
    fires: &[(Admission, Vec<RoutineRun>)],
) -> Result<HashMap<usize, Ahead>, StoreError> {
    let mut seen = HashSet::new();
    let mut eligible: Vec<(String, usize, &SlotMove)> = Vec::new();
    for (index, (admission, runs)) in fires.iter().enumerate() {
        let Some(first) = runs.first() else {
            continue;
        };
        let routine_id = first.routine_id.to_string();
        if !seen.insert(routine_id.clone()) {
            continue;
        }
        if let (Some(slot), Some(_)) = (&admission.slot, &admission.overlap) {
            eligible.push((routine_id, index, slot));
        }
    }
    let mut ahead = HashMap::with_capacity(eligible.len());
    if eligible.is_empty() {
        return Ok(ahead);
    }
    // One lock order for every process: by id.
    eligible.sort_by(|a, b| a.0.cmp(&b.0));
    let ids: Vec<String> = eligible.iter().map(|(id, _, _)| id.clone()).collect();
    lock_routines(conn, backend, &ids).await?;
    let slots_of: Vec<(&str, &SlotMove)> = eligible
        .iter()
        .map(|(id, _, slot)| (id.as_str(), *slot))
        .collect();
    let claimed = claim(conn, &slots_of).await?;
    let mut slots: HashMap<&str, Vec<i64>> = HashMap::new();
    for (id, index, _) in &eligible {
        let times = fires[*index].1.iter().filter_map(|r| r.scheduled_for);
        slots
            .entry(id.as_str())
            .or_default()
            .extend(times.map(micros));
    }
    let claimed_ids: Vec<&str> = eligible
        .iter()
        .map(|(id, _, _)| id.as_str())
        .filter(|id| claimed.contains(*id))
        .collect();
    let mut runs = read_runs(conn, &claimed_ids, &slots).await?;
    for (id, index, _) in eligible {
        let is_claimed = claimed.contains(&id);
        let (going, taken) = runs.remove(&id).unwrap_or_default();
        ahead.insert(
            index,
            Ahead {
                claimed: is_claimed,
                going,
                taken,
            },
        );
    }
    Ok(ahead)
}

/// Locks the rows of routines `ids` (sorted) in that order on PostgreSQL,
/// so that batches of two processes touching the same routines cannot
/// deadlock whatever order their statements then take. (SQLite's write
/// lock already serialises them.)
pub(crate) async fn lock_routines(
    conn: &mut Conn,
    backend: Backend,
    ids: &[String],
) -> Result<(), StoreError> {
    if backend != Backend::Postgres {
        return Ok(());
    }
    let params = Params::of(conn);
    for chunk in Params::pieces(ids, params.rows_per_statement(1)) {
        let sql = format!(
            "SELECT id FROM routines WHERE id IN {} ORDER BY id FOR UPDATE",
            params.rows(1, chunk.len(), 1)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for id in chunk {
            query = query.bind(id.clone());
        }
        query.fetch_all(&mut *conn).await?;
    }
    Ok(())
}

/// Moves each routine's slot that is still what its admission expects (and
/// the routine enabled and unpaused, as read when read ahead, and with
/// nothing going when claimed before its slot): the slot's compare-and-set,
/// which on PostgreSQL also locks the row. The routines claimed.
pub(crate) async fn claim(
    conn: &mut Conn,
    slots: &[(&str, &SlotMove)],
) -> Result<HashSet<String>, StoreError> {
    let mut claimed = HashSet::with_capacity(slots.len());
    let params = Params::of(conn);
    for chunk in Params::pieces(slots, params.rows_per_statement(8)) {
        // Column 6 is -1 when the claim compares nothing more; column 8 is 1
        // for a claim before the slot, which also needs nothing going.
        let sql = format!(
            "UPDATE routines SET next_fire_at = v.column3, due_at = v.column3 + jitter_us, \
             enabled = CASE WHEN v.column4 = 1 THEN 0 ELSE enabled END \
             FROM (VALUES {}) AS v \
             WHERE routines.id = v.column1 AND routines.enabled = 1 \
             AND routines.paused_at IS NULL AND routines.next_fire_at = v.column2 \
             AND (v.column6 < 0 OR (routines.updated_at = v.column5 \
             AND routines.consecutive_failures = v.column6 AND routines.state = v.column7)) \
             AND (v.column8 = 0 OR NOT EXISTS (SELECT 1 FROM routine_runs AS g \
             WHERE g.routine_id = routines.id AND g.status IN ('running', 'waiting'))) \
             RETURNING id",
            params.rows(chunk.len(), 8, 1)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (id, slot) in chunk {
            let (updated_at, failures, state, idle) = match &slot.as_read {
                Some(read) => (
                    micros(read.updated_at),
                    i64::from(read.consecutive_failures),
                    json(&read.state, "state")?,
                    i64::from(read.ahead.is_some()),
                ),
                None => (0, -1, String::new(), 0),
            };
            query = query
                .bind(id.to_string())
                .bind(micros(slot.expected))
                .bind(micros_opt(slot.next))
                .bind(i64::from(slot.disable))
                .bind(updated_at)
                .bind(failures)
                .bind(state)
                .bind(idle);
        }
        for row in query.fetch_all(&mut *conn).await? {
            claimed.insert(Cols(&row).text("id")?);
        }
    }
    Ok(claimed)
}

type RunsOf = HashMap<String, (Going, HashSet<(i64, i64)>)>;

/// The runs going of one routine.
pub(crate) async fn going(conn: &mut Conn, routine_id: &str) -> Result<Going, StoreError> {
    let mut runs = read_runs(conn, &[routine_id], &HashMap::new()).await?;
    Ok(runs
        .remove(routine_id)
        .map(|(going, _)| going)
        .unwrap_or_default())
}

/// The runs going of each routine, and which of its `slots` already have a run.
///
/// Three parts, each on its own index: the running runs (a partial index by
/// routine), the waiting ones (likewise), the ended runs of the slots asked
/// about (the unique slot index). As one scan of each routine's runs, a
/// home whose routines keep 200 runs each read them all: 2,000 routines,
/// about 75 ms of a slot's claim.
async fn read_runs(
    conn: &mut Conn,
    ids: &[&str],
    slots: &HashMap<&str, Vec<i64>>,
) -> Result<RunsOf, StoreError> {
    const SELECT: &str = "SELECT routine_id, id, status, scheduled_for, attempt FROM routine_runs";
    let mut out = RunsOf::new();
    let params = Params::of(conn);
    // The ids go in three times, the slots' times at most once more.
    for chunk in Params::pieces(ids, params.rows_per_statement(4)) {
        let mut times: Vec<i64> = chunk
            .iter()
            .flat_map(|id| slots.get(id).into_iter().flatten().copied())
            .collect();
        times.sort_unstable();
        times.dedup();
        let n = chunk.len();
        let mut sql = format!(
            "{SELECT} WHERE routine_id IN {} AND status = 'running' \
             UNION ALL {SELECT} WHERE routine_id IN {} AND status = 'waiting'",
            params.rows(1, n, 1),
            params.rows(1, n, n + 1)
        );
        if !times.is_empty() {
            sql.push_str(&format!(
                " UNION ALL {SELECT} WHERE routine_id IN {} AND scheduled_for IN {} \
                 AND status NOT IN ('running', 'waiting')",
                params.rows(1, n, 2 * n + 1),
                params.rows(1, times.len(), 3 * n + 1)
            ));
        }
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        let parts = if times.is_empty() { 2 } else { 3 };
        for _ in 0..parts {
            for id in chunk {
                query = query.bind(id.to_string());
            }
        }
        for t in &times {
            query = query.bind(*t);
        }
        for row in query.fetch_all(&mut *conn).await? {
            add_run(&mut out, &row)?;
        }
    }
    Ok(out)
}

/// Counts one run read into its routine's runs going and slots taken.
fn add_run(out: &mut RunsOf, row: &AnyRow) -> Result<(), StoreError> {
    let c = Cols(row);
    let (going, taken) = out.entry(c.text("routine_id")?).or_default();
    let slot: Option<DateTime<Utc>> = c.time_opt("scheduled_for")?;
    if let Some(slot) = slot {
        taken.insert((micros(slot), c.int("attempt")?));
    }
    match c.text("status")?.as_str() {
        "running" => {
            going.running += 1;
            going.a_running.get_or_insert(c.uuid("id")?);
        }
        "waiting" => {
            going.waiting += 1;
            going.last_waiting = going.last_waiting.max(slot);
        }
        _ => {}
    }
    Ok(())
}
