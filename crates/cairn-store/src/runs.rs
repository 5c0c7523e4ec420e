//! Routine runs: claiming scheduled slots exactly once, leases, and orphan reaping.

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use uuid::Uuid;

use cairn_core::notification::Notification;
use cairn_core::routine::{RoutineRun, RunStatus};

use crate::codec::{Cols, micros, micros_opt};
use crate::{Store, StoreError};

const COLUMNS: &str = "id, routine_id, trigger_type, trigger_detail, scheduled_for, started_at, completed_at, \
     status, result_summary, tokens_used, job_id, owner, lease_until, notification_id, skip_reason, dedup_key";

const INSERT: &str = "INSERT INTO routine_runs (id, routine_id, trigger_type, trigger_detail, scheduled_for, \
     started_at, completed_at, status, result_summary, tokens_used, job_id, owner, lease_until, \
     notification_id, skip_reason, dedup_key) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) \
     ON CONFLICT DO NOTHING";

/// Deletes a routine's (`$1`) ended runs beyond its newest `$2`.
const PRUNE: &str = "DELETE FROM routine_runs WHERE routine_id = $1 AND status <> 'running' AND id NOT IN \
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

/// Moves a routine's scheduled slot as part of an admission (compare-and-set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMove {
    /// The routine's `next_fire_at` must still be this.
    pub expected: DateTime<Utc>,
    /// Its new `next_fire_at`.
    pub next: Option<DateTime<Utc>>,
    /// Disable the routine (a one-shot that has fired).
    pub disable: bool,
}

/// The guardrails a fire must pass, checked in the transaction that records
/// it so that they hold across processes sharing the database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// For a scheduled fire, the slot claim; `None` for manual, event and webhook fires.
    pub slot: Option<SlotMove>,
    /// A refusal the engine already decided (backoff after failures).
    pub refuse: Option<String>,
    /// Refuse when a run with the same `dedup_key` started within this window.
    pub dedup_window: Option<std::time::Duration>,
    /// Refuse when a run (not skipped) started within this time.
    pub cooldown: Option<std::time::Duration>,
    /// Refuse when this many runs of the routine are running.
    pub max_concurrent: Option<u32>,
    /// Refuse when this many runs of all routines are running.
    pub global_max: Option<u32>,
    /// Disable the routine once it has run this many times.
    pub max_runs: Option<u64>,
    /// Record a refusal only when no skipped run of the routine with the
    /// same reason started within this window (else [`Admitted::Refused`]):
    /// a flood of refused webhook deliveries leaves one record a window.
    pub quiet: Option<std::time::Duration>,
}

/// What an admission did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// The runs are recorded as `running` and may start.
    Started,
    /// The runs are recorded as `skipped`, with this reason.
    Skipped(String),
    /// Refused with this reason and not recorded: a skipped run with the
    /// same reason was recorded within the admission's `quiet` window.
    Refused(String),
    /// Nothing recorded: another process took the slot, or the routine is gone.
    Taken,
}

fn decode(row: &AnyRow) -> Result<RoutineRun, StoreError> {
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
    })
}

fn tokens(n: Option<u64>) -> Option<i64> {
    n.map(|n| i64::try_from(n).unwrap_or(i64::MAX))
}

/// Inserts a run; 0 rows when its slot already has one (the unique key).
async fn insert(conn: &mut sqlx::AnyConnection, run: &RoutineRun) -> Result<u64, sqlx::Error> {
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
        .execute(conn)
        .await
        .map(|done| done.rows_affected())
}

