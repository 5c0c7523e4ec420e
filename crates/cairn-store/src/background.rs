//! Background tasks: tool calls launched by `background_run`, their results,
//! and whether their completion notice reached the conversation that
//! launched them. A task whose process died is reaped as failed
//! ("interrupted") by the next process, never lost.

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;

use crate::codec::{Cols, json, micros, micros_opt};
use crate::{Store, StoreError};

const COLUMNS: &str = "id, owner, lease_until, session_id, thread_id, tool, params, status, result, error, \
     started_at, finished_at, delivered_at";

/// The error recorded on a task whose process stopped while it ran.
pub const TASK_INTERRUPTED: &str = "interrupted";

/// Where a background task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Still running.
    Running,
    /// The tool ran and succeeded.
    Completed,
    /// The tool failed, was refused, or its process stopped (`interrupted`).
    Failed,
    /// Cancelled by `background_cancel` (no notice is sent).
    Cancelled,
}

impl TaskStatus {
    /// The stored (and shown) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    fn parse(text: &str) -> Result<Self, StoreError> {
        Ok(match text {
            "running" => Self::Running,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            other => {
                return Err(StoreError::Corrupt {
                    what: "background_tasks.status".into(),
                    message: format!("unknown status {other:?}"),
                });
            }
        })
    }
}

/// One background task.
#[derive(Debug, Clone, PartialEq)]
pub struct BackgroundTask {
    /// `bg-` and 8 hex digits.
    pub id: String,
    /// The process running it.
    pub owner: String,
    /// Until when the owner's claim holds; renewed while it lives.
    pub lease_until: Option<DateTime<Utc>>,
    /// The session (user and channel) that launched it.
    pub session_id: String,
    /// The thread of that session, when known.
    pub thread_id: Option<String>,
    /// The tool run.
    pub tool: String,
    /// Its arguments.
    pub params: serde_json::Value,
    /// Where it is.
    pub status: TaskStatus,
    /// The full result, once completed (or the failed tool's output).
    pub result: Option<serde_json::Value>,
    /// Why it failed.
    pub error: Option<String>,
    /// When it was launched.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    pub finished_at: Option<DateTime<Utc>>,
    /// When its completion notice was handed to the conversation.
    pub delivered_at: Option<DateTime<Utc>>,
}

fn decode(row: &AnyRow) -> Result<BackgroundTask, StoreError> {
    let c = Cols(row);
    let parse = |col: &str| -> Result<Option<serde_json::Value>, StoreError> {
        c.text_opt(col)?
            .map(|t| {
                serde_json::from_str(&t).map_err(|e| StoreError::Corrupt {
                    what: format!("background_tasks.{col}"),
                    message: e.to_string(),
                })
            })
            .transpose()
    };
    Ok(BackgroundTask {
        id: c.text("id")?,
        owner: c.text("owner")?,
        lease_until: c.time_opt("lease_until")?,
        session_id: c.text("session_id")?,
        thread_id: c.text_opt("thread_id")?,
        tool: c.text("tool")?,
        params: parse("params")?.unwrap_or(serde_json::Value::Null),
        status: TaskStatus::parse(&c.text("status")?)?,
        result: parse("result")?,
        error: c.text_opt("error")?,
        started_at: c.time("started_at")?,
        finished_at: c.time_opt("finished_at")?,
        delivered_at: c.time_opt("delivered_at")?,
    })
}

