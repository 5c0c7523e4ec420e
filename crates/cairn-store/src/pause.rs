//! Pausing and resuming routines. A paused routine keeps its schedule and
//! its history and fires nothing: the timer's queries pass it over, a
//! scheduled slot's claim refuses it, and an unscheduled fire of it is
//! recorded skipped with the pause as the reason. Each change is a
//! compare-and-set, so of two processes pausing the same routine one does
//! (and one notification says so).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use cairn_core::routine::Pause;

use crate::codec::micros;
use crate::exec::Conn;
use crate::{Store, StoreError};

/// The reason an unscheduled fire of a paused routine is refused with.
pub fn paused_reason(pause: &Pause) -> String {
    let at = pause.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    match &pause.note {
        Some(note) => format!("paused by {} at {at}: {note}", pause.by),
        None => format!("paused by {} at {at}", pause.by),
    }
}

/// Pauses routine `id` unless it is already paused, in `conn`'s
/// transaction (the caller bumps `routines.version`); whether it took.
/// Its runs claimed ahead of a slot still to come are given back.
/// With `min_failures`, only while its failure streak is at least that.
pub(crate) async fn pause_in(
    conn: &mut Conn,
    id: &str,
    pause: &Pause,
    min_failures: Option<u32>,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE routines SET paused_at = $2, paused_by = $3, pause_note = $4 \
         WHERE id = $1 AND paused_at IS NULL AND consecutive_failures >= $5",
    )
    .bind(id)
    .bind(micros(pause.at))
    .bind(&pause.by)
    .bind(pause.note.clone())
    .bind(i64::from(min_failures.unwrap_or(0)))
    .execute(&mut *conn)
    .await?;
    let took = done.rows_affected() > 0;
    // Runs claimed ahead of their slot and not begun go back with it: the
    // pause stops them, and the slot is owed as missed while paused.
    if took && let Some(slot) = crate::runs::give_back_unbegun(conn, id).await? {
        crate::runs::restore_slot(conn, id, slot, true).await?;
    }
    Ok(took)
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Pauses a routine: it keeps its schedule and fires nothing until
    /// resumed. `false` when it is already paused or does not exist.
    pub async fn pause_routine(&self, id: Uuid, pause: &Pause) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let took = pause_in(&mut *tx, &id.to_string(), pause, None).await?;
        if took {
            crate::routines::bump_version(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(took)
    }

    /// Resumes a paused routine at `now` (its `resumed_at`, so the slots
    /// missed meanwhile are caught up as missed while paused). Returns the
    /// pause it lifted; `None` when it was not paused or does not exist.
    pub async fn resume_routine(
        &self,
        id: Uuid,
        now: DateTime<Utc>,
    ) -> Result<Option<Pause>, StoreError> {
        let mut tx = self.begin_write().await?;
        let Some(before) = crate::routines::routine_by_id(&mut *tx, &id.to_string()).await? else {
            return Ok(None);
        };
        let done = sqlx::query(
            "UPDATE routines SET paused_at = NULL, paused_by = NULL, pause_note = NULL, \
                 resumed_at = $2 WHERE id = $1 AND paused_at IS NOT NULL",
        )
        .bind(id.to_string())
        .bind(micros(now))
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        crate::routines::bump_version(&mut tx).await?;
        tx.commit().await?;
        Ok(before.runtime.paused)
    }
}
