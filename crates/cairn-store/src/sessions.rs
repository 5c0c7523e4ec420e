//! Conversations: sessions (one per user and channel), their threads, and
//! each thread's undo/redo checkpoints. Turns are rows (see `turns.rs`);
//! their content is JSON owned by the agent.

use chrono::{DateTime, Utc};
use sqlx::Row;
use sqlx::any::AnyRow;
use uuid::Uuid;

use crate::codec::{Cols, json, micros};
use crate::error::is_unique_violation;
use crate::exec::Conn;
use crate::turns::{StoredTurn, TurnRange, write_turn};
use crate::{Store, StoreError};

/// A stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    /// Unique id.
    pub id: Uuid,
    /// Owner.
    pub user_id: String,
    /// Channel (`terminal`, `ws`, `telegram`, …).
    pub channel: String,
    /// The thread new messages go to.
    pub active_thread_id: Option<Uuid>,
    /// Free-form session data (the tools "always" allowed, say).
    pub metadata: serde_json::Value,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last message time.
    pub last_active_at: DateTime<Utc>,
}

/// A stored thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRow {
    /// Unique id.
    pub id: Uuid,
    /// The session it belongs to.
    pub session_id: Uuid,
    /// The channel's own id for the thread, if it has one.
    pub external_id: Option<String>,
    /// A short title.
    pub title: Option<String>,
    /// Thread state name.
    pub state: String,
    /// The turns it shows, by position.
    pub view: Vec<TurnRange>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A thread in a listing: no turns, just their count.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSummary {
    /// Unique id.
    pub id: Uuid,
    /// The channel's own id for the thread, if it has one.
    pub external_id: Option<String>,
    /// A short title.
    pub title: Option<String>,
    /// Thread state name.
    pub state: String,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// One undo or redo checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointRow {
    /// The checkpoint's id.
    pub id: String,
    /// Its content, as the agent serialized it.
    pub data: serde_json::Value,
}

/// Which stack a checkpoint is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointStack {
    /// States before each turn, oldest first.
    Undo,
    /// States undone, in the order they were undone.
    Redo,
}

impl CheckpointStack {
    fn as_str(self) -> &'static str {
        match self {
            CheckpointStack::Undo => "undo",
            CheckpointStack::Redo => "redo",
        }
    }
}

fn session(row: &AnyRow) -> Result<SessionRow, StoreError> {
    let c = Cols(row);
    Ok(SessionRow {
        id: c.uuid("id")?,
        user_id: c.text("user_id")?,
        channel: c.text("channel")?,
        active_thread_id: c.uuid_opt("active_thread_id")?,
        metadata: c.json("metadata")?,
        created_at: c.time("created_at")?,
        last_active_at: c.time("last_active_at")?,
    })
}

fn thread(row: &AnyRow) -> Result<ThreadRow, StoreError> {
    let c = Cols(row);
    Ok(ThreadRow {
        id: c.uuid("id")?,
        session_id: c.uuid("session_id")?,
        external_id: c.text_opt("external_id")?,
        title: c.text_opt("title")?,
        state: c.text("state")?,
        view: c.json("view")?,
        created_at: c.time("created_at")?,
        updated_at: c.time("updated_at")?,
    })
}

const SESSION_COLUMNS: &str =
    "id, user_id, channel, active_thread_id, metadata, created_at, last_active_at";
