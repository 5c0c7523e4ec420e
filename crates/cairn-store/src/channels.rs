//! Inbound chat channels' state: where each channel's updates resume (so a
//! restart neither loses nor repeats one), the lease of the one process
//! polling it (several daemons on one database poll a bot once), the users
//! allowed besides the configured ones, the strangers already told how
//! to be allowed, and the messages a webhook-fed channel already took.

use chrono::{DateTime, Duration, Utc};

use crate::codec::{Cols, micros};
use crate::exec::Conn;
use crate::gateway::{Spent, spend_pairing_code};
use crate::{Store, StoreError};

/// What a `/pair <code>` from a chat channel did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelPairing {
    /// The code was right: the user is allowed on the channel.
    Allowed,
    /// The code was wrong; this many wrong codes are counted (at the
    /// limit, every outstanding code is void).
    Wrong {
        /// Wrong codes counted so far.
        wrong_codes: u32,
    },
    /// Pairing is locked by earlier wrong codes.
    Locked,
}

/// A user allowed on a channel by `cairn telegram allow` or pairing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ChannelUser {
    /// The channel's name (`[channels.NAME]`).
    pub channel: String,
    /// The user's id on the channel's service.
    pub user_id: String,
    /// `cli` or `pairing`.
    pub origin: String,
    /// When they were allowed.
    pub added_at: DateTime<Utc>,
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Takes or renews `owner`'s lease on polling `channel` until
    /// `now + lease` when it is free, lapsed or already `owner`'s; returns
    /// the next update to ask for, or `None` when another process holds it.
    pub async fn claim_channel_poll(
        &self,
        channel: &str,
        owner: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<Option<i64>, StoreError> {
        sqlx::query(
            "INSERT INTO channel_cursors (channel, next_update) VALUES ($1, 0)
                 ON CONFLICT (channel) DO NOTHING",
        )
        .bind(channel)
        .execute(self.pool())
        .await?;
        // Compare-and-set: of several processes exactly one gets it.
        let taken = sqlx::query(
            "UPDATE channel_cursors SET lease_owner = $1, lease_until = $2
                 WHERE channel = $3 AND (lease_owner = $1 OR lease_until IS NULL OR lease_until < $4)",
        )
        .bind(owner)
        .bind(micros(now + lease))
        .bind(channel)
        .bind(micros(now))
        .execute(self.pool())
        .await?;
        if taken.rows_affected() == 0 {
            return Ok(None);
        }
        let row = sqlx::query("SELECT next_update FROM channel_cursors WHERE channel = $1")
            .bind(channel)
            .fetch_one(self.pool())
            .await?;
        Ok(Some(Cols(&row).int("next_update")?))
    }

    /// Records that updates before `next` are taken, while `owner` holds the
    /// lease; `false` (nothing written) when it no longer does. Never moves
    /// the cursor back.
    pub async fn advance_channel_cursor(
        &self,
        channel: &str,
        owner: &str,
        next: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE channel_cursors SET next_update = CASE WHEN next_update > $1 THEN next_update ELSE $1 END
                 WHERE channel = $2 AND lease_owner = $3",
        )
        .bind(next)
        .bind(channel)
        .bind(owner)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives up `owner`'s lease on `channel` (at shutdown), so another
    /// process takes over at once.
    pub async fn release_channel_poll(&self, channel: &str, owner: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE channel_cursors SET lease_owner = NULL, lease_until = NULL
                 WHERE channel = $1 AND lease_owner = $2",
        )
        .bind(channel)
        .bind(owner)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Allows `user_id` on `channel`; `false` when they already were.
    pub async fn allow_channel_user(
        &self,
        channel: &str,
        user_id: &str,
        origin: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut conn = self.pool().acquire().await?;
        insert_user(&mut *conn, channel, user_id, origin, now).await
    }

    /// Whether `user_id` was allowed on `channel` (by command or pairing).
    pub async fn channel_user_allowed(
        &self,
        channel: &str,
        user_id: &str,
    ) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM channel_users WHERE channel = $1 AND user_id = $2",
        )
        .bind(channel)
        .bind(user_id)
        .fetch_one(self.pool())
        .await?;
        Ok(Cols(&row).uint("n")? > 0)
    }

    /// The users allowed on `channel` (every channel when `None`), oldest first.
    pub async fn list_channel_users(
        &self,
        channel: Option<&str>,
    ) -> Result<Vec<ChannelUser>, StoreError> {
        let rows = sqlx::query(
            "SELECT channel, user_id, origin, added_at FROM channel_users
                 WHERE $1 IS NULL OR channel = $1 ORDER BY added_at, channel, user_id",
        )
        .bind(channel)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let c = Cols(row);
                Ok(ChannelUser {
                    channel: c.text("channel")?,
                    user_id: c.text("user_id")?,
                    origin: c.text("origin")?,
                    added_at: c.time("added_at")?,
                })
            })
            .collect()
    }

    /// Records that the stranger `user_id` was told how to be allowed;
    /// `true` only the first time, so they are told once.
    pub async fn note_channel_stranger(
        &self,
        channel: &str,
        user_id: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO channel_strangers (channel, user_id, told_at) VALUES ($1, $2, $3)
                 ON CONFLICT (channel, user_id) DO NOTHING",
        )
        .bind(channel)
        .bind(user_id)
        .bind(micros(now))
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records that `channel` took the message `message_id`: `true` the
    /// first time, `false` when it was taken before (a redelivery, to be
    /// answered once). Ids taken more than `keep` ago are forgotten first.
    pub async fn first_channel_message(
        &self,
        channel: &str,
        message_id: &str,
        now: DateTime<Utc>,
        keep: Duration,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM channel_messages WHERE seen_at < $1")
            .bind(micros(now - keep))
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query(
            "INSERT INTO channel_messages (channel, message_id, seen_at) VALUES ($1, $2, $3)
                 ON CONFLICT (channel, message_id) DO NOTHING",
        )
        .bind(channel)
        .bind(message_id)
        .bind(micros(now))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// Keeps a webhook delivery `channel` took, before the app is answered;
    /// returns its id, for [`Store::forget_channel_delivery`].
    pub async fn keep_channel_delivery(
        &self,
        channel: &str,
        body: &str,
        now: DateTime<Utc>,
    ) -> Result<String, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        sqlx::query(
            "INSERT INTO channel_deliveries (id, channel, body, received_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(&id)
        .bind(channel)
        .bind(body)
        .bind(micros(now))
        .execute(self.pool())
        .await?;
        Ok(id)
    }

    /// The deliveries `channel` kept and has not handled, oldest first, at
    /// most `limit`: `(id, body)`.
    pub async fn kept_channel_deliveries(
        &self,
        channel: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        // The bound written out, as in `due_routines`.
        let sql = format!(
            "SELECT id, body FROM channel_deliveries WHERE channel = $1 \
                 ORDER BY received_at, id LIMIT {limit}"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(channel)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let c = Cols(row);
                Ok((c.text("id")?, c.text("body")?))
            })
            .collect()
    }

    /// Forgets a delivery whose messages were taken.
    pub async fn forget_channel_delivery(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM channel_deliveries WHERE id = $1")
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Spends a pairing code (the gateway's: same codes, same count of
    /// wrong ones, same lock) and allows `user_id` on `channel` for it, in
    /// one write.
    pub async fn pair_channel_user(
        &self,
        code_hash: &str,
        channel: &str,
        user_id: &str,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<ChannelPairing, StoreError> {
        let mut tx = self.begin_write().await?;
        let outcome = match spend_pairing_code(&mut *tx, code_hash, now, limit).await? {
            Spent::Yes => {
                insert_user(&mut *tx, channel, user_id, "pairing", now).await?;
                ChannelPairing::Allowed
            }
            Spent::Wrong(wrong_codes) => ChannelPairing::Wrong { wrong_codes },
            Spent::Locked => ChannelPairing::Locked,
        };
        tx.commit().await?;
        Ok(outcome)
    }
}

async fn insert_user(
    conn: &mut Conn,
    channel: &str,
    user_id: &str,
    origin: &str,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO channel_users (channel, user_id, origin, added_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (channel, user_id) DO NOTHING",
    )
    .bind(channel)
    .bind(user_id)
    .bind(origin)
    .bind(micros(now))
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}
