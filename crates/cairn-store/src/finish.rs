//! How runs end: the outcome, the notification about it and the
//! routine's failure streak in one transaction, group-committed by the
//! engine; and `pause_after_failures`, which pauses a routine in that same
//! transaction when its streak reaches the bound, so exactly one process
//! pauses it and one notification says so.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sqlx::Arguments as _;
use uuid::Uuid;

use cairn_core::notification::{DeliveryStatus, Notification};
use cairn_core::routine::{Pause, RunStatus};

use crate::codec::{Cols, Params, RowValues, micros, row_values, statement_args};
use crate::exec::Conn;
use crate::runs::{RunOutcome, prune, tokens};
use crate::{Store, StoreError};

/// One run to end in [`Store::finish_runs`].
#[derive(Debug, Clone, PartialEq)]
pub struct FinishRun {
    /// The run.
    pub run_id: Uuid,
    /// Its routine.
    pub routine_id: Uuid,
    /// How it ended (`notification_id` names `notification`, if any).
    pub outcome: RunOutcome,
    /// The notification about it, recorded in the same transaction (shared:
    /// the engine announces it once committed).
    pub notification: Option<Arc<Notification>>,
    /// For a failed run of a routine with `pause_after_failures`: the pause
    /// to make when its failure streak reaches the bound.
    pub auto_pause: Option<AutoPause>,
}

/// A run's end with its statements' values encoded ahead
/// ([`EncodedEnd::new`]): the engine encodes each end on the run's own
/// task, so the one writer, through which every end of a burst passes,
/// shares the values into its statements instead of making them (text of
/// ids, JSON, copies of strings: a fifth of its time a burst's end).
#[derive(Debug, Clone)]
pub struct EncodedEnd {
    end: FinishRun,
    /// The run's row in `end_runs`' update.
    run: RowValues,
    /// Its notification's row, if it has one.
    notification: Option<RowValues>,
}

impl EncodedEnd {
    /// Encodes `end`'s values.
    pub fn new(end: FinishRun) -> Result<EncodedEnd, StoreError> {
        let o = &end.outcome;
        let run = row_values("routine_runs", RUN_END_VALUES, |a| {
            a.add(end.run_id.to_string())?;
            a.add(o.status.as_str())?;
            a.add(o.summary.clone())?;
            a.add(tokens(o.tokens_used))?;
            a.add(micros(o.completed_at))?;
            a.add(o.notification_id.map(|n| n.to_string()))
        })?;
        let notification = end
            .notification
            .as_deref()
            .map(crate::notifications::notification_values)
            .transpose()?;
        Ok(EncodedEnd {
            end,
            run,
            notification,
        })
    }

    /// The end it was made from.
    pub fn end(&self) -> &FinishRun {
        &self.end
    }

    /// Takes the end's retention off it (to prune later): the values
    /// encoded do not carry it.
    pub fn take_retain(&mut self) -> Option<u32> {
        self.end.outcome.retain.take()
    }
}

/// `pause_after_failures`, as a run's end carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoPause {
    /// Pause once this many runs in a row have failed.
    pub after: u32,
    /// The pause: by cairn, with the note saying why.
    pub pause: Pause,
    /// Sent, in place of the run's own notification, when the pause takes.
    pub notification: Option<Notification>,
}

/// What ending one run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// The run was still running and is now ended (`false`: it had ended
    /// already, reaped or cancelled, and this outcome was not recorded).
    pub ended: bool,
    /// Its failure paused the routine; the pause's notification was recorded
    /// instead of the run's own.
    pub paused: bool,
    /// Runs wait (of its routine or in the global queue): one may start
    /// now that this run ended (`Store::start_waiting`).
    pub waiting: bool,
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

/// The values of one run's row in [`end_runs_sql`].
const RUN_END_VALUES: usize = 6;

/// The update that ends `rows` runs (see [`end_runs`]).
fn end_runs_sql(params: Params, rows: usize) -> String {
    let values = params.rows(rows, RUN_END_VALUES, 1);
    format!(
        "UPDATE routine_runs SET status = v.column2, result_summary = v.column3, \
         tokens_used = v.column4, completed_at = v.column5, notification_id = v.column6, \
         owner = NULL, lease_until = NULL FROM (VALUES {values}) AS v \
         WHERE routine_runs.id = v.column1 AND routine_runs.status = 'running'"
    )
}

