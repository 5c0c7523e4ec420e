//! Routines: create, read, update, delete, and the due-slot queries the scheduler needs.

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use uuid::Uuid;

use cairn_core::routine::{Pause, Routine, RoutineRuntime, RoutineSpec};

use crate::codec::{Cols, json, micros, micros_opt};
use crate::connect::WriteTx;
use crate::error::is_unique_violation;
use crate::exec::Conn;
use crate::signal::Topic;
use crate::{Store, StoreError};

const COLUMNS: &str = "id, user_id, name, description, enabled, trigger_type, trigger_config, action_type, \
     action_config, guardrails, notify, timezone, last_run_at, next_fire_at, run_count, \
     consecutive_failures, state, created_at, updated_at, paused_at, paused_by, pause_note, resumed_at, agent";

/// What a routine is written with beyond [`COLUMNS`]' first 19: its jitter
/// and when its next slot fires (`due_at`, which the timer's index orders).
const WRITTEN: &str = "id, user_id, name, description, enabled, trigger_type, trigger_config, action_type, \
     action_config, guardrails, notify, timezone, last_run_at, next_fire_at, run_count, \
     consecutive_failures, state, created_at, updated_at, jitter_us, due_at, paused_at, paused_by, \
     pause_note, resumed_at, agent";

fn decode(row: &AnyRow) -> Result<Routine, StoreError> {
    let c = Cols(row);
    let failures = c.uint("consecutive_failures")?;
    Ok(Routine {
        id: c.uuid("id")?,
        user_id: c.text("user_id")?,
        spec: RoutineSpec {
            name: c.text("name")?,
            description: c.text("description")?,
            enabled: c.boolean("enabled")?,
            agent: c.text_opt("agent")?,
            trigger: c.json("trigger_config")?,
            action: c.json("action_config")?,
            guardrails: c.json("guardrails")?,
            notify: c.json("notify")?,
            timezone: c.text_opt("timezone")?,
        },
        runtime: RoutineRuntime {
            last_run_at: c.time_opt("last_run_at")?,
            next_fire_at: c.time_opt("next_fire_at")?,
            run_count: c.uint("run_count")?,
            consecutive_failures: u32::try_from(failures).unwrap_or(u32::MAX),
            state: c.json("state")?,
            paused: match c.time_opt("paused_at")? {
                Some(at) => Some(Pause {
                    at,
                    by: c.text_opt("paused_by")?.unwrap_or_default(),
                    note: c.text_opt("pause_note")?,
                }),
                None => None,
            },
            resumed_at: c.time_opt("resumed_at")?,
        },
        created_at: c.time("created_at")?,
        updated_at: c.time("updated_at")?,
    })
}

/// One routine by id, read on `conn` (inside a caller's transaction).
pub(crate) async fn routine_by_id(
    conn: &mut Conn,
    id: &str,
) -> Result<Option<Routine>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM routines WHERE id = $1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(conn)
        .await?;
    row.as_ref().map(decode).transpose()
}

fn name_taken(routine: &Routine) -> StoreError {
    StoreError::Conflict(format!(
        "a routine named \"{}\" already exists for user {}",
        routine.spec.name, routine.user_id
    ))
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The routine's jitter in microseconds, as `due_at = next_fire_at + jitter_us` needs it.
fn jitter_us(routine: &Routine) -> i64 {
    routine.jitter().num_microseconds().unwrap_or(0)
}

/// A query on the `Any` driver, as `sqlx::query` builds it.
type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// Binds `$1`..`$17` (id through state, in [`COLUMNS`] order): the values
/// `create_routine` and `update_routine` both write, so the two cannot drift.
fn bind_routine<'q>(query: AnyQuery<'q>, routine: &Routine) -> Result<AnyQuery<'q>, StoreError> {
    let spec = &routine.spec;
    let rt = &routine.runtime;
    Ok(query
        .bind(routine.id.to_string())
        .bind(&routine.user_id)
        .bind(&spec.name)
        .bind(&spec.description)
        .bind(i64::from(spec.enabled))
        .bind(spec.trigger.kind())
        .bind(json(&spec.trigger, "trigger")?)
        .bind(spec.action.kind())
        .bind(json(&spec.action, "action")?)
        .bind(json(&spec.guardrails, "guardrails")?)
        .bind(json(&spec.notify, "notify")?)
        .bind(spec.timezone.clone())
        .bind(micros_opt(rt.last_run_at))
        .bind(micros_opt(rt.next_fire_at))
        .bind(i64_of(rt.run_count))
        .bind(i64::from(rt.consecutive_failures))
        .bind(json(&rt.state, "state")?))
}

