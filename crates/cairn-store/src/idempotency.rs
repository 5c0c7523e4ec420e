//! Idempotency keys: the first request with a key claims it and its answer
//! is kept for repeats. A claim belongs to the process running the request
//! for as long as that process renews its lease, so a process killed
//! mid-request does not leave the key "still running" until it expires.
//! The same table remembers one-time keys (a signed delivery seen once).

use chrono::{DateTime, Duration, Utc};

use crate::codec::{Cols, micros};
use crate::exec::Conn;
use crate::{Store, StoreError};

/// What claiming an idempotency key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyClaim {
    /// The key is new, or its earlier claim lapsed: this request runs, renews
    /// the lease while it does, and must complete or release the key.
    Claimed,
    /// A request with this key finished; here is its response body, byte
    /// for byte as it was stored.
    Done(String),
    /// A request with this key is still running (its lease is live).
    InFlight,
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Claims `key` in `scope` for a request run by `owner`, leased until
    /// `now + lease`. Keys older than `ttl` are forgotten, so the request
    /// runs again; an unfinished claim whose lease lapsed is taken over.
    pub async fn claim_idempotency_key(
        &self,
        scope: &str,
        key: &str,
        owner: &str,
        now: DateTime<Utc>,
        ttl: Duration,
        lease: Duration,
    ) -> Result<IdempotencyClaim, StoreError> {
        let mut tx = self.begin_write().await?;
        forget_expired(&mut *tx, scope, key, now - ttl).await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (scope, key, created_at, owner, lease_until)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (scope, key) DO NOTHING",
        )
        .bind(scope)
        .bind(key)
        .bind(micros(now))
        .bind(owner)
        .bind(micros(now + lease))
        .execute(&mut *tx)
        .await?;
        // A claim with no lease (made before leases existed) is free too.
        let taken_over = inserted.rows_affected() == 0
            && sqlx::query(
                "UPDATE idempotency_keys SET owner = $3, lease_until = $4, created_at = $5
                     WHERE scope = $1 AND key = $2 AND response IS NULL
                       AND (lease_until IS NULL OR lease_until <= $5)",
            )
            .bind(scope)
            .bind(key)
            .bind(owner)
            .bind(micros(now + lease))
            .bind(micros(now))
            .execute(&mut *tx)
            .await?
            .rows_affected()
                > 0;
        let claim = if inserted.rows_affected() > 0 || taken_over {
            IdempotencyClaim::Claimed
        } else {
            let row =
                sqlx::query("SELECT response FROM idempotency_keys WHERE scope = $1 AND key = $2")
                    .bind(scope)
                    .bind(key)
                    .fetch_one(&mut *tx)
                    .await?;
            match Cols(&row).text_opt("response")? {
                Some(body) => IdempotencyClaim::Done(body),
                None => IdempotencyClaim::InFlight,
            }
        };
        tx.commit().await?;
        Ok(claim)
    }

    /// Extends `owner`'s claim on `key` to `until`; `false` when the claim
    /// is no longer its own (it lapsed and another took it, or it ended).
    pub async fn renew_idempotency_key(
        &self,
        scope: &str,
        key: &str,
        owner: &str,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE idempotency_keys SET lease_until = $4
                 WHERE scope = $1 AND key = $2 AND owner = $3 AND response IS NULL",
        )
        .bind(scope)
        .bind(key)
        .bind(owner)
        .bind(micros(until))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Keeps `body`, the response of `owner`'s request with `key`, for
    /// repeats; `false` when the claim is no longer `owner`'s.
    pub async fn complete_idempotency_key(
        &self,
        scope: &str,
        key: &str,
        owner: &str,
        body: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE idempotency_keys SET response = $1, lease_until = NULL
                 WHERE scope = $2 AND key = $3 AND owner = $4 AND response IS NULL",
        )
        .bind(body)
        .bind(scope)
        .bind(key)
        .bind(owner)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Gives up `owner`'s claim whose request failed, so a retry runs.
    pub async fn release_idempotency_key(
        &self,
        scope: &str,
        key: &str,
        owner: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "DELETE FROM idempotency_keys
                 WHERE scope = $1 AND key = $2 AND owner = $3 AND response IS NULL",
        )
        .bind(scope)
        .bind(key)
        .bind(owner)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Records `key` in `scope` unless it was recorded within `ttl`:
    /// `true` the first time, `false` for a repeat. One write, so two
    /// processes seeing the same key agree on which saw it first.
    pub async fn first_sighting(
        &self,
        scope: &str,
        key: &str,
        now: DateTime<Utc>,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        forget_expired(&mut *tx, scope, key, now - ttl).await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (scope, key, response, created_at)
                 VALUES ($1, $2, '', $3) ON CONFLICT (scope, key) DO NOTHING",
        )
        .bind(scope)
        .bind(key)
        .bind(micros(now))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(inserted.rows_affected() > 0)
    }

    /// Forgets keys created before `before`; returns how many went.
    pub async fn prune_idempotency_keys(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
            .bind(micros(before))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }
}

/// Forgets `key` in `scope` if it was recorded at or before `before`.
async fn forget_expired(
    conn: &mut Conn,
    scope: &str,
    key: &str,
    before: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND created_at <= $3")
        .bind(scope)
        .bind(key)
        .bind(micros(before))
        .execute(&mut *conn)
        .await?;
    Ok(())
}
