//! The gateway's credentials: API tokens and pairing codes, with the count
//! of wrong pairing codes shared by every daemon on the database. Secrets
//! arrive here already hashed; the store never sees a token or a code.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::codec::{Cols, micros, micros_opt};
use crate::error::is_unique_violation;
use crate::exec::Conn;
use crate::{Store, StoreError};

/// A bearer token as stored (its hash, never the token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiToken {
    /// Row id.
    pub id: Uuid,
    /// The name it is managed by (`cairn token revoke NAME`).
    pub name: String,
    /// Hex SHA-256 of the token.
    #[serde(skip)]
    pub token_hash: String,
    /// `cli` (created by `cairn token create`) or `pairing`.
    pub origin: String,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it stops working; `None` never.
    pub expires_at: Option<DateTime<Utc>>,
    /// Last time it authenticated a request (to the minute).
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it was revoked.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A token to record.
#[derive(Debug, Clone)]
pub struct NewApiToken {
    /// Its name, unique among live tokens.
    pub name: String,
    /// Hex SHA-256 of the token.
    pub token_hash: String,
    /// `cli` or `pairing`.
    pub origin: String,
    /// When it stops working.
    pub expires_at: Option<DateTime<Utc>>,
}

/// What a pairing attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairOutcome {
    /// The code was right: here is the token recorded for it.
    Paired(ApiToken),
    /// The code was wrong; this many wrong codes have been given since the
    /// last code was made (at the limit, every outstanding code is void).
    Wrong {
        /// Wrong codes counted so far.
        wrong_codes: u32,
    },
    /// Pairing is locked by earlier wrong codes: no code was even compared.
    Locked,
}

/// Where pairing stands (see [`Store::pairing_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairingState {
    /// Wrong codes given since the last code was made.
    pub wrong_codes: u32,
    /// Whether any API token was ever recorded (live or not).
    pub tokens_ever: bool,
}

/// The `engine_counters` key counting wrong pairing codes (migration 12).
macro_rules! wrong_codes_key {
    () => {
        "pairing.wrong_codes"
    };
}

async fn wrong_codes(conn: &mut Conn) -> Result<u64, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT value FROM engine_counters WHERE key = '",
        wrong_codes_key!(),
        "'"
    ))
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(row) => Cols(&row).uint("value"),
        None => Ok(0),
    }
}

/// How long `last_used_at` may lag, so that authenticating is not a write per request.
const TOUCH_EVERY: Duration = Duration::minutes(1);

fn token_from(cols: &Cols<'_>) -> Result<ApiToken, StoreError> {
    Ok(ApiToken {
        id: cols.uuid("id")?,
        name: cols.text("name")?,
        token_hash: cols.text("token_hash")?,
        origin: cols.text("origin")?,
        created_at: cols.time("created_at")?,
        expires_at: cols.time_opt("expires_at")?,
        last_used_at: cols.time_opt("last_used_at")?,
        revoked_at: cols.time_opt("revoked_at")?,
    })
}

/// The token columns, as a literal so queries stay `&'static str`.
macro_rules! token_columns {
    () => {
        "id, name, token_hash, origin, created_at, expires_at, last_used_at, revoked_at"
    };
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Records a token. A live token with the same name is a conflict.
    pub async fn create_api_token(
        &self,
        token: &NewApiToken,
        now: DateTime<Utc>,
    ) -> Result<ApiToken, StoreError> {
        let mut tx = self.begin_write().await?;
        let row = insert_token(&mut *tx, token, now).await?;
        tx.commit().await?;
        Ok(row)
    }

    /// Every token, live or not, oldest first.
    pub async fn list_api_tokens(&self) -> Result<Vec<ApiToken>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            token_columns!(),
            " FROM api_tokens ORDER BY created_at, id"
        ))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(|r| token_from(&Cols(r))).collect()
    }

    /// Revokes the live token called `name`; returns whether there was one.
    pub async fn revoke_api_token(
        &self,
        name: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query(
            "UPDATE api_tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL",
        )
        .bind(micros(now))
        .bind(name)
        .execute(&mut *tx)
        .await?;
        let revoked = done.rows_affected() > 0;
        if revoked {
            // Its streams end now, in whichever process holds them.
            tx.publish(crate::signal::Topic::Tokens).await?;
        }
        tx.commit().await?;
        Ok(revoked)
    }

    /// The live (not revoked, not expired) token with this hash, noting its use.
    pub async fn authenticate_api_token(
        &self,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiToken>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            token_columns!(),
            " FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL
                   AND (expires_at IS NULL OR expires_at > $2)"
        ))
        .bind(token_hash)
        .bind(micros(now))
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let token = token_from(&Cols(&row))?;
        if token.last_used_at.is_none_or(|t| t + TOUCH_EVERY <= now) {
            sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE id = $2")
                .bind(micros(now))
                .bind(token.id.to_string())
                .execute(self.pool())
                .await?;
        }
        Ok(Some(token))
    }

    /// Records a one-time pairing code (hashed) valid until `expires_at`,
    /// and starts the count of wrong codes over: a code made on the machine
    /// is what lifts a pairing lock.
    pub async fn create_pairing_code(
        &self,
        code_hash: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO pairing_codes (code_hash, created_at, expires_at) VALUES ($1, $2, $3)
                 ON CONFLICT (code_hash) DO UPDATE
                 SET created_at = excluded.created_at, expires_at = excluded.expires_at, used_at = NULL",
        )
        .bind(code_hash)
        .bind(micros(now))
        .bind(micros(expires_at))
        .execute(&mut *tx)
        .await?;
        // Spent and expired codes are of no further use.
        sqlx::query("DELETE FROM pairing_codes WHERE expires_at <= $1")
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
        sqlx::query(concat!(
            "UPDATE engine_counters SET value = 0 WHERE key = '",
            wrong_codes_key!(),
            "'"
        ))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Spends a pairing code and records the token it buys, in one write.
    /// A wrong code (unknown, spent or expired) is counted for the whole
    /// database; the `limit`th voids every outstanding code, and from then
    /// on every attempt is [`PairOutcome::Locked`] until
    /// [`Store::create_pairing_code`] makes a new one.
    pub async fn pair_with_code(
        &self,
        code_hash: &str,
        token: &NewApiToken,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<PairOutcome, StoreError> {
        let mut tx = self.begin_write().await?;
        let outcome = match spend_pairing_code(&mut *tx, code_hash, now, limit).await? {
            Spent::Yes => PairOutcome::Paired(insert_token(&mut *tx, token, now).await?),
            Spent::Wrong(wrong_codes) => PairOutcome::Wrong { wrong_codes },
            Spent::Locked => PairOutcome::Locked,
        };
        tx.commit().await?;
        Ok(outcome)
    }

    /// Where pairing stands: wrong codes since the last code was made, and
    /// whether any token was ever recorded (a device paired or a token made).
    pub async fn pairing_state(&self) -> Result<PairingState, StoreError> {
        let mut conn = self.pool().acquire().await?;
        let wrong = wrong_codes(&mut *conn).await?;
        let row = sqlx::query("SELECT COUNT(*) AS n FROM api_tokens")
            .fetch_one(&mut *conn)
            .await?;
        Ok(PairingState {
            wrong_codes: u32::try_from(wrong).unwrap_or(u32::MAX),
            tokens_ever: Cols(&row).uint("n")? > 0,
        })
    }
}

