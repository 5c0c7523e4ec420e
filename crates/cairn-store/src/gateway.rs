//! The gateway's persistent state: API tokens, pairing codes and idempotency
//! keys. Secrets arrive here already hashed; the store never sees a token.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::codec::{Cols, micros, micros_opt};
use crate::error::is_unique_violation;
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

/// What claiming an idempotency key found.
#[derive(Debug, Clone, PartialEq)]
pub enum IdempotencyClaim {
    /// The key is new: this request runs and must complete or release it.
    Claimed,
    /// A request with this key finished; here is its response.
    Done(serde_json::Value),
    /// A request with this key is still running.
    InFlight,
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

impl Store {
    /// Records a token. A live token with the same name is a conflict.
    pub async fn create_api_token(
        &self,
        token: &NewApiToken,
        now: DateTime<Utc>,
    ) -> Result<ApiToken, StoreError> {
        self.on_runtime(async {
            let mut tx = self.begin_write().await?;
            let row = insert_token(&mut tx, token, now).await?;
            tx.commit().await?;
            Ok(row)
        })
        .await
    }

    /// Every token, live or not, oldest first.
    pub async fn list_api_tokens(&self) -> Result<Vec<ApiToken>, StoreError> {
        self.on_runtime(async {
            let rows = sqlx::query(concat!(
                "SELECT ",
                token_columns!(),
                " FROM api_tokens ORDER BY created_at, id"
            ))
            .fetch_all(self.pool())
            .await?;
            rows.iter().map(|r| token_from(&Cols(r))).collect()
        })
        .await
    }

    /// Revokes the live token called `name`; returns whether there was one.
    pub async fn revoke_api_token(
        &self,
        name: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.on_runtime(async {
            let done = sqlx::query(
                "UPDATE api_tokens SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL",
            )
            .bind(micros(now))
            .bind(name)
            .execute(self.pool())
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    /// The live (not revoked, not expired) token with this hash, noting its use.
    pub async fn authenticate_api_token(
        &self,
        token_hash: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiToken>, StoreError> {
        self.on_runtime(async {
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
        })
        .await
    }

    /// Records a one-time pairing code (hashed) valid until `expires_at`.
    pub async fn create_pairing_code(
        &self,
        code_hash: &str,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.on_runtime(async {
            sqlx::query(
                "INSERT INTO pairing_codes (code_hash, created_at, expires_at) VALUES ($1, $2, $3)
                 ON CONFLICT (code_hash) DO UPDATE
                 SET created_at = excluded.created_at, expires_at = excluded.expires_at, used_at = NULL",
            )
            .bind(code_hash)
            .bind(micros(now))
            .bind(micros(expires_at))
            .execute(self.pool())
            .await?;
            // Spent and expired codes are of no further use.
            sqlx::query("DELETE FROM pairing_codes WHERE expires_at <= $1")
                .bind(micros(now))
                .execute(self.pool())
                .await?;
            Ok(())
        })
        .await
    }

    /// Spends a pairing code and records the token it buys, in one write:
    /// `None` when the code is unknown, spent or expired (nothing recorded).
    pub async fn pair_with_code(
        &self,
        code_hash: &str,
        token: &NewApiToken,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiToken>, StoreError> {
        self.on_runtime(async {
            let mut tx = self.begin_write().await?;
            let spent = sqlx::query(
                "UPDATE pairing_codes SET used_at = $1
                 WHERE code_hash = $2 AND used_at IS NULL AND expires_at > $1",
            )
            .bind(micros(now))
            .bind(code_hash)
            .execute(&mut *tx)
            .await?;
            if spent.rows_affected() == 0 {
                return Ok(None);
            }
            let row = insert_token(&mut tx, token, now).await?;
            tx.commit().await?;
            Ok(Some(row))
        })
        .await
    }

    /// Claims `key` in `scope` for a request. Keys older than `ttl` are
    /// forgotten, so the request runs again.
    pub async fn claim_idempotency_key(
        &self,
        scope: &str,
        key: &str,
        now: DateTime<Utc>,
        ttl: Duration,
    ) -> Result<IdempotencyClaim, StoreError> {
        self.on_runtime(async {
            let mut tx = self.begin_write().await?;
            sqlx::query(
                "DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND created_at <= $3",
            )
            .bind(scope)
            .bind(key)
            .bind(micros(now - ttl))
            .execute(&mut *tx)
            .await?;
            let inserted = sqlx::query(
                "INSERT INTO idempotency_keys (scope, key, created_at) VALUES ($1, $2, $3)
                 ON CONFLICT (scope, key) DO NOTHING",
            )
            .bind(scope)
            .bind(key)
            .bind(micros(now))
            .execute(&mut *tx)
            .await?;
            let claim = if inserted.rows_affected() > 0 {
                IdempotencyClaim::Claimed
            } else {
                let row = sqlx::query(
                    "SELECT response FROM idempotency_keys WHERE scope = $1 AND key = $2",
                )
                .bind(scope)
                .bind(key)
                .fetch_one(&mut *tx)
                .await?;
                match Cols(&row).text_opt("response")? {
                    Some(text) => {
                        IdempotencyClaim::Done(serde_json::from_str(&text).map_err(|e| {
                            StoreError::Corrupt {
                                what: format!("idempotency response {scope}/{key}"),
                                message: e.to_string(),
                            }
                        })?)
                    }
                    None => IdempotencyClaim::InFlight,
                }
            };
            tx.commit().await?;
            Ok(claim)
        })
        .await
    }

    /// Keeps the response of the request that claimed `key`.
    pub async fn complete_idempotency_key(
        &self,
        scope: &str,
        key: &str,
        response: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.on_runtime(async {
            sqlx::query("UPDATE idempotency_keys SET response = $1 WHERE scope = $2 AND key = $3")
                .bind(crate::codec::json(response, "idempotency response")?)
                .bind(scope)
                .bind(key)
                .execute(self.pool())
                .await?;
            Ok(())
        })
        .await
    }

    /// Gives up a claim whose request failed, so a retry runs.
    pub async fn release_idempotency_key(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        self.on_runtime(async {
            sqlx::query(
                "DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND response IS NULL",
            )
            .bind(scope)
            .bind(key)
            .execute(self.pool())
            .await?;
            Ok(())
        })
        .await
    }

    /// Forgets keys created before `before`; returns how many went.
    pub async fn prune_idempotency_keys(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        self.on_runtime(async {
            let done = sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
                .bind(micros(before))
                .execute(self.pool())
                .await?;
            Ok(done.rows_affected())
        })
        .await
    }
}

async fn insert_token(
    tx: &mut sqlx::AnyConnection,
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