/// Ends the batch's runs that are still running; per entry, whether it was.
/// One `UPDATE … FROM (VALUES …)` per chunk (SQLite ≥ 3.35 and
/// PostgreSQL both name the values' columns `column1`, `column2`, …); a
/// batch naming a run twice is ended row by row, in order, instead.
async fn end_runs(conn: &mut Conn, batch: &[EncodedEnd]) -> Result<Vec<bool>, StoreError> {
    let mut ids: Vec<Uuid> = batch.iter().map(|e| e.end.run_id).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() < batch.len() {
        let mut ended = Vec::with_capacity(batch.len());
        // Each end's own encoded row, bound in the same order.
        for e in batch {
            let done = sqlx::query_with(
                "UPDATE routine_runs SET status = $2, result_summary = $3, tokens_used = $4, completed_at = $5, \
                 notification_id = $6, owner = NULL, lease_until = NULL WHERE id = $1 AND status = 'running'",
                statement_args([&e.run]),
            )
            .execute(&mut *conn)
            .await?;
            ended.push(done.rows_affected() > 0);
        }
        return Ok(ended);
    }
    let mut ended = Vec::with_capacity(batch.len());
    let params = Params::of(conn);
    for chunk in Params::pieces(batch, params.rows_per_statement(RUN_END_VALUES)) {
        let update = end_runs_sql(params, chunk.len());
        let bound = |sql: String| {
            sqlx::query_with(
                sqlx::AssertSqlSafe(sql),
                statement_args(chunk.iter().map(|e| &e.run)),
            )
        };
        // Nearly always every run is still running: counted, not returned
        // (each row returned is a message from SQLite's thread). When some
        // had ended (reaped, cancelled), the update is undone and made
        // again returning which it ended.
        sqlx::query("SAVEPOINT end_runs")
            .execute(&mut *conn)
            .await?;
        let all = bound(update.clone())
            .execute(&mut *conn)
            .await?
            .rows_affected();
        if all == chunk.len() as u64 {
            sqlx::query("RELEASE SAVEPOINT end_runs")
                .execute(&mut *conn)
                .await?;
            ended.extend(std::iter::repeat_n(true, chunk.len()));
            continue;
        }
        sqlx::query("ROLLBACK TO SAVEPOINT end_runs")
            .execute(&mut *conn)
            .await?;
        sqlx::query("RELEASE SAVEPOINT end_runs")
            .execute(&mut *conn)
            .await?;
        let mut done = HashSet::with_capacity(chunk.len());
        let returning = format!("{update} RETURNING routine_runs.id AS id");
        for row in bound(returning).fetch_all(&mut *conn).await? {
            done.insert(Cols(&row).text("id")?);
        }
        ended.extend(
            chunk
                .iter()
                .map(|e| done.contains(&e.end.run_id.to_string())),
        );
    }
    Ok(ended)
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Ends a running run and updates its routine's failure streak.
    /// Returns `false` if the run had already ended (reaped as interrupted, say).
    pub async fn finish_run(&self, run_id: Uuid, outcome: &RunOutcome) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT routine_id FROM routine_runs WHERE id = $1")
            .bind(run_id.to_string())
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else {
            return Ok(false);
        };
        let routine_id = Cols(&row).uuid("routine_id")?;
        let finish = FinishRun {
            run_id,
            routine_id,
            outcome: outcome.clone(),
            notification: None,
            auto_pause: None,
        };
        let done = self.finish_runs(std::slice::from_ref(&finish)).await?;
        Ok(done.first().is_some_and(|f| f.ended))
    }

    /// Ends several running runs in one transaction, each with the
    /// notification sent about it (recorded in the same transaction, whether
    /// or not its run was still running, so it is never lost). Returns, per
    /// entry, what ending it did.
    ///
    /// Failure streaks, state and retention are applied once per routine
    /// for the batch, with the same result as ending the runs one by one in
    /// order; a routine's runs beyond its retention are pruned after the
    /// batch rather than after each run. A routine whose streak reaches its
    /// entries' `auto_pause` bound is paused (unless it already is), and the
    /// pause's notification replaces the notification of the run that did it.
    pub async fn finish_runs(&self, batch: &[FinishRun]) -> Result<Vec<Finished>, StoreError> {
        let encoded = batch
            .iter()
            .cloned()
            .map(EncodedEnd::new)
            .collect::<Result<Vec<_>, _>>()?;
        self.finish_encoded(&encoded, &[]).await
    }

    /// Prepares, on the writers' own SQLite connection, the statements a
    /// burst's run ends take (every size of batch [`Self::finish_encoded`]
    /// writes): done while a crowded slot is claimed ahead, so that its
    /// ends are written with statements ready rather than each size parsed
    /// on first use (a thousand parameters each) by the one writer that
    /// all of them wait for. Statements last as long as the connection,
    /// which closes once idle: a later burst is prepared for again. Nothing
    /// to do on PostgreSQL or without that connection.
    pub async fn prepare_run_ends(&self) -> Result<(), StoreError> {
        if !self.writer().is_own() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        let params = Params::of(&*tx);
        let runs = Params::shapes(params.rows_per_statement(RUN_END_VALUES))
            .map(|rows| end_runs_sql(params, rows));
        let notes = crate::notifications::insert_shapes(params);
        for sql in runs.chain(notes) {
            let sql = sqlx::SqlSafeStr::into_sql_str(sqlx::AssertSqlSafe(sql));
            sqlx::Executor::prepare(&mut *tx, sql).await?;
        }
        Ok(tx.rollback().await?)
    }

    /// [`Self::finish_runs`] of ends encoded ahead, pruning besides the
    /// runs beyond retention of the routines in `also_prune` (routine, runs
    /// kept): those whose ends an earlier batch recorded without their
    /// prune, to get the runs ending in a burst written sooner. A routine
    /// in both keeps the batch's own.
    pub async fn finish_encoded(
        &self,
        encoded: &[EncodedEnd],
        also_prune: &[(Uuid, u32)],
    ) -> Result<Vec<Finished>, StoreError> {
        let mut tx = self.begin_write().await?;
        let ended = end_runs(&mut *tx, encoded).await?;
        // Per routine: streak, state, retention, the last auto-pause.
        let mut routines: Vec<PerRoutine<'_>> = Vec::new();
        for (i, (EncodedEnd { end: f, .. }, was_running)) in encoded.iter().zip(&ended).enumerate()
        {
            if !was_running {
                continue;
            }
            let o = &f.outcome;
            let at = match routines.iter().position(|r| r.id == f.routine_id) {
                Some(i) => i,
                None => {
                    routines.push(PerRoutine::new(f.routine_id));
                    routines.len() - 1
                }
            };
            let entry = &mut routines[at];
            entry.streak = entry.streak.then(o.status);
            if let Some(state) = &o.state {
                entry.state = Some(state);
            }
            if o.retain.is_some() {
                entry.retain = o.retain;
            }
            if o.status == RunStatus::Failed && f.auto_pause.is_some() {
                entry.pauser = Some(i);
            }
        }
        let mut at: HashMap<Uuid, usize> = routines
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id, i))
            .collect();
        for (id, keep) in also_prune {
            let i = *at.entry(*id).or_insert_with(|| {
                routines.push(PerRoutine::new(*id));
                routines.len() - 1
            });
            routines[i].retain.get_or_insert(*keep);
        }
        // In id order, so two processes' batches lock routine rows in
        // the same order on PostgreSQL (no deadlock between them).
        routines.sort_by_key(|r| r.id);
        let ids: Vec<String> = routines.iter().map(|r| r.id.to_string()).collect();
        crate::ahead::lock_routines(&mut *tx, self.backend(), &ids).await?;
        write_streaks(&mut *tx, &routines).await?;
        let mut paused_by = HashSet::new();
        let mut keep: HashMap<u32, Vec<String>> = HashMap::new();
        for (r, id) in routines.iter().zip(&ids) {
            if let Some(i) = r.pauser
                && let Some(auto) = &encoded[i].end.auto_pause
                && crate::pause::pause_in(&mut *tx, id, &auto.pause, Some(auto.after)).await?
            {
                paused_by.insert(i);
            }
            if let Some(state) = r.state {
                sqlx::query("UPDATE routines SET state = $2 WHERE id = $1")
                    .bind(id)
                    .bind(crate::codec::json(state, "state")?)
                    .execute(&mut *tx)
                    .await?;
            }
            if let Some(n) = r.retain {
                keep.entry(n).or_default().push(id.clone());
            }
        }
        for (n, ids) in &keep {
            prune(&mut *tx, ids, *n).await?;
        }
        let (mut notes, mut pending) = (Vec::new(), false);
        for (i, e) in encoded.iter().enumerate() {
            let f = &e.end;
            let pause_note = f.auto_pause.as_ref().and_then(|a| a.notification.as_ref());
            let note = match pause_note {
                Some(n) if paused_by.contains(&i) => {
                    sqlx::query("UPDATE routine_runs SET notification_id = $2 WHERE id = $1")
                        .bind(f.run_id.to_string())
                        .bind(n.id.to_string())
                        .execute(&mut *tx)
                        .await?;
                    notes.push(crate::notifications::notification_values(n)?);
                    Some(n)
                }
                _ => {
                    notes.extend(e.notification.iter().cloned());
                    f.notification.as_deref()
                }
            };
            pending |= note.is_some_and(|n| n.status == DeliveryStatus::Pending);
        }
        crate::notifications::insert_notification_rows(&mut tx, pending, &notes).await?;
        if !paused_by.is_empty() {
            crate::routines::bump_version(&mut tx).await?;
        }
        // A place freed: a run waiting anywhere may start now (a partial
        // index holds only the waiting ones). Other processes hear it too,
        // so an engine that can start it does, wherever this run ended.
        let waiting = sqlx::query("SELECT id FROM routine_runs WHERE status = 'waiting' LIMIT 1")
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        if waiting {
            tx.publish(crate::signal::Topic::Runs).await?;
        }
        tx.commit().await?;
        Ok(ended
            .into_iter()
            .enumerate()
            .map(|(i, ended)| Finished {
                ended,
                paused: paused_by.contains(&i),
                waiting,
            })
            .collect())
    }
}