/// Marks the routines as changed (`routines.version`) and publishes it,
/// for engines in this process and others.
pub(crate) async fn bump_version(tx: &mut WriteTx) -> Result<(), sqlx::Error> {
    tx.publish(Topic::Routines).await
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// A number that changes whenever a routine is created, changed,
    /// enabled, disabled or deleted (by any process on the database).
    pub async fn routines_version(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT value FROM engine_counters WHERE key = 'routines.version'")
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some(row) => Cols(&row).int("value"),
            None => Ok(0),
        }
    }

    /// Stores a new routine; a name already used by the same user is a conflict.
    pub async fn create_routine(&self, routine: &Routine) -> Result<(), StoreError> {
        self.save_routines(&[RoutineWrite::Create(routine.clone())])
            .await
    }

    /// Replaces a routine's spec and runtime state.
    pub async fn update_routine(&self, routine: &Routine) -> Result<(), StoreError> {
        self.save_routines(&[RoutineWrite::Update(routine.clone())])
            .await
    }

    /// Creates and replaces routines in one transaction with one change of
    /// `routines.version`: all are written or none (`cairn routine apply`
    /// of a directory). The first conflict or missing routine is the error.
    pub async fn save_routines(&self, writes: &[RoutineWrite]) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        for write in writes {
            match write {
                RoutineWrite::Create(routine) => insert_routine(&mut *tx, routine).await?,
                RoutineWrite::Update(routine) => replace_routine(&mut *tx, routine).await?,
            }
        }
        if !writes.is_empty() {
            bump_version(&mut tx).await?;
        }
        Ok(tx.commit().await?)
    }

    /// The routine with this id.
    pub async fn get_routine(&self, id: Uuid) -> Result<Option<Routine>, StoreError> {
        let mut conn = self.pool().acquire().await?;
        routine_by_id(&mut *conn, &id.to_string()).await
    }

    /// The routine a user named `name`.
    pub async fn find_routine(
        &self,
        user_id: &str,
        name: &str,
    ) -> Result<Option<Routine>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM routines WHERE user_id = $1 AND name = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(decode).transpose()
    }

    /// Every routine (of one user, if given), by name.
    pub async fn list_routines(&self, user_id: Option<&str>) -> Result<Vec<Routine>, StoreError> {
        let rows = match user_id {
            Some(user) => {
                let sql = format!("SELECT {COLUMNS} FROM routines WHERE user_id = $1");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(user)
                    .fetch_all(self.pool())
                    .await?
            }
            None => {
                let sql = format!("SELECT {COLUMNS} FROM routines");
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .fetch_all(self.pool())
                    .await?
            }
        };
        let mut routines = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        routines.sort_by(|a, b| (&a.user_id, &a.spec.name).cmp(&(&b.user_id, &b.spec.name)));
        Ok(routines)
    }

    /// How many routines there are, and how many of them are enabled (a
    /// count, for banners: nothing is decoded or kept).
    pub async fn count_routines(&self) -> Result<(u64, u64), StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n, COUNT(CASE WHEN enabled = 1 THEN 1 END) AS on_n FROM routines",
        )
        .fetch_one(self.pool())
        .await?;
        let c = Cols(&row);
        Ok((c.uint("n")?, c.uint("on_n")?))
    }

    /// The enabled routines fired by something other than time (event,
    /// system event, webhook): what an engine keeps in memory, without
    /// loading the timed ones.
    pub async fn list_triggered_routines(&self) -> Result<Vec<Routine>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM routines WHERE enabled = 1 \
                 AND trigger_type IN ('event', 'system_event', 'webhook')"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(decode).collect()
    }

    /// Deletes a routine and its runs; returns whether it existed.
    pub async fn delete_routine(&self, id: Uuid) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query("DELETE FROM routines WHERE id = $1")
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Enables or disables a routine; returns whether it existed. Disabling
    /// gives back its runs claimed ahead of a slot still to come.
    pub async fn set_routine_enabled(
        &self,
        id: Uuid,
        enabled: bool,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query("UPDATE routines SET enabled = $2, updated_at = $3 WHERE id = $1")
            .bind(id.to_string())
            .bind(i64::from(enabled))
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
        let id = id.to_string();
        if !enabled && let Some(slot) = crate::runs::give_back_unbegun(&mut *tx, &id).await? {
            crate::runs::restore_slot(&mut *tx, &id, slot, false).await?;
        }
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Enabled, unpaused routines whose next slot fires (jitter applied) at
    /// or before `now`, earliest first.
    pub async fn due_routines(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Routine>, StoreError> {
        // The bound written out: SQLite prepares a statement again at each
        // run when a bound LIMIT is bound again (the callers pass constants).
        let sql = format!(
            "SELECT {COLUMNS} FROM routines WHERE enabled = 1 AND paused_at IS NULL \
             AND due_at IS NOT NULL AND due_at <= $1 ORDER BY due_at, id LIMIT {limit}"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(micros(now))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(decode).collect()
    }

    /// When the earliest next slot of any enabled, unpaused routine fires
    /// (jitter applied): when the timer must wake.
    pub async fn earliest_fire_at(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let row = sqlx::query(
            "SELECT MIN(due_at) AS at FROM routines WHERE enabled = 1 AND paused_at IS NULL AND due_at IS NOT NULL",
        )
        .fetch_one(self.pool())
        .await?;
        Cols(&row).time_opt("at")
    }

    /// How many enabled, unpaused routines fire (jitter applied) at or
    /// before `at`: whether a slot is worth reading ahead.
    pub async fn count_due(&self, at: DateTime<Utc>) -> Result<u64, StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM routines WHERE enabled = 1 AND paused_at IS NULL \
                 AND due_at IS NOT NULL AND due_at <= $1",
        )
        .bind(micros(at))
        .fetch_one(self.pool())
        .await?;
        Ok(u64::try_from(Cols(&row).int("n")?).unwrap_or(0))
    }

    /// Sets the next slot without running anything (after a schedule change or a missed window).
    pub async fn set_next_fire_at(
        &self,
        id: Uuid,
        next: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let done =
            sqlx::query("UPDATE routines SET next_fire_at = $2, due_at = $2 + jitter_us, updated_at = $3 WHERE id = $1")
                .bind(id.to_string())
                .bind(micros_opt(next))
                .bind(micros(now))
                .execute(&mut *tx)
                .await?;
        // A slot claimed ahead and not begun goes: the next slot is this one.
        crate::runs::give_back_unbegun(&mut *tx, &id.to_string()).await?;
        bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }
}