/// What spending a pairing code did, in the caller's transaction.
pub(crate) enum Spent {
    /// The code was right and is now spent: record what it buys.
    Yes,
    /// The code was wrong; this many wrong codes are counted.
    Wrong(u32),
    /// Pairing is locked: no code was compared.
    Locked,
}

/// Spends a pairing code in `tx`. A wrong code (unknown, spent or expired)
/// is counted for the whole database; the `limit`th voids every
/// outstanding code, and from then on every attempt is [`Spent::Locked`]
/// until [`Store::create_pairing_code`] makes a new one. Shared by the
/// gateway's `/pair` and chat channels' `/pair`.
pub(crate) async fn spend_pairing_code(
    tx: &mut Conn,
    code_hash: &str,
    now: DateTime<Utc>,
    limit: u32,
) -> Result<Spent, StoreError> {
    // The no-op write locks the counter's row on PostgreSQL, so two
    // daemons cannot both let a guess through at the limit.
    sqlx::query(concat!(
        "UPDATE engine_counters SET value = value WHERE key = '",
        wrong_codes_key!(),
        "'"
    ))
    .execute(&mut *tx)
    .await?;
    let wrong = wrong_codes(&mut *tx).await?;
    if wrong >= u64::from(limit) {
        return Ok(Spent::Locked);
    }
    let spent = sqlx::query(
        "UPDATE pairing_codes SET used_at = $1
         WHERE code_hash = $2 AND used_at IS NULL AND expires_at > $1",
    )
    .bind(micros(now))
    .bind(code_hash)
    .execute(&mut *tx)
    .await?;
    if spent.rows_affected() > 0 {
        return Ok(Spent::Yes);
    }
    let wrong = wrong + 1;
    sqlx::query(concat!(
        "UPDATE engine_counters SET value = $1 WHERE key = '",
        wrong_codes_key!(),
        "'"
    ))
    .bind(i64::try_from(wrong).unwrap_or(i64::MAX))
    .execute(&mut *tx)
    .await?;
    if wrong >= u64::from(limit) {
        sqlx::query("DELETE FROM pairing_codes WHERE used_at IS NULL")
            .execute(&mut *tx)
            .await?;
    }
    Ok(Spent::Wrong(u32::try_from(wrong).unwrap_or(u32::MAX)))
}

async fn insert_token(
    tx: &mut Conn,
    token: &NewApiToken,
    now: DateTime<Utc>,
) -> Result<ApiToken, StoreError> {
    let row = ApiToken {
        id: Uuid::now_v7(),
        name: token.name.clone(),
        token_hash: token.token_hash.clone(),
        origin: token.origin.clone(),
        created_at: now,
        expires_at: token.expires_at,
        last_used_at: None,
        revoked_at: None,
    };
    let inserted = sqlx::query(
        "INSERT INTO api_tokens (id, name, token_hash, origin, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(row.id.to_string())
    .bind(&row.name)
    .bind(&row.token_hash)
    .bind(&row.origin)
    .bind(micros(now))
    .bind(micros_opt(row.expires_at))
    .execute(&mut *tx)
    .await;
    match inserted {
        Ok(_) => Ok(row),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(format!(
            "a token named \"{}\" already exists; revoke it or pick another name",
            token.name
        ))),
        Err(e) => Err(e.into()),
    }
}
