//! Reaping: runs whose process is gone are marked `interrupted`, which is
//! never the routine's failure (no failure streak, so no backoff), and a
//! scheduled slot's first run is re-run once, in the same transaction, when
//! its routine's `on_interrupt` says so.
//!
//! The re-run is the slot's attempt 2 under the unique key
//! `(routine_id, scheduled_for, attempt)`. Only the reaper whose conditional
//! `UPDATE` took the interrupted run records it (the others' `UPDATE` finds
//! the run no longer `running`), and the key would refuse a second one
//! anyway. A reaper that dies after committing leaves its attempt 2
//! `running` under its own lease: reaped in turn, it is not re-run again.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use cairn_core::routine::{FIRST_ATTEMPT, OnInterrupt, Routine, RoutineRun, RunStatus, Trigger};

use crate::admit::{Admission, insert_new, refusal};
use crate::batch::BatchState;
use crate::exec::Conn;
use crate::queue::{Place, queued};
use crate::routines::routine_by_id;
use crate::runs::{COLUMNS, decode};
use crate::{Store, StoreError};

/// The engine that takes on the runs a store call starts for it: the slots
/// its reaps interrupt (re-run) and waiting slots (`Store::start_waiting`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rerunner {
    /// Its owner id, given to the re-runs.
    pub owner: String,
    /// The re-runs' first lease.
    pub lease_until: DateTime<Utc>,
    /// The global limit (`routines.max_concurrent`): while this many runs of
    /// all routines are running, a re-run waits in the queue (whatever its
    /// length: a crash's re-run is never refused for room) and waiting
    /// slots stay waiting.
    pub global_max: Option<u32>,
}

/// A run a reap marked `interrupted`, and what became of its slot.
#[derive(Debug, Clone, PartialEq)]
pub struct Reaped {
    /// The run as now recorded: `interrupted`, its summary saying whose
    /// crash it was and what followed.
    pub run: RoutineRun,
    /// The slot's attempt 2, when one was recorded: `running` (the reaper
    /// carries it out) or `skipped` with the guardrail's reason.
    pub rerun: Option<RoutineRun>,
    /// The routine, when it was read to decide.
    pub routine: Option<Routine>,
}