fn decode_all(rows: &[AnyRow]) -> Result<Vec<BackgroundTask>, StoreError> {
    let mut tasks = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
    tasks.sort_by(|a, b| a.started_at.cmp(&b.started_at).then(a.id.cmp(&b.id)));
    Ok(tasks)
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Records a newly launched task.
    pub async fn create_background_task(&self, task: &BackgroundTask) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO background_tasks ({COLUMNS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(task.id.clone())
            .bind(task.owner.clone())
            .bind(micros_opt(task.lease_until))
            .bind(task.session_id.clone())
            .bind(task.thread_id.clone())
            .bind(task.tool.clone())
            .bind(json(&task.params, "background task params")?)
            .bind(task.status.as_str())
            .bind(
                task.result
                    .as_ref()
                    .map(|r| json(r, "background task result"))
                    .transpose()?,
            )
            .bind(task.error.clone())
            .bind(micros(task.started_at))
            .bind(micros_opt(task.finished_at))
            .bind(micros_opt(task.delivered_at))
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Ends a running task with `status`; `false` if it had already ended
    /// (cancelled, or reaped), in which case nothing changes.
    pub async fn finish_background_task(
        &self,
        id: &str,
        status: TaskStatus,
        result: Option<&serde_json::Value>,
        error: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE background_tasks SET status = $2, result = $3, error = $4, finished_at = $5, \
                 lease_until = NULL WHERE id = $1 AND status = 'running'",
        )
        .bind(id)
        .bind(status.as_str())
        .bind(
            result
                .map(|r| json(r, "background task result"))
                .transpose()?,
        )
        .bind(error)
        .bind(micros(now))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The task with this id.
    pub async fn get_background_task(
        &self,
        id: &str,
    ) -> Result<Option<BackgroundTask>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM background_tasks WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(decode).transpose()
    }

    /// The latest `limit` tasks of every session, newest first.
    pub async fn recent_background_tasks(
        &self,
        limit: u32,
    ) -> Result<Vec<BackgroundTask>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM background_tasks ORDER BY started_at DESC, id DESC LIMIT $1"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(decode).collect()
    }

    /// A session's tasks, oldest first.
    pub async fn list_background_tasks(
        &self,
        session_id: &str,
    ) -> Result<Vec<BackgroundTask>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM background_tasks WHERE session_id = $1");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(session_id)
            .fetch_all(self.pool())
            .await?;
        decode_all(&rows)
    }

    /// Whether a session has finished (completed or failed) tasks whose
    /// notice has not been delivered: one cheap read, for polling.
    pub async fn has_undelivered_tasks(&self, session_id: &str) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT id FROM background_tasks WHERE session_id = $1 AND delivered_at IS NULL \
                 AND status IN ('completed', 'failed') LIMIT 1",
        )
        .bind(session_id)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.is_some())
    }

    /// Takes a session's finished, undelivered tasks and marks them delivered
    /// at `now` in the same statement, so that two readers (two turns, two
    /// processes) never both get one; oldest first.
    pub async fn take_undelivered_tasks(
        &self,
        session_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<BackgroundTask>, StoreError> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "UPDATE background_tasks SET delivered_at = $2 WHERE session_id = $1 \
                 AND delivered_at IS NULL AND status IN ('completed', 'failed') RETURNING {COLUMNS}"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(session_id)
            .bind(micros(now))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        decode_all(&rows)
    }

    /// Extends the lease of every running task `owner` holds; how many.
    pub async fn renew_background_leases(
        &self,
        owner: &str,
        until: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE background_tasks SET lease_until = $2 WHERE owner = $1 AND status = 'running'",
        )
        .bind(owner)
        .bind(micros(until))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Marks failed with [`TASK_INTERRUPTED`] every running task whose lease
    /// ended before `now` (its process is gone); their ids. The lease is
    /// checked on the row being written, so a concurrent renewal wins.
    pub async fn reap_background_tasks(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, StoreError> {
        let mut tx = self.begin_write().await?;
        let rows = sqlx::query(
            "UPDATE background_tasks SET status = 'failed', error = $2, finished_at = $1, lease_until = NULL \
                 WHERE status = 'running' AND (lease_until IS NULL OR lease_until < $1) RETURNING id",
        )
        .bind(micros(now))
        .bind(TASK_INTERRUPTED)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        rows.iter().map(|r| Cols(r).text("id")).collect()
    }
}
