//! Admitting a round of slots under its routine's `overlap` policy: the
//! runs of the routine going are counted in the admission's transaction,
//! [`cairn_core::routine::decide_overlap`] gives each slot its fate, and the
//! slots are recorded `running`, `waiting` or `skipped` (with the reason),
//! the runs a `cancel_other` replaces `cancelled`.

use chrono::{DateTime, Utc};

use cairn_core::routine::{Fate, RoutineRun, RunStatus, decide_overlap};

use crate::StoreError;
use crate::admit::{Admission, Admitted, OverlapRule, Round, refuse, skipped};
use crate::ahead::Ahead;
use crate::batch::BatchState;
use crate::codec::micros;
use crate::exec::Conn;
use crate::queue::{Place, queued};
use crate::runs::{COLUMNS, decode};

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Cancels the routine's running runs and drops its waiting slots, for the
/// slot `by` (run `by_run`) of a `cancel_other` round; the cancelled runs.
async fn cancel_going(
    conn: &mut Conn,
    routine_id: &str,
    by: &RoutineRun,
) -> Result<Vec<RoutineRun>, StoreError> {
    let now = by.started_at;
    let slot = by.scheduled_for.map(rfc3339).unwrap_or_default();
    let why = format!(
        "overlap: cancel_other; slot {slot} (run {}) replaced it",
        by.id
    );
    // The owner is kept: it says whose run it was, and its holder sees the
    // run is no longer `running` when it next renews the lease.
    let sql = format!(
        "UPDATE routine_runs SET status = 'cancelled', completed_at = $2, lease_until = NULL, \
         result_summary = $3 WHERE routine_id = $1 AND status = 'running' RETURNING {COLUMNS}"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(routine_id)
        .bind(micros(now))
        .bind(format!("cancelled: {why}"))
        .fetch_all(&mut *conn)
        .await?;
    sqlx::query(
        "UPDATE routine_runs SET status = 'skipped', completed_at = $2, skip_reason = $3 \
         WHERE routine_id = $1 AND status = 'waiting'",
    )
    .bind(routine_id)
    .bind(micros(now))
    .bind(&why)
    .execute(&mut *conn)
    .await?;
    rows.iter().map(decode).collect()
}

/// Admits `runs` (a round's slots, oldest first; a run the caller already
/// recorded skipped, such as a `catch_up: skip` note, is kept as it is)
/// under `rule`, in the admission's transaction.
pub(crate) async fn admit_round(
    conn: &mut Conn,
    admission: &Admission,
    rule: &OverlapRule,
    runs: &[RoutineRun],
    batch: &mut BatchState,
    mut ahead: Option<Ahead>,
) -> Result<Round, StoreError> {
    let Some(first) = runs.first() else {
        return Ok(Round {
            admitted: Admitted::Taken,
            runs: Vec::new(),
            cancelled: Vec::new(),
        });
    };
    if let Some(reason) = &admission.refuse {
        return refuse(conn, admission, runs, reason).await;
    }
    let routine_id = first.routine_id.to_string();
    let going = match &ahead {
        Some(ahead) => ahead.going.clone(),
        None => crate::ahead::going(conn, &routine_id).await?,
    };
    let (noted, slots): (Vec<&RoutineRun>, Vec<&RoutineRun>) =
        runs.iter().partition(|r| r.status == RunStatus::Skipped);
    let times: Vec<DateTime<Utc>> = slots
        .iter()
        .map(|r| r.scheduled_for.unwrap_or(r.started_at))
        .collect();
    let plan = decide_overlap(
        rule.policy,
        &going,
        &times,
        rule.start_first,
        admission.max_concurrent.unwrap_or(1),
        rule.buffer_limit,
    );
    let mut cancelled = Vec::new();
    if plan.cancel_going
        && let Some(by) = slots.first()
    {
        cancelled = cancel_counted(conn, batch, &routine_id, by).await?;
    }
    let mut recorded = Vec::new();
    for run in noted {
        if batch.record(conn, ahead.as_mut(), run).await? {
            recorded.push(run.clone());
        }
    }
    let mut started = 0u64;
    let mut first_skip = None;
    for (run, fate) in slots.into_iter().zip(plan.fates) {
        let (run, in_queue) = with_fate(batch, admission, run, fate);
        if batch.record(conn, ahead.as_mut(), &run).await? {
            if run.status == RunStatus::Running {
                started += 1;
                if let Some(total) = batch.running_total.as_mut() {
                    *total += 1;
                }
            }
            if in_queue {
                batch.note_queued(&run, admission.fire.as_ref());
            }
            if run.status == RunStatus::Skipped && first_skip.is_none() {
                first_skip = run.skip_reason.clone();
            }
            recorded.push(run);
        }
    }
    if started > 0 {
        // `count` adds to the batch's running total itself.
        if let Some(total) = batch.running_total.as_mut() {
            *total -= started;
        }
        batch
            .count(&routine_id, admission, started, first.started_at, conn)
            .await?;
    }
    crate::queue::settle_one_shot(conn, admission, &routine_id, &recorded).await?;
    Ok(Round {
        admitted: admitted(&recorded, first_skip),
        runs: recorded,
        cancelled,
    })
}

/// Cancels what the round's `cancel_other` replaces, and takes the
/// cancelled runs off the batch's counts.
async fn cancel_counted(
    conn: &mut Conn,
    batch: &mut BatchState,
    routine_id: &str,
    by: &RoutineRun,
) -> Result<Vec<RoutineRun>, StoreError> {
    let cancelled = cancel_going(conn, routine_id, by).await?;
    let gone = cancelled.len() as u64;
    if let Some(total) = batch.running_total.as_mut() {
        *total = total.saturating_sub(gone);
    }
    batch.routine(routine_id).running = Some(0);
    Ok(cancelled)
}

/// A slot as its fate makes it: started where the caps place it, waiting
/// or skipped; and whether the caps queued it.
fn with_fate(
    batch: &mut BatchState,
    admission: &Admission,
    run: &RoutineRun,
    fate: Fate,
) -> (RoutineRun, bool) {
    match fate {
        Fate::Start => match batch.place(admission) {
            Place::Start => (run.clone(), false),
            Place::Queue(reason) => (queued(run, &reason), true),
            Place::Full(reason) => (skipped(run, &reason), false),
        },
        Fate::Wait => {
            let mut waiting = run.clone();
            waiting.status = RunStatus::Waiting;
            waiting.owner = None;
            waiting.lease_until = None;
            (waiting, false)
        }
        Fate::Skip(reason) => (skipped(run, &reason), false),
    }
}

/// What a round admitted: started (or queued) when any run is going, taken
/// when nothing was recorded, else skipped for the first skip's reason.
fn admitted(recorded: &[RoutineRun], first_skip: Option<String>) -> Admitted {
    if recorded
        .iter()
        .any(|r| matches!(r.status, RunStatus::Running | RunStatus::Waiting))
    {
        Admitted::Started
    } else if recorded.is_empty() {
        Admitted::Taken
    } else {
        Admitted::Skipped(first_skip.unwrap_or_else(|| "skipped".to_string()))
    }
}