/// Why runs are being interrupted.
#[derive(Clone, Copy)]
enum Cause<'a> {
    /// Their process is gone: each slot's first run may be re-run by `Rerunner`.
    Crash(&'a Rerunner),
    /// Their own process is stopping: recorded with this reason, not re-run.
    Stop(&'a str),
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Marks `interrupted` every running run whose lease ended before `now`
    /// (its process is gone), re-running the slots whose routine allows it
    /// as `rerunner`'s runs.
    ///
    /// One conditional `UPDATE … RETURNING` (SQLite ≥ 3.35 and PostgreSQL): the
    /// lease is checked on the row being written, so a renewal committed while
    /// the reaper waits for the row wins. A select-then-update-by-id lost it.
    pub async fn reap_orphans(
        &self,
        now: DateTime<Utc>,
        rerunner: &Rerunner,
    ) -> Result<Vec<Reaped>, StoreError> {
        self.reap_where(
            "(lease_until IS NULL OR lease_until < $1)",
            &[],
            now,
            Cause::Crash(rerunner),
        )
        .await
    }

    /// Marks `interrupted`, whatever their lease, the running runs held by
    /// owners whose id starts with `prefix` other than `rerunner.owner`: a
    /// daemon holding its home's lock reaps what earlier daemons of that
    /// home left (none of them can still be alive), re-running slots as
    /// [`reap_orphans`](Self::reap_orphans) does.
    pub async fn reap_predecessors(
        &self,
        prefix: &str,
        now: DateTime<Utc>,
        rerunner: &Rerunner,
    ) -> Result<Vec<Reaped>, StoreError> {
        if prefix.is_empty() {
            return Err(StoreError::Conflict(
                "reap_predecessors needs a non-empty owner prefix".to_string(),
            ));
        }
        // `substr`/`length` rather than LIKE: SQLite's LIKE ignores case and
        // `_` is a wildcard; this compares the prefix exactly on both.
        self.reap_where(
            "owner <> $2 AND substr(owner, 1, length($3)) = $3",
            &[&rerunner.owner, prefix],
            now,
            Cause::Crash(rerunner),
        )
        .await
    }

    /// Marks `interrupted` the running runs `owner` holds (a daemon shutting
    /// down past its deadline), with `reason` as their summary; they are not
    /// re-run. Returns their ids.
    pub async fn interrupt_owned(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        reason: &str,
    ) -> Result<Vec<Uuid>, StoreError> {
        let reaped = self
            .reap_where("owner = $2", &[owner], now, Cause::Stop(reason))
            .await?;
        Ok(reaped.into_iter().map(|r| r.run.id).collect())
    }

    /// Interrupts the running runs matching `condition` (over `$1` = now and
    /// `params` from `$2`) and settles each one's slot, in one transaction.
    async fn reap_where(
        &self,
        condition: &str,
        params: &[&str],
        now: DateTime<Utc>,
        cause: Cause<'_>,
    ) -> Result<Vec<Reaped>, StoreError> {
        let mut tx = self.begin_write().await?;
        // The owner is kept: it says whose crash it was.
        let sql = format!(
            "UPDATE routine_runs SET status = 'interrupted', completed_at = $1, lease_until = NULL \
                 WHERE status = 'running' AND {condition} RETURNING {COLUMNS}"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(crate::codec::micros(now));
        for param in params {
            query = query.bind(param.to_string());
        }
        let rows = query.fetch_all(&mut *tx).await?;
        let mut runs = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        // Routine rows are locked in id order, as `finish_runs` does.
        runs.sort_by_key(|r| (r.routine_id, r.id));
        let mut reaped = Vec::with_capacity(runs.len());
        for run in runs {
            reaped.push(settle(&mut *tx, run, now, cause).await?);
        }
        // A re-run is a new lease for reapers to watch.
        let rerun_started = reaped.iter().any(|r| {
            r.rerun.as_ref().is_some_and(|again| {
                matches!(again.status, RunStatus::Running | RunStatus::Waiting)
            })
        });
        if rerun_started {
            tx.publish(crate::signal::Topic::Runs).await?;
        }
        tx.commit().await?;
        Ok(reaped)
    }
}

/// Decides what becomes of an interrupted run's slot, records the re-run
/// if there is one, and writes the run's summary saying so.
async fn settle(
    conn: &mut Conn,
    mut run: RoutineRun,
    now: DateTime<Utc>,
    cause: Cause<'_>,
) -> Result<Reaped, StoreError> {
    let (summary, rerun, routine) = match cause {
        Cause::Stop(reason) => (reason.to_string(), None, None),
        Cause::Crash(rerunner) => crashed(conn, &run, now, rerunner).await?,
    };
    sqlx::query("UPDATE routine_runs SET result_summary = $2 WHERE id = $1")
        .bind(run.id.to_string())
        .bind(&summary)
        .execute(&mut *conn)
        .await?;
    run.result_summary = Some(summary);
    Ok(Reaped {
        run,
        rerun,
        routine,
    })
}

/// The summary, the slot's attempt 2 (if recorded) and the routine, for a
/// run whose process crashed.
async fn crashed(
    conn: &mut Conn,
    run: &RoutineRun,
    now: DateTime<Utc>,
    rerunner: &Rerunner,
) -> Result<(String, Option<RoutineRun>, Option<Routine>), StoreError> {
    let who = run.owner.as_deref().unwrap_or("an unknown process");
    let crash = format!("interrupted by a crash of {who}");
    let Some(slot) = run.scheduled_for else {
        let why = format!(
            "{crash}; not re-run (a {} fire is not a scheduled slot)",
            run.trigger_type
        );
        return Ok((why, None, None));
    };
    if run.attempt > FIRST_ATTEMPT {
        let why = format!("{crash}; not re-run again (it was attempt {})", run.attempt);
        return Ok((why, None, None));
    }
    let routine_id = run.routine_id.to_string();
    // Locks the routine's row on PostgreSQL, as an admission does, so the
    // concurrency limits below hold against other processes' fires.
    let present = sqlx::query("UPDATE routines SET run_count = run_count WHERE id = $1")
        .bind(&routine_id)
        .execute(&mut *conn)
        .await?
        .rows_affected()
        > 0;
    let routine = match routine_by_id(conn, &routine_id).await? {
        Some(routine) if present => routine,
        _ => {
            return Ok((
                format!("{crash}; not re-run (the routine is gone)"),
                None,
                None,
            ));
        }
    };
    if let Some(why) = held_back(&routine, &crash) {
        return Ok((why, None, Some(routine)));
    }
    let mut again = attempt_two(run, slot, now, rerunner, &crash);
    // Concurrency limits only: cooldown and dedup would count the
    // interrupted attempt itself, and the slot passed them when it fired.
    // The global limit queues the re-run, as it does any run.
    let admission = Admission {
        max_concurrent: Some(routine.spec.guardrails.max_concurrent),
        global_max: rerunner.global_max,
        ..Admission::default()
    };
    let refused = refusal(conn, &admission, &routine_id, &again, &mut None).await?;
    let mut batch = BatchState::default();
    batch.read_totals(conn, &admission).await?;
    let place = match refused {
        Some(_) => Place::Start,
        None => batch.place(&admission),
    };
    if let Place::Queue(reason) = &place {
        again = queued(&again, reason);
    }
    let why = match &refused {
        _ if again.status == RunStatus::Waiting => format!(
            "{crash}; its re-run (attempt 2, run {}) waits for a place: {}",
            again.id,
            again.skip_reason.as_deref().unwrap_or_default()
        ),
        Some(reason) => {
            again.status = RunStatus::Skipped;
            again.completed_at = Some(now);
            again.owner = None;
            again.lease_until = None;
            again.skip_reason = Some(format!(
                "re-run of a slot whose run was {crash}, refused: {reason}"
            ));
            format!(
                "{crash}; its re-run (attempt 2, run {}) was refused: {reason}",
                again.id
            )
        }
        None => format!("{crash}; re-run as attempt 2 (run {})", again.id),
    };
    if !insert_new(conn, &again).await? {
        let why = format!("{crash}; the slot already has an attempt 2");
        return Ok((why, None, Some(routine)));
    }
    if again.status == RunStatus::Waiting {
        batch.note_queued(&again, None);
        batch.mark_queued(conn).await?;
    }
    Ok((why, Some(again), Some(routine)))
}

/// Why a routine is not run again after a crash, whatever its limits: it
/// was disabled, is paused or asks not to be.
fn held_back(routine: &Routine, crash: &str) -> Option<String> {
    // A one-shot is disabled by its own claim; any other disabled routine
    // was stopped by someone and is not run again.
    if !routine.spec.enabled && !matches!(routine.spec.trigger, Trigger::Once { .. }) {
        return Some(format!("{crash}; not re-run (the routine is disabled)"));
    }
    if routine.runtime.paused.is_some() {
        return Some(format!("{crash}; not re-run (the routine is paused)"));
    }
    if routine.spec.on_interrupt() == OnInterrupt::Skip {
        return Some(format!("{crash}; not re-run (on_interrupt: skip)"));
    }
    None
}

/// The slot's attempt 2, running under the re-runner's lease.
fn attempt_two(
    run: &RoutineRun,
    slot: DateTime<Utc>,
    now: DateTime<Utc>,
    rerunner: &Rerunner,
    crash: &str,
) -> RoutineRun {
    RoutineRun {
        id: Uuid::now_v7(),
        routine_id: run.routine_id,
        trigger_type: run.trigger_type.clone(),
        trigger_detail: Some(format!(
            "slot {}, attempt 2: run {} was {crash}",
            slot.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            run.id
        )),
        scheduled_for: Some(slot),
        started_at: now,
        completed_at: None,
        status: RunStatus::Running,
        result_summary: None,
        tokens_used: None,
        job_id: None,
        owner: Some(rerunner.owner.clone()),
        lease_until: Some(rerunner.lease_until),
        notification_id: None,
        skip_reason: None,
        dedup_key: None,
        attempt: FIRST_ATTEMPT + 1,
    }
}