const THREAD_COLUMNS: &str =
    "id, session_id, external_id, title, state, view, created_at, updated_at";

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// The session of `user_id` on `channel`, created if absent. Safe under
    /// concurrent first messages, across processes: exactly one row results.
    pub async fn get_or_create_session(
        &self,
        user_id: &str,
        channel: &str,
        now: DateTime<Utc>,
    ) -> Result<SessionRow, StoreError> {
        sqlx::query(
            "INSERT INTO sessions (id, user_id, channel, active_thread_id, metadata, created_at, last_active_at) \
                 VALUES ($1, $2, $3, NULL, '{}', $4, $4) ON CONFLICT (user_id, channel) DO NOTHING",
        )
        .bind(Uuid::now_v7().to_string())
        .bind(user_id)
        .bind(channel)
        .bind(micros(now))
        .execute(self.pool())
        .await?;
        let sql =
            format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE user_id = $1 AND channel = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .bind(channel)
            .fetch_one(self.pool())
            .await?;
        session(&row)
    }

    /// Whether `user_id` has a session on `channel` (nothing is created).
    pub async fn session_exists(&self, user_id: &str, channel: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT 1 AS one FROM sessions WHERE user_id = $1 AND channel = $2")
            .bind(user_id)
            .bind(channel)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.is_some())
    }

    /// Saves a session's active thread, metadata and activity time.
    pub async fn update_session(&self, row: &SessionRow) -> Result<(), StoreError> {
        let done = sqlx::query("UPDATE sessions SET active_thread_id = $2, metadata = $3, last_active_at = $4 WHERE id = $1")
            .bind(row.id.to_string())
            .bind(row.active_thread_id.map(|t| t.to_string()))
            .bind(json(&row.metadata, "session metadata")?)
            .bind(micros(row.last_active_at))
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                what: "session",
                id: row.id.to_string(),
            });
        }
        Ok(())
    }

    /// Every session, most recently active first.
    pub async fn list_sessions(&self) -> Result<Vec<SessionRow>, StoreError> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions ORDER BY last_active_at DESC");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(session).collect()
    }

    /// Stores a new thread; an external id already used in the session is a conflict.
    pub async fn create_thread(&self, row: &ThreadRow) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO threads ({THREAD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        );
        let result = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(row.id.to_string())
            .bind(row.session_id.to_string())
            .bind(row.external_id.clone())
            .bind(row.title.clone())
            .bind(&row.state)
            .bind(json(&row.view, "view")?)
            .bind(micros(row.created_at))
            .bind(micros(row.updated_at))
            .execute(self.pool())
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(format!(
                "session {} already has a thread {}",
                row.session_id,
                row.external_id.as_deref().unwrap_or_default()
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Saves a thread's title, state and view, and writes turns with all
    /// their messages, in one transaction: `inserted` are new (a position
    /// already taken, by another process say, is a `Conflict` and nothing is
    /// written), `replaced` are changed.
    pub async fn save_thread(
        &self,
        row: &ThreadRow,
        inserted: &[StoredTurn],
        replaced: &[StoredTurn],
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        for turn in inserted {
            match write_turn(&mut *tx, row.id, turn, true).await {
                Err(StoreError::Database(e)) if is_unique_violation(&e) => {
                    return Err(StoreError::Conflict(format!(
                        "thread {} already has a turn at position {} (written by another process)",
                        row.id, turn.position
                    )));
                }
                other => other?,
            }
        }
        for turn in replaced {
            write_turn(&mut *tx, row.id, turn, false).await?;
        }
        let done = sqlx::query(
            "UPDATE threads SET title = $2, state = $3, view = $4, updated_at = $5 WHERE id = $1",
        )
        .bind(row.id.to_string())
        .bind(row.title.clone())
        .bind(&row.state)
        .bind(json(&row.view, "view")?)
        .bind(micros(row.updated_at))
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                what: "thread",
                id: row.id.to_string(),
            });
        }
        tx.commit().await?;
        Ok(())
    }

    /// One thread by id.
    pub async fn get_thread(&self, id: Uuid) -> Result<Option<ThreadRow>, StoreError> {
        let sql = format!("SELECT {THREAD_COLUMNS} FROM threads WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(thread).transpose()
    }

    /// The thread a session knows by the channel's own id.
    pub async fn find_thread(
        &self,
        session_id: Uuid,
        external_id: &str,
    ) -> Result<Option<ThreadRow>, StoreError> {
        let sql = format!(
            "SELECT {THREAD_COLUMNS} FROM threads WHERE session_id = $1 AND external_id = $2"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(session_id.to_string())
            .bind(external_id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(thread).transpose()
    }

    /// A session's threads, most recently changed first.
    pub async fn list_threads(&self, session_id: Uuid) -> Result<Vec<ThreadSummary>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, external_id, title, state, updated_at FROM threads WHERE session_id = $1 ORDER BY updated_at DESC, id DESC",
        )
        .bind(session_id.to_string())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let c = Cols(row);
                Ok(ThreadSummary {
                    id: c.uuid("id")?,
                    external_id: c.text_opt("external_id")?,
                    title: c.text_opt("title")?,
                    state: c.text("state")?,
                    updated_at: c.time("updated_at")?,
                })
            })
            .collect()
    }

    /// Deletes a session with its threads and checkpoints; returns whether it existed.
    pub async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM sessions WHERE id = $1")
            .bind(id.to_string())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Records a new undo checkpoint: clears the redo stack, pushes onto the
    /// undo stack and drops the oldest beyond `keep`. One transaction.
    pub async fn push_checkpoint(
        &self,
        thread_id: Uuid,
        checkpoint: &CheckpointRow,
        keep: usize,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        // Locks the thread's row first (PostgreSQL): two processes pushing
        // onto one thread would otherwise read the same top position.
        lock_thread(&mut *tx, thread_id).await?;
        sqlx::query("DELETE FROM thread_checkpoints WHERE thread_id = $1 AND stack = 'redo'")
            .bind(thread_id.to_string())
            .execute(&mut *tx)
            .await?;
        let top: Option<i64> = sqlx::query("SELECT MAX(position) AS top FROM thread_checkpoints WHERE thread_id = $1 AND stack = 'undo'")
            .bind(thread_id.to_string())
            .fetch_one(&mut *tx)
            .await?
            .try_get("top")?;
        let position = top.map_or(0, |t| t + 1);
        sqlx::query("INSERT INTO thread_checkpoints (thread_id, stack, position, id, data) VALUES ($1, 'undo', $2, $3, $4)")
            .bind(thread_id.to_string())
            .bind(position)
            .bind(&checkpoint.id)
            .bind(json(&checkpoint.data, "checkpoint")?)
            .execute(&mut *tx)
            .await?;
        let keep = i64::try_from(keep).unwrap_or(i64::MAX);
        sqlx::query("DELETE FROM thread_checkpoints WHERE thread_id = $1 AND stack = 'undo' AND position <= $2")
            .bind(thread_id.to_string())
            .bind(position - keep)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Replaces both stacks at once (after undo, redo or restore).
    pub async fn replace_checkpoints(
        &self,
        thread_id: Uuid,
        undo: &[CheckpointRow],
        redo: &[CheckpointRow],
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        lock_thread(&mut *tx, thread_id).await?;
        sqlx::query("DELETE FROM thread_checkpoints WHERE thread_id = $1")
            .bind(thread_id.to_string())
            .execute(&mut *tx)
            .await?;
        for (stack, rows) in [(CheckpointStack::Undo, undo), (CheckpointStack::Redo, redo)] {
            for (position, row) in rows.iter().enumerate() {
                sqlx::query("INSERT INTO thread_checkpoints (thread_id, stack, position, id, data) VALUES ($1, $2, $3, $4, $5)")
                    .bind(thread_id.to_string())
                    .bind(stack.as_str())
                    .bind(i64::try_from(position).unwrap_or(i64::MAX))
                    .bind(&row.id)
                    .bind(json(&row.data, "checkpoint")?)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Both stacks of a thread, each in push order (oldest first).
    pub async fn load_checkpoints(
        &self,
        thread_id: Uuid,
    ) -> Result<(Vec<CheckpointRow>, Vec<CheckpointRow>), StoreError> {
        let rows = sqlx::query("SELECT stack, position, id, data FROM thread_checkpoints WHERE thread_id = $1 ORDER BY stack, position")
            .bind(thread_id.to_string())
            .fetch_all(self.pool())
            .await?;
        let (mut undo, mut redo) = (Vec::new(), Vec::new());
        for row in &rows {
            let c = Cols(row);
            let item = CheckpointRow {
                id: c.text("id")?,
                data: c.json("data")?,
            };
            match c.text("stack")?.as_str() {
                "undo" => undo.push(item),
                "redo" => redo.push(item),
                other => {
                    return Err(StoreError::Corrupt {
                        what: "thread_checkpoints.stack".into(),
                        message: format!("unknown stack {other}"),
                    });
                }
            }
        }
        Ok((undo, redo))
    }
}

/// Takes the write lock of a thread's row for the rest of the transaction
/// (a no-op update: portable, and on SQLite the write lock is already held).
async fn lock_thread(conn: &mut Conn, thread_id: Uuid) -> Result<(), StoreError> {
    sqlx::query("UPDATE threads SET updated_at = updated_at WHERE id = $1")
        .bind(thread_id.to_string())
        .execute(conn)
        .await?;
    Ok(())
}
