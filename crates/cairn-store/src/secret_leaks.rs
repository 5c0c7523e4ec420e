//! Secrets found leaving (issue 47): one row each time the leak scanner
//! found a watched value or a key shape on its way out, by the secret's
//! name (never its value), where it was going and a short redacted context.

use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use uuid::Uuid;

use crate::codec::{Cols, micros};
use crate::{Store, StoreError};

/// One leak found, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SecretLeak {
    /// The record's id.
    pub id: Uuid,
    /// When it was found.
    pub at: DateTime<Utc>,
    /// The secret's name (`shape:KIND` for a key known by its shape).
    pub secret: String,
    /// Where it was going: `tool`, `channel`, `hook` or `llm`.
    pub place: String,
    /// Which one: the tool, channel or hook's name, or the model.
    pub target: String,
    /// The agent whose turn it was, when known.
    pub agent: Option<String>,
    /// The session, when known.
    pub session_id: Option<String>,
    /// The routine run or job, when known.
    pub run_id: Option<String>,
    /// A short excerpt around it, the value replaced by `[secret:NAME]`.
    pub context: String,
}

const COLUMNS: &str = "id, at, secret, place, target, agent, session_id, run_id, context";

fn decode(row: &AnyRow) -> Result<SecretLeak, StoreError> {
    let c = Cols(row);
    Ok(SecretLeak {
        id: c.uuid("id")?,
        at: c.time("at")?,
        secret: c.text("secret")?,
        place: c.text("place")?,
        target: c.text("target")?,
        agent: c.text_opt("agent")?,
        session_id: c.text_opt("session_id")?,
        run_id: c.text_opt("run_id")?,
        context: c.text("context")?,
    })
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Records one leak found.
    pub async fn record_secret_leak(&self, leak: &SecretLeak) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO secret_leaks ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(leak.id.to_string())
            .bind(micros(leak.at))
            .bind(&leak.secret)
            .bind(&leak.place)
            .bind(&leak.target)
            .bind(leak.agent.as_deref())
            .bind(leak.session_id.as_deref())
            .bind(leak.run_id.as_deref())
            .bind(&leak.context)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// The latest `limit` leaks found, newest first.
    pub async fn secret_leaks(&self, limit: u32) -> Result<Vec<SecretLeak>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM secret_leaks ORDER BY at DESC, id DESC LIMIT $1");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(decode).collect()
    }
}
