//! Admitting fires: the slot's compare-and-set, the guardrails checked in
//! the transaction that records the runs, and the runs themselves.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use std::collections::HashMap;
use std::ops::ControlFlow;

use cairn_core::routine::{Overlap, RoutineRun, RunStatus};

use crate::ahead::{Ahead, read_ahead};
use crate::batch::BatchState;
use crate::codec::{Cols, Params, micros};
use crate::connect::WriteTx;
use crate::exec::Conn;
use crate::queue::{Place, queued};
use crate::runs::insert;
use crate::{Store, StoreError};

/// Moves a routine's scheduled slot as part of an admission (compare-and-set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMove {
    /// The routine's `next_fire_at` must still be this.
    pub expected: DateTime<Utc>,
    /// Its new `next_fire_at`.
    pub next: Option<DateTime<Utc>>,
    /// Disable the routine (a one-shot that has fired).
    pub disable: bool,
    /// For a routine read ahead of its slot: the claim also needs the
    /// routine still as it was read, else it takes nothing (and the engine
    /// reads it again).
    pub as_read: Option<AsRead>,
    /// For a one-shot (`disable`): its next slot when the global queue is
    /// full, so that it is tried again then rather than lost.
    pub retry: Option<DateTime<Utc>>,
}

/// What a routine read ahead of its slot must still be when the slot is
/// claimed: what an edit, a run's end or a failure streak would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsRead {
    /// Its `updated_at` (every edit moves it).
    pub updated_at: DateTime<Utc>,
    /// Its failure streak (backoff is decided from it).
    pub consecutive_failures: u32,
    /// Its state (a watcher's or heartbeat's run starts from it).
    pub state: serde_json::Value,
    /// Claimed before its slot comes (`now` is the slot), as part of this
    /// claim: the claim also needs no run of the routine going or waiting
    /// (such a routine is left to the slot itself, when its `overlap` is
    /// decided on what is going then), and its runs belong to the claim
    /// until it is begun, as the slot comes ([`Store::begin_claim`]); a
    /// pause or an edit meanwhile gives them back.
    pub ahead: Option<Uuid>,
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
    /// Queue a run while this many runs of all routines are running
    /// (`routines.max_concurrent`): it waits for a place (`queue.rs`).
    pub global_max: Option<u32>,
    /// Refuse a run when this many already wait in the global queue
    /// (`routines.max_waiting`).
    pub queue_max: Option<u32>,
    /// What an unscheduled fire hands its action, kept with a run that
    /// waits in the global queue so that it starts as it was fired.
    pub fire: Option<serde_json::Value>,
    /// Disable the routine once it has run this many times.
    pub max_runs: Option<u64>,
    /// For a round of slots (a scheduled round, a backfill): what its slots
    /// do while another run of the routine is going. It replaces the
    /// `max_concurrent` refusal (which `overlap: allow_all` applies itself).
    pub overlap: Option<OverlapRule>,
    /// Record a refusal only when no skipped run of the routine with the
    /// same reason started within this window (else [`Admitted::Refused`]):
    /// a flood of refused webhook deliveries leaves one record a window.
    pub quiet: Option<std::time::Duration>,
}

/// How a round of slots is admitted beside the routine's runs going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverlapRule {
    /// The policy.
    pub policy: Overlap,
    /// Whether the round's first slot may start at once (an engine is there
    /// to run it) or only wait its turn (a backfill a front end records).
    pub start_first: bool,
    /// Most slots waiting under `buffer_all`.
    pub buffer_limit: u32,
}

/// What an admission recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// The verdict on the fire as a whole.
    pub admitted: Admitted,
    /// The runs as recorded (`running`, `waiting` or `skipped`), in order; a
    /// slot that already had its run is not among them.
    pub runs: Vec<RoutineRun>,
    /// The runs of the routine this admission cancelled (`overlap:
    /// cancel_other`), as recorded: their holders must stop them.
    pub cancelled: Vec<RoutineRun>,
}