/// One write of [`Store::save_routines`].
#[derive(Debug, Clone, PartialEq)]
pub enum RoutineWrite {
    /// A new routine (its name must be free for its user).
    Create(Routine),
    /// An existing routine's new spec and runtime state.
    Update(Routine),
}

async fn insert_routine(conn: &mut Conn, routine: &Routine) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO routines ({WRITTEN}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
         $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)"
    );
    let pause = routine.runtime.paused.as_ref();
    let result = bind_routine(sqlx::query(sqlx::AssertSqlSafe(sql)), routine)?
        .bind(micros(routine.created_at))
        .bind(micros(routine.updated_at))
        .bind(jitter_us(routine))
        .bind(micros_opt(routine.next_due()))
        .bind(micros_opt(pause.map(|p| p.at)))
        .bind(pause.map(|p| p.by.clone()))
        .bind(pause.and_then(|p| p.note.clone()))
        .bind(micros_opt(routine.runtime.resumed_at))
        .bind(routine.spec.agent.clone())
        .execute(&mut *conn)
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if is_unique_violation(&e) => Err(name_taken(routine)),
        Err(e) => Err(e.into()),
    }
}

/// A replace leaves the pause alone: only `pause_routine` and
/// `resume_routine` write it, so rewriting a routine (`routine apply`) from
/// an older read neither pauses nor resumes it. Its runs claimed ahead of
/// a slot still to come are given back.
async fn replace_routine(conn: &mut Conn, routine: &Routine) -> Result<(), StoreError> {
    let stored = sqlx::query("SELECT next_fire_at FROM routines WHERE id = $1")
        .bind(routine.id.to_string())
        .fetch_optional(&mut *conn)
        .await?;
    let kept = match stored {
        Some(row) => Some(Cols(&row).time_opt("next_fire_at")?),
        None => None,
    };
    let query = sqlx::query(
        "UPDATE routines SET user_id = $2, name = $3, description = $4, enabled = $5, trigger_type = $6, \
         trigger_config = $7, action_type = $8, action_config = $9, guardrails = $10, notify = $11, \
         timezone = $12, last_run_at = $13, next_fire_at = $14, run_count = $15, \
         consecutive_failures = $16, state = $17, updated_at = $18, jitter_us = $19, due_at = $20, \
         agent = $21 WHERE id = $1",
    );
    let result = bind_routine(query, routine)?
        .bind(micros(routine.updated_at))
        .bind(jitter_us(routine))
        .bind(micros_opt(routine.next_due()))
        .bind(routine.spec.agent.clone())
        .execute(&mut *conn)
        .await;
    match result {
        Ok(done) if done.rows_affected() == 0 => Err(StoreError::NotFound {
            what: "routine",
            id: routine.id.to_string(),
        }),
        Ok(_) => {
            // A slot claimed ahead and not begun is run as the routine now is
            // (or not at all, disabled): given back. Its next slot is the
            // writer's, unless the writer kept the one the claim had moved.
            // After the write: the give-back's `run_count` must land on the
            // count the writer wrote.
            let id = routine.id.to_string();
            let given = crate::runs::give_back_unbegun(conn, &id).await?;
            if let Some(slot) = given
                && routine.spec.enabled
                && kept == Some(routine.runtime.next_fire_at)
            {
                crate::runs::restore_slot(conn, &id, slot, false).await?;
            }
            Ok(())
        }
        Err(e) if is_unique_violation(&e) => Err(name_taken(routine)),
        Err(e) => Err(e.into()),
    }
}