fn window_start(now: DateTime<Utc>, window: std::time::Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(window)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The first guardrail that refuses `runs`, read inside the admission's
/// transaction; `running_total` is the batch's count of running runs of all
/// routines (read once, kept up to date as the batch admits).
async fn refusal(
    conn: &mut sqlx::AnyConnection,
    admission: &Admission,
    routine_id: &str,
    first: &RoutineRun,
    running_total: Option<u64>,
    running_here: &mut Option<u64>,
) -> Result<Option<String>, StoreError> {
    use cairn_core::duration::format as human;
    if let Some(reason) = &admission.refuse {
        return Ok(Some(reason.clone()));
    }
    let now = first.started_at;
    if let (Some(window), Some(key)) = (admission.dedup_window, &first.dedup_key) {
        let row = sqlx::query(
            "SELECT id, started_at FROM routine_runs WHERE routine_id = $1 AND dedup_key = $2 \
             AND status <> 'skipped' AND started_at >= $3 ORDER BY started_at DESC LIMIT 1",
        )
        .bind(routine_id)
        .bind(key)
        .bind(micros(window_start(now, window)))
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(row) = row {
            let id = Cols(&row).text("id")?;
            return Ok(Some(format!(
                "dedup_window: the same payload fired run {id} within the last {}",
                human(window)
            )));
        }
    }
    if let Some(cooldown) = admission.cooldown.filter(|c| !c.is_zero()) {
        let row = sqlx::query(
            "SELECT MAX(started_at) AS at FROM routine_runs WHERE routine_id = $1 AND status <> 'skipped'",
        )
        .bind(routine_id)
        .fetch_one(&mut *conn)
        .await?;
        let last = Cols(&row).time_opt("at")?;
        if let Some(last) = last.filter(|l| *l > window_start(now, cooldown)) {
            let until = last + chrono::Duration::from_std(cooldown).unwrap_or_default();
            return Ok(Some(format!(
                "cooldown: it last fired at {}; {} must pass, so not before {}",
                last.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                human(cooldown),
                until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            )));
        }
    }
    if let Some(max) = admission.max_concurrent {
        let n = match *running_here {
            Some(n) => n,
            None => {
                let row = sqlx::query(
                    "SELECT COUNT(*) AS n FROM routine_runs WHERE status = 'running' AND routine_id = $1",
                )
                .bind(routine_id)
                .fetch_one(&mut *conn)
                .await?;
                let n = Cols(&row).uint("n")?;
                *running_here = Some(n);
                n
            }
        };
        if n >= u64::from(max) {
            return Ok(Some(format!(
                "max_concurrent: {n} run(s) of this routine already running (limit {max})"
            )));
        }
    }
    if let (Some(max), Some(n)) = (admission.global_max, running_total)
        && n >= u64::from(max)
    {
        return Ok(Some(format!(
            "global limit: {n} routine runs already running (routines.max_concurrent = {max})"
        )));
    }
    Ok(None)
}

/// Records a run unless its slot already has one; whether it was recorded.
async fn insert_new(conn: &mut sqlx::AnyConnection, run: &RoutineRun) -> Result<bool, StoreError> {
    Ok(insert(conn, run).await? > 0)
}

/// What one admission transaction knows so far, so that a batch reads and
/// writes per routine once rather than per fire. Valid because the
/// transaction holds the locks: SQLite's write lock, and on PostgreSQL the
/// routine's row (locked by its first admission) and the global counter row.
#[derive(Default)]
struct BatchState {
    /// Running runs of all routines (read once under the global cap's lock).
    running_total: Option<u64>,
    /// Per routine id, in order of first appearance.
    routines: Vec<(String, RoutineState)>,
}

#[derive(Default)]
struct RoutineState {
    /// Its row is locked by this transaction (and it exists).
    locked: bool,
    /// Its running runs, once counted.
    running: Option<u64>,
    /// Runs started and the latest `last_run_at`, not yet written.
    unwritten: Option<(i64, DateTime<Utc>)>,
}

impl BatchState {
    fn routine(&mut self, id: &str) -> &mut RoutineState {
        let at = match self.routines.iter().position(|(r, _)| r == id) {
            Some(at) => at,
            None => {
                self.routines
                    .push((id.to_string(), RoutineState::default()));
                self.routines.len() - 1
            }
        };
        &mut self.routines[at].1
    }
}

/// Writes a routine's started runs and last fire time.
async fn count_started(
    conn: &mut sqlx::AnyConnection,
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
    conn: &mut sqlx::AnyConnection,
    routine_id: &str,
    state: &mut RoutineState,
) -> Result<(), StoreError> {
    if let Some((started, at)) = state.unwritten.take() {
        count_started(conn, routine_id, started, at, 0).await?;
    }
    Ok(())
}

/// One admission inside an open write transaction. Fires are evaluated in
/// order; what the batch already read or locked is kept in `batch`.
async fn admit_one(
    conn: &mut sqlx::AnyConnection,
    admission: &Admission,
    runs: &[RoutineRun],
    batch: &mut BatchState,
) -> Result<Admitted, StoreError> {
    let Some(first) = runs.first() else {
        return Ok(Admitted::Taken);
    };
    let routine_id = first.routine_id.to_string();
    // The claim (or, unscheduled, a no-op write) also locks the routine's row
    // on PostgreSQL, serialising admissions of one routine across processes.
    // An unscheduled fire of a routine this transaction already locked needs
    // no second write: the row cannot have gone meanwhile.
    let locked = match &admission.slot {
        Some(slot) => {
            sqlx::query(
                "UPDATE routines SET next_fire_at = $3, \
             enabled = CASE WHEN $4 = 1 THEN 0 ELSE enabled END \
             WHERE id = $1 AND enabled = 1 AND next_fire_at = $2",
            )
            .bind(&routine_id)
            .bind(micros(slot.expected))
            .bind(micros_opt(slot.next))
            .bind(i64::from(slot.disable))
            .execute(&mut *conn)
            .await?
            .rows_affected()
                > 0
        }
        None if batch.routine(&routine_id).locked => true,
        None => {
            sqlx::query("UPDATE routines SET run_count = run_count WHERE id = $1")
                .bind(&routine_id)
                .execute(&mut *conn)
                .await?
                .rows_affected()
                > 0
        }
    };
    if !locked {
        return Ok(Admitted::Taken);
    }
    batch.routine(&routine_id).locked = true;
    if admission.global_max.is_some() && batch.running_total.is_none() {
        // Locking the counter row first serialises capped admissions across
        // processes on PostgreSQL (SQLite's write lock already does).
        sqlx::query(
            "UPDATE engine_counters SET value = value + 1 WHERE key = 'routines.admission'",
        )
        .execute(&mut *conn)
        .await?;
        let row = sqlx::query("SELECT COUNT(*) AS n FROM routine_runs WHERE status = 'running'")
            .fetch_one(&mut *conn)
            .await?;
        batch.running_total = Some(Cols(&row).uint("n")?);
    }
    let running_total = batch.running_total;
    let mut running_here = batch.routine(&routine_id).running;
    let refused = refusal(
        conn,
        admission,
        &routine_id,
        first,
        running_total,
        &mut running_here,
    )
    .await?;
    batch.routine(&routine_id).running = running_here;
    if let Some(reason) = refused {
        if let Some(quiet) = admission.quiet {
            let recent = sqlx::query(
                "SELECT id FROM routine_runs WHERE routine_id = $1 AND status = 'skipped' \
                 AND skip_reason = $2 AND started_at > $3 LIMIT 1",
            )
            .bind(&routine_id)
            .bind(&reason)
            .bind(micros(window_start(first.started_at, quiet)))
            .fetch_optional(&mut *conn)
            .await?;
            if recent.is_some() {
                return Ok(Admitted::Refused(reason));
            }
        }
        let mut recorded = false;
        for run in runs {
            let mut skipped = run.clone();
            skipped.status = RunStatus::Skipped;
            skipped.completed_at = Some(run.started_at);
            // A catch-up note ("3 slot(s) were missed…") stays first: it is
            // the only record of the slots that run stood for.
            skipped.skip_reason = Some(match &run.skip_reason {
                Some(note) => format!("{note}; then refused: {reason}"),
                None => reason.clone(),
            });
            skipped.owner = None;
            skipped.lease_until = None;
            recorded |= insert_new(conn, &skipped).await?;
        }
        return Ok(if recorded {
            Admitted::Skipped(reason)
        } else {
            Admitted::Taken
        });
    }
    let (mut recorded, mut started) = (false, 0u64);
    for run in runs {
        // A slot that already has its run (the unique key) is left as it is.
        if insert_new(conn, run).await? {
            recorded = true;
            started += u64::from(run.status == RunStatus::Running);
        }
    }
    if !recorded {
        return Ok(Admitted::Taken);
    }
    if let Some(total) = batch.running_total.as_mut() {
        *total += started;
    }
    let state = batch.routine(&routine_id);
    if let Some(n) = state.running.as_mut() {
        *n += started;
    }
    let count = i64::try_from(started).unwrap_or(i64::MAX);
    match admission.max_runs {
        // Without a run limit nothing in the batch reads the counter: one
        // write per routine at the end of the batch.
        None if admission.slot.is_none() => {
            let (n, _) = state.unwritten.unwrap_or((0, first.started_at));
            state.unwritten = Some((n + count, first.started_at));
        }
        max_runs => {
            flush_routine(conn, &routine_id, state).await?;
            let max_runs = max_runs.map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX));
            count_started(conn, &routine_id, count, first.started_at, max_runs).await?;
        }
    }
    Ok(Admitted::Started)
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
    /// Admits fires of routines, each with its guardrails, in one transaction.
    ///
    /// Each entry is the admission of one routine's fire and its runs (a
    /// scheduled fire catching up on several slots has several). A fire that
    /// passes is recorded `running` and counted on its routine; one a
    /// guardrail refuses is recorded `skipped` with the reason, so "why
    /// didn't it fire?" always has an answer; one whose slot another process
    /// took records nothing.
    pub async fn admit_runs(
        &self,
        fires: &[(Admission, Vec<RoutineRun>)],
    ) -> Result<Vec<Admitted>, StoreError> {
        self.on_runtime(async {
            let mut tx = self.begin_write().await?;
            let mut out = Vec::with_capacity(fires.len());
            let mut batch = BatchState::default();
            for (admission, runs) in fires {
                out.push(admit_one(&mut tx, admission, runs, &mut batch).await?);
            }
            for (routine_id, state) in &mut batch.routines {
                flush_routine(&mut tx, routine_id, state).await?;
            }
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

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

    /// When the routine's latest failed or interrupted run ended (for backoff).
    pub async fn last_failure_at(
        &self,
        routine_id: Uuid,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.on_runtime(async {
            let row = sqlx::query(
                "SELECT MAX(completed_at) AS at FROM routine_runs WHERE routine_id = $1 \
                 AND status IN ('failed', 'interrupted')",
            )
            .bind(routine_id.to_string())
            .fetch_one(self.pool())
            .await?;
            Cols(&row).time_opt("at")
        })
        .await
    }

    /// Claims the scheduled slot `run.scheduled_for` of a routine and records
    /// the run: [`Store::admit_runs`] with only the slot's compare-and-set.
    /// Returns `false` when another process (or an earlier call) took it.
    pub async fn claim_slot(
        &self,
        run: &RoutineRun,
        next: Option<DateTime<Utc>>,
    ) -> Result<bool, StoreError> {
        let Some(slot) = run.scheduled_for else {
            return Err(StoreError::Conflict(
                "claim_slot needs a run with scheduled_for".to_string(),
            ));
        };
        let admission = Admission {
            slot: Some(SlotMove {
                expected: slot,
                next,
                disable: false,
            }),
            ..Admission::default()
        };
        let admitted = self.admit_runs(&[(admission, vec![run.clone()])]).await?;
        Ok(admitted.first() == Some(&Admitted::Started))
    }

    /// Records an unscheduled run (manual, event, webhook) with no guardrail:
    /// [`Store::admit_runs`] without checks. A missing routine is not found;
    /// a run whose `scheduled_for` slot already has one is a conflict.
    pub async fn start_run(&self, run: &RoutineRun) -> Result<(), StoreError> {
        let admitted = self
            .admit_runs(&[(Admission::default(), vec![run.clone()])])
            .await?;
        match admitted.first() {
            Some(Admitted::Started) => Ok(()),
            _ if run.scheduled_for.is_some() => Err(StoreError::Conflict(format!(
                "routine {} already has a run for slot {}",
                run.routine_id,
                run.scheduled_for
                    .map(|s| s.to_rfc3339())
                    .unwrap_or_default()
            ))),
            _ => Err(StoreError::NotFound {
                what: "routine",
                id: run.routine_id.to_string(),
            }),
        }
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

    /// Marks `interrupted` every running run whose lease ended before `now`
    /// (its process is gone); returns their ids so they can be reported.
    ///
    /// One conditional `UPDATE … RETURNING` (SQLite ≥ 3.35 and PostgreSQL): the
    /// lease is checked on the row being written, so a renewal committed while
    /// the reaper waits for the row wins. A select-then-update-by-id lost it.
    pub async fn reap_orphans(&self, now: DateTime<Utc>) -> Result<Vec<Uuid>, StoreError> {
        self.on_runtime(async {
            self.interrupt(
                "(lease_until IS NULL OR lease_until < $1)",
                now,
                None,
                "interrupted: the process running it stopped",
            )
            .await
        })
        .await
    }

    /// Marks `interrupted` the running runs `owner` holds (a daemon shutting
    /// down past its deadline), with `reason`; returns their ids.
    pub async fn interrupt_owned(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        reason: &str,
    ) -> Result<Vec<Uuid>, StoreError> {
        self.on_runtime(async { self.interrupt("owner = $3", now, Some(owner), reason).await })
            .await
    }

    /// Interrupts the running runs matching `condition` (over `$1` = now and,
    /// when given, `$3` = owner); each counts as a failure of its routine (for backoff).
    async fn interrupt(
        &self,
        condition: &str,
        now: DateTime<Utc>,
        owner: Option<&str>,
        reason: &str,
    ) -> Result<Vec<Uuid>, StoreError> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "UPDATE routine_runs SET status = 'interrupted', completed_at = $1, owner = NULL, lease_until = NULL, \
             result_summary = COALESCE(result_summary, $2) \
             WHERE status = 'running' AND {condition} RETURNING id, routine_id"
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(micros(now))
            .bind(reason);
        if let Some(owner) = owner {
            query = query.bind(owner);
        }
        let rows = query.fetch_all(&mut *tx).await?;
        let mut ids = Vec::with_capacity(rows.len());
        for row in &rows {
            let c = Cols(row);
            ids.push(c.uuid("id")?);
            sqlx::query(
                "UPDATE routines SET consecutive_failures = consecutive_failures + 1 WHERE id = $1",
            )
            .bind(c.text("routine_id")?)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(ids)
    }
}