impl Round {
    fn taken() -> Self {
        Round {
            admitted: Admitted::Taken,
            runs: Vec::new(),
            cancelled: Vec::new(),
        }
    }
}

/// What an admission did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// The runs are recorded: `running` ones may start, `waiting` ones wait their turn.
    Started,
    /// The fire's run is recorded `waiting` in the global queue, with this
    /// reason: it starts when a place frees.
    Waiting(String),
    /// The runs are recorded as `skipped`, with this reason.
    Skipped(String),
    /// Refused with this reason and not recorded: a skipped run with the
    /// same reason was recorded within the admission's `quiet` window.
    Refused(String),
    /// Nothing recorded: another process took the slot, or the routine is gone.
    Taken,
}

fn window_start(now: DateTime<Utc>, window: std::time::Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(window)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// The first guardrail that refuses `runs`, read inside the admission's
/// transaction. (The global limit refuses nothing: it queues, see `queue.rs`.)
pub(crate) async fn refusal(
    conn: &mut Conn,
    admission: &Admission,
    routine_id: &str,
    first: &RoutineRun,
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
    Ok(None)
}

/// The running runs of all routines, counted under the global cap's lock
/// ([`lock_global_cap`]).
pub(crate) async fn running_total_locked(conn: &mut Conn) -> Result<u64, StoreError> {
    lock_global_cap(conn).await?;
    let row = sqlx::query("SELECT COUNT(*) AS n FROM routine_runs WHERE status = 'running'")
        .fetch_one(&mut *conn)
        .await?;
    Cols(&row).uint("n")
}

/// Takes the lock of the global cap's counter row on PostgreSQL, which
/// serialises capped admissions across processes there. SQLite's write
/// lock, taken when the transaction began, already does: nothing to write.
pub(crate) async fn lock_global_cap(conn: &mut Conn) -> Result<(), StoreError> {
    if matches!(Params::of(conn), Params::Numbered) {
        sqlx::query(
            "UPDATE engine_counters SET value = value + 1 WHERE key = 'routines.admission'",
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Records a run unless its slot already has one; whether it was recorded.
pub(crate) async fn insert_new(conn: &mut Conn, run: &RoutineRun) -> Result<bool, StoreError> {
    Ok(insert(conn, run).await? > 0)
}

/// One admission inside an open write transaction. Fires are evaluated in
/// order; what the batch already read or locked is kept in `batch`.
async fn admit_one(
    conn: &mut Conn,
    admission: &Admission,
    runs: &[RoutineRun],
    batch: &mut BatchState,
    ahead: Option<Ahead>,
) -> Result<Round, StoreError> {
    let Some(first) = runs.first() else {
        return Ok(Round::taken());
    };
    let routine_id = first.routine_id.to_string();
    if ahead.is_none() && !batch.reads_no_runs(admission, &routine_id, first) {
        // It reads as it goes: what the batch recorded must be there to read.
        batch.write_runs(conn).await?;
    }
    if !lock(conn, admission, batch, ahead.as_ref(), &routine_id).await? {
        return Ok(Round::taken());
    }
    batch.routine(&routine_id).locked = true;
    batch.read_totals(conn, admission).await?;
    if let Some(reason) = batch.routine(&routine_id).paused.clone() {
        batch.write_runs(conn).await?;
        return refuse(conn, admission, runs, &reason).await;
    }
    if let Some(rule) = &admission.overlap {
        return crate::rounds::admit_round(conn, admission, rule, runs, batch, ahead).await;
    }
    let mut running_here = batch.routine(&routine_id).running;
    let refused = refusal(conn, admission, &routine_id, first, &mut running_here).await?;
    batch.routine(&routine_id).running = running_here;
    if let Some(reason) = refused {
        batch.write_runs(conn).await?;
        return refuse(conn, admission, runs, &reason).await;
    }
    let recorded = match record(conn, admission, runs, batch, &routine_id).await? {
        ControlFlow::Continue(recorded) => recorded,
        ControlFlow::Break(round) => return Ok(round),
    };
    if recorded.runs.is_empty() {
        return Ok(Round::taken());
    }
    finish(
        conn,
        admission,
        batch,
        &routine_id,
        first.started_at,
        recorded,
    )
    .await
}

/// Locks the routine's row for this admission; false when the slot was
/// claimed elsewhere or the routine is gone. The claim (or, unscheduled, a
/// no-op write) also locks the row on PostgreSQL, serialising admissions of
/// one routine across processes. An unscheduled fire of a routine this
/// transaction already locked needs no second write: the row cannot have gone
/// meanwhile.
async fn lock(
    conn: &mut Conn,
    admission: &Admission,
    batch: &mut BatchState,
    ahead: Option<&Ahead>,
    routine_id: &str,
) -> Result<bool, StoreError> {
    Ok(match &admission.slot {
        Some(_) if ahead.is_some() => ahead.is_some_and(|a| a.claimed),
        Some(slot) => crate::ahead::claim(conn, &[(routine_id, slot)])
            .await?
            .contains(routine_id),
        None if batch.routine(routine_id).locked => true,
        None => lock_unscheduled(conn, batch, routine_id).await?,
    })
}

/// The no-op write locking an unscheduled fire's routine, reading its pause
/// on the way; false when the routine is gone.
async fn lock_unscheduled(
    conn: &mut Conn,
    batch: &mut BatchState,
    routine_id: &str,
) -> Result<bool, StoreError> {
    let row = sqlx::query(
        "UPDATE routines SET run_count = run_count WHERE id = $1 \
         RETURNING paused_at, paused_by, pause_note",
    )
    .bind(routine_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(false);
    };
    let c = Cols(&row);
    batch.routine(routine_id).paused = match c.time_opt("paused_at")? {
        Some(at) => Some(crate::pause::paused_reason(&cairn_core::routine::Pause {
            at,
            by: c.text_opt("paused_by")?.unwrap_or_default(),
            note: c.text_opt("pause_note")?,
        })),
        None => None,
    };
    Ok(true)
}

/// The runs a fire recorded: how many started, and why the first queued one
/// waits.
struct Recorded {
    runs: Vec<RoutineRun>,
    started: u64,
    waiting: Option<String>,
}

/// Records each run of the fire where the caps place it (started, queued or
/// skipped); a fire refused outright breaks with its round.
async fn record(
    conn: &mut Conn,
    admission: &Admission,
    runs: &[RoutineRun],
    batch: &mut BatchState,
    routine_id: &str,
) -> Result<ControlFlow<Round, Recorded>, StoreError> {
    let mut recorded = Vec::new();
    let mut started = 0u64;
    let mut waiting = None;
    for run in runs {
        let run = match batch.place(admission) {
            Place::Start => run.clone(),
            Place::Queue(reason) => queued(run, &reason),
            Place::Full(reason) if recorded.is_empty() => {
                batch.write_runs(conn).await?;
                let round = refuse(conn, admission, runs, &reason).await?;
                crate::queue::settle_one_shot(conn, admission, routine_id, &round.runs).await?;
                return Ok(ControlFlow::Break(round));
            }
            Place::Full(reason) => skipped(run, &reason),
        };
        // A slot that already has its run (the unique key) is left as it is.
        let new = if batch.defers && admission.slot.is_none() {
            batch.defer(run.clone());
            true
        } else {
            insert_new(conn, &run).await?
        };
        if new {
            match run.status {
                RunStatus::Running => {
                    started += 1;
                    // Counted now: the next run of this fire sees it.
                    if let Some(n) = batch.running_total.as_mut() {
                        *n += 1;
                    }
                }
                RunStatus::Waiting => {
                    batch.note_queued(&run, admission.fire.as_ref());
                    waiting = waiting.or(run.skip_reason.clone());
                }
                _ => {}
            }
            recorded.push(run);
        }
    }
    Ok(ControlFlow::Continue(Recorded {
        runs: recorded,
        started,
        waiting,
    }))
}

/// Counts the started runs and settles a one-shot routine: the round of a
/// fire that recorded runs.
async fn finish(
    conn: &mut Conn,
    admission: &Admission,
    batch: &mut BatchState,
    routine_id: &str,
    started_at: DateTime<Utc>,
    recorded: Recorded,
) -> Result<Round, StoreError> {
    let Recorded {
        runs: recorded,
        started,
        waiting,
    } = recorded;
    if started > 0 {
        if let Some(n) = batch.running_total.as_mut() {
            // `count` adds them itself.
            *n -= started;
        }
        batch
            .count(routine_id, admission, started, started_at, conn)
            .await?;
    }
    crate::queue::settle_one_shot(conn, admission, routine_id, &recorded).await?;
    let admitted = match waiting {
        Some(reason) if started == 0 => Admitted::Waiting(reason),
        _ => Admitted::Started,
    };
    Ok(Round {
        admitted,
        runs: recorded,
        cancelled: Vec::new(),
    })
}

/// Refuses a fire with `reason`: records its runs as `skipped`, unless the
/// admission is `quiet` and a skipped run of the routine with the same
/// reason started within that window ([`Admitted::Refused`], nothing recorded).
pub(crate) async fn refuse(
    conn: &mut Conn,
    admission: &Admission,
    runs: &[RoutineRun],
    reason: &str,
) -> Result<Round, StoreError> {
    if let (Some(quiet), Some(first)) = (admission.quiet, runs.first()) {
        let recent = sqlx::query(
            "SELECT id FROM routine_runs WHERE routine_id = $1 AND status = 'skipped' \
             AND skip_reason = $2 AND started_at > $3 LIMIT 1",
        )
        .bind(first.routine_id.to_string())
        .bind(reason)
        .bind(micros(window_start(first.started_at, quiet)))
        .fetch_optional(&mut *conn)
        .await?;
        if recent.is_some() {
            return Ok(Round {
                admitted: Admitted::Refused(reason.to_string()),
                runs: Vec::new(),
                cancelled: Vec::new(),
            });
        }
    }
    record_refused(conn, runs, reason).await
}

/// Records every run of a refused fire as `skipped` with `reason`.
async fn record_refused(
    conn: &mut Conn,
    runs: &[RoutineRun],
    reason: &str,
) -> Result<Round, StoreError> {
    let mut recorded = Vec::new();
    for run in runs {
        let skipped = skipped(run, reason);
        if insert_new(conn, &skipped).await? {
            recorded.push(skipped);
        }
    }
    Ok(Round {
        admitted: if recorded.is_empty() {
            Admitted::Taken
        } else {
            Admitted::Skipped(reason.to_string())
        },
        runs: recorded,
        cancelled: Vec::new(),
    })
}

/// `run` as a skipped run with `reason`.
pub(crate) fn skipped(run: &RoutineRun, reason: &str) -> RoutineRun {
    let mut skipped = run.clone();
    skipped.status = RunStatus::Skipped;
    skipped.completed_at = Some(run.started_at);
    // A catch-up note ("3 slot(s) were missed…") stays first: it is
    // the only record of the slots that run stood for.
    skipped.skip_reason = Some(match &run.skip_reason {
        Some(note) => format!("{note}; then refused: {reason}"),
        None => reason.to_string(),
    });
    skipped.owner = None;
    skipped.lease_until = None;
    skipped
}

/// Records the claims made ahead of their slot among `fires`, with the
/// runs they started (`rounds`, in the same order).
async fn mark_claims(
    conn: &mut Conn,
    fires: &[(Admission, Vec<RoutineRun>)],
    rounds: &[Round],
) -> Result<(), StoreError> {
    let mut claims: HashMap<Uuid, (DateTime<Utc>, Vec<String>)> = HashMap::new();
    for ((admission, _), round) in fires.iter().zip(rounds) {
        let claim = admission
            .slot
            .as_ref()
            .and_then(|s| s.as_read.as_ref())
            .and_then(|r| r.ahead);
        let Some(claim) = claim else { continue };
        for run in round.runs.iter().filter(|r| r.status == RunStatus::Running) {
            let (_, ids) = claims
                .entry(claim)
                .or_insert_with(|| (run.started_at, Vec::new()));
            ids.push(run.id.to_string());
        }
    }
    for (claim, (slot, ids)) in claims {
        crate::runs::mark_claimed(conn, claim, slot, &ids).await?;
    }
    Ok(())
}

/// Whether an admission's runs are news for the engines (`Topic::Runs`): a
/// slot waiting for one to start it, or a lease that is now the earliest
/// among running runs (their reapers watch that one; see
/// `Store::earliest_run_lease_end`). A lease later than one already running
/// is not: a reaper wakes at the earliest anyway and reads the next then.
/// Under a stream of webhooks every new lease is the latest, and telling
/// each had every engine read the leases and the waiting runs again after
/// each batch.
async fn tells_runs(tx: &mut WriteTx, rounds: &[Round]) -> Result<bool, StoreError> {
    let mut newest: Option<i64> = None;
    for run in rounds.iter().flat_map(|r| &r.runs) {
        match (run.status, run.lease_until) {
            (RunStatus::Waiting, _) | (RunStatus::Running, None) => return Ok(true),
            (RunStatus::Running, Some(lease)) => {
                let lease = micros(lease);
                newest = Some(newest.map_or(lease, |n| n.min(lease)));
            }
            _ => {}
        }
    }
    let Some(newest) = newest else {
        return Ok(false);
    };
    let earliest = crate::leases::earliest_run_lease(&mut **tx).await?;
    // As stored (microseconds): a new lease equal to the earliest is it.
    Ok(earliest.is_none_or(|at| newest <= micros(at)))
}

#[cairn_store_macros::on_store_runtime]
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
        let rounds = self.admit_rounds(fires).await?;
        Ok(rounds.into_iter().map(|r| r.admitted).collect())
    }

    /// [`Store::admit_runs`], saying what each admission recorded: the runs
    /// (running, waiting or skipped) and the runs it cancelled.
    pub async fn admit_rounds(
        &self,
        fires: &[(Admission, Vec<RoutineRun>)],
    ) -> Result<Vec<Round>, StoreError> {
        match self.admit_batch(fires, BatchState::deferring()).await? {
            Some(rounds) => Ok(rounds),
            // A deferred run's id was taken: rolled back, and done again
            // writing each run at once, which sees it as taken.
            None => self
                .admit_batch(fires, BatchState::default())
                .await?
                .ok_or_else(|| {
                    StoreError::Conflict("an admission written at once asked to be redone".into())
                }),
        }
    }

    /// One attempt at [`Store::admit_rounds`] in one transaction, with
    /// `batch` deciding whether runs are deferred; `None` (and nothing
    /// committed) when a deferred run turned out taken.
    async fn admit_batch(
        &self,
        fires: &[(Admission, Vec<RoutineRun>)],
        mut batch: BatchState,
    ) -> Result<Option<Vec<Round>>, StoreError> {
        let mut tx = self.begin_write().await?;
        let mut out = Vec::with_capacity(fires.len());
        let mut ahead = read_ahead(&mut *tx, self.backend(), fires).await?;
        for (index, (admission, runs)) in fires.iter().enumerate() {
            let ahead = ahead.remove(&index);
            out.push(admit_one(&mut *tx, admission, runs, &mut batch, ahead).await?);
        }
        batch.flush(&mut *tx).await?;
        if batch.redo {
            // Dropped unfinished: rolled back.
            return Ok(None);
        }
        mark_claims(&mut *tx, fires, &out).await?;
        if tells_runs(&mut tx, &out).await? {
            tx.publish(crate::signal::Topic::Runs).await?;
        }
        tx.commit().await?;
        Ok(Some(out))
    }

    /// Records an unscheduled run (manual, event, webhook) with no guardrail:
    /// [`Store::admit_runs`] without checks. A missing routine is not found;
    /// a run whose `scheduled_for` slot already has one is a conflict.
    /// Test support (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
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
}