/// What a batch changes on one routine.
struct PerRoutine<'a> {
    id: Uuid,
    streak: Streak,
    state: Option<&'a serde_json::Value>,
    retain: Option<u32>,
    /// The batch entry whose failure may pause it.
    pauser: Option<usize>,
}

impl PerRoutine<'_> {
    fn new(id: Uuid) -> Self {
        Self {
            id,
            streak: Streak::Keep,
            state: None,
            retain: None,
            pauser: None,
        }
    }
}

/// Failing routines read at most by [`failing_routines`]: past this many, a
/// batch's resets look up each of its routines instead.
pub const FAILING_READ_MOST: usize = 256;

/// The routines whose failure streak is not 0, or `None` when there are
/// more than [`FAILING_READ_MOST`]. The condition is the `routines_failing`
/// partial index's own, written out, so the planner reads that index.
async fn failing_routines(conn: &mut Conn) -> Result<Option<HashSet<String>>, StoreError> {
    // The bound written out, not bound: SQLite prepared this statement
    // again at every run of it with a parameter (a `perf probe` on
    // `sqlite3Reprepare` saw it once a batch of run ends).
    let sql = format!(
        "SELECT id FROM routines WHERE consecutive_failures <> 0 LIMIT {}",
        FAILING_READ_MOST + 1
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut *conn)
        .await?;
    if rows.len() > FAILING_READ_MOST {
        return Ok(None);
    }
    rows.iter()
        .map(|row| Cols(row).text("id"))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// Writes the batch's failure streaks: routines with the same change share
/// a statement (a chunk of them per statement).
async fn write_streaks(conn: &mut Conn, routines: &[PerRoutine<'_>]) -> Result<(), StoreError> {
    let mut groups: HashMap<(bool, i64), Vec<String>> = HashMap::new();
    for r in routines {
        let key = match r.streak {
            Streak::Keep | Streak::Add(0) => continue,
            Streak::Add(n) => (true, n),
            Streak::Set(n) => (false, n),
        };
        groups.entry(key).or_default().push(r.id.to_string());
    }
    // A reset to 0 (every run that succeeds) changes only a routine whose
    // streak runs: those are read from their own index, nearly always
    // none, rather than each routine of the batch looked up.
    if let Some(reset) = groups.get_mut(&(false, 0))
        && let Some(failing) = failing_routines(conn).await?
    {
        reset.retain(|id| failing.contains(id));
    }
    let params = Params::of(conn);
    for ((add, n), ids) in &groups {
        let by = params.one(1);
        let to = if *add {
            format!("consecutive_failures + {by}")
        } else {
            by
        };
        for chunk in Params::pieces(ids, params.rows_per_statement(1)) {
            // A reset leaves alone the rows already at it: most runs
            // succeed, and a routine's row written for nothing is pages
            // for the WAL and the checkpoint.
            let unless = if *add {
                String::new()
            } else {
                format!(
                    " AND consecutive_failures <> {}",
                    params.one(chunk.len() + 2)
                )
            };
            let sql = format!(
                "UPDATE routines SET consecutive_failures = {to} WHERE id IN {}{unless}",
                params.rows(1, chunk.len(), 2)
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(*n);
            for id in chunk {
                query = query.bind(id.clone());
            }
            if !*add {
                query = query.bind(*n);
            }
            query.execute(&mut *conn).await?;
        }
    }
    Ok(())
}
