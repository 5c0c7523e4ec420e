//! The notification outbox: records first, deliveries claimed under a lease
//! (so several processes on one database deliver each once), every attempt
//! kept, and the person's inbox.

use std::time::Duration;

use cairn_core::notification::{DeliveryAttempt, DeliveryStatus, Notification};
use chrono::{DateTime, Utc};
use sqlx::any::AnyRow;
use sqlx::{Arguments as _, Row};
use uuid::Uuid;

use crate::codec::{Cols, Params, RowValues, json, micros, micros_opt, row_values, statement_args};
use crate::connect::WriteTx;
use crate::signal::Topic;
use crate::{Store, StoreError};

const COLUMNS: &str = "id, user_id, channel, title, body, priority, tags, data, source, created_at, \
     status, attempts, next_attempt_at, delivered_at, last_error, in_inbox, read_at";
/// How many values a row of [`COLUMNS`] takes.
const NOTIFICATION_VALUES: usize = 17;

/// How a delivery attempt ended, for [`Store::record_attempt`].
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptOutcome {
    /// The receiver confirmed it.
    Delivered,
    /// It failed; try again at this instant.
    Retry {
        /// When the next attempt is due.
        next_at: DateTime<Utc>,
    },
    /// It failed for good (retry budget spent, or it can never work): the
    /// notification goes to the inbox with the reason.
    GiveUp,
}

/// Which notifications a listing shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NotificationFilter {
    /// Only this delivery status.
    pub status: Option<DeliveryStatus>,
    /// At most this many, newest first.
    pub limit: Option<u32>,
}

/// How notifications to one channel have fared (`cairn channel list`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChannelDeliveries {
    /// The channel's name.
    pub channel: String,
    /// Notifications delivered.
    pub delivered: u64,
    /// Notifications still to be delivered (retrying or not tried yet).
    pub pending: u64,
    /// Notifications given up on (kept in the inbox).
    pub failed: u64,
    /// The last attempt that delivered.
    pub last_delivered_at: Option<DateTime<Utc>>,
    /// The last attempt that failed.
    pub last_failed_at: Option<DateTime<Utc>>,
    /// What the last failed attempt said.
    pub last_error: Option<String>,
}

fn notification(row: &AnyRow) -> Result<Notification, StoreError> {
    let c = Cols(row);
    let status = c.text("status")?;
    let priority = c.text("priority")?;
    let data: Option<String> = c.text_opt("data")?;
    Ok(Notification {
        id: c.uuid("id")?,
        user_id: c.text("user_id")?,
        channel: c.text("channel")?,
        title: c.text("title")?,
        body: c.text("body")?,
        priority: priority.parse().map_err(|e| StoreError::Corrupt {
            what: "notifications.priority".into(),
            message: format!("{e}"),
        })?,
        tags: c.json("tags")?,
        data: data
            .map(|d| serde_json::from_str(&d))
            .transpose()
            .map_err(|e| StoreError::Corrupt {
                what: "notifications.data".into(),
                message: e.to_string(),
            })?,
        source: c.text("source")?,
        created_at: c.time("created_at")?,
        status: DeliveryStatus::parse(&status).ok_or_else(|| StoreError::Corrupt {
            what: "notifications.status".into(),
            message: format!("unknown status {status}"),
        })?,
        attempts: u32::try_from(c.uint("attempts")?).unwrap_or(u32::MAX),
        next_attempt_at: c.time_opt("next_attempt_at")?,
        delivered_at: c.time_opt("delivered_at")?,
        last_error: c.text_opt("last_error")?,
        in_inbox: c.boolean("in_inbox")?,
        read_at: c.time_opt("read_at")?,
    })
}

/// A notification's row, encoded ahead of the write (see [`RowValues`]).
pub(crate) fn notification_values(n: &Notification) -> Result<RowValues, StoreError> {
    let tags = json(&n.tags, "tags")?;
    let data = n.data.as_ref().map(|d| json(d, "data")).transpose()?;
    row_values("notifications", NOTIFICATION_VALUES, |a| {
        a.add(n.id.to_string())?;
        a.add(n.user_id.clone())?;
        a.add(n.channel.clone())?;
        a.add(n.title.clone())?;
        a.add(n.body.clone())?;
        a.add(n.priority.as_str())?;
        a.add(tags)?;
        a.add(data)?;
        a.add(n.source.clone())?;
        a.add(micros(n.created_at))?;
        a.add(n.status.as_str())?;
        a.add(i64::from(n.attempts))?;
        a.add(micros_opt(n.next_attempt_at))?;
        a.add(micros_opt(n.delivered_at))?;
        a.add(n.last_error.clone())?;
        a.add(i64::from(n.in_inbox))?;
        a.add(micros_opt(n.read_at))
    })
}

/// Records notifications, a multi-row `INSERT` per chunk (one statement,
/// so one round-trip to SQLite's worker thread, for a whole batch), and
/// publishes them to dispatchers when any is pending.
pub(crate) async fn insert_notifications(
    conn: &mut WriteTx,
    all: &[&Notification],
) -> Result<(), StoreError> {
    let rows = all
        .iter()
        .map(|n| notification_values(n))
        .collect::<Result<Vec<_>, _>>()?;
    let pending = all.iter().any(|n| n.status == DeliveryStatus::Pending);
    insert_notification_rows(conn, pending, &rows).await
}

/// The insert of `rows` notifications.
fn insert_sql(params: Params, rows: usize) -> String {
    format!(
        "INSERT INTO notifications ({COLUMNS}) VALUES {}",
        params.rows(rows, NOTIFICATION_VALUES, 1)
    )
}

/// Every insert [`insert_notification_rows`] can run (see
/// [`Params::shapes`]).
pub(crate) fn insert_shapes(params: Params) -> impl Iterator<Item = String> {
    Params::shapes(params.rows_per_statement(NOTIFICATION_VALUES))
        .map(move |rows| insert_sql(params, rows))
}

/// [`insert_notifications`] of rows encoded ahead ([`notification_values`]);
/// `pending` says whether any is pending.
pub(crate) async fn insert_notification_rows(
    conn: &mut WriteTx,
    pending: bool,
    rows: &[RowValues],
) -> Result<(), StoreError> {
    if pending {
        conn.publish(Topic::Notifications).await?;
    }
    let params = Params::of(&**conn);
    for chunk in Params::pieces(rows, params.rows_per_statement(NOTIFICATION_VALUES)) {
        let sql = insert_sql(params, chunk.len());
        sqlx::query_with(sqlx::AssertSqlSafe(sql), statement_args(chunk))
            .execute(&mut **conn)
            .await?;
    }
    Ok(())
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Records a notification (the outbox row) before any delivery is tried.
    pub async fn insert_notification(&self, n: &Notification) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        insert_notifications(&mut tx, &[n]).await?;
        Ok(tx.commit().await?)
    }

    /// Claims up to `limit` pending notifications due at `now` whose lease
    /// is free or lapsed, for `owner`, until `now + lease`. Each is claimed by
    /// a compare-and-set, so of several processes exactly one gets it.
    pub async fn claim_notifications(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<Notification>, StoreError> {
        // The bound written out, as in `due_routines`.
        let sql = format!(
            "SELECT {COLUMNS} FROM notifications WHERE status = 'pending' AND next_attempt_at <= $1 \
                 AND (lease_until IS NULL OR lease_until < $1) ORDER BY next_attempt_at, id LIMIT {limit}"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(micros(now))
            .fetch_all(self.pool())
            .await?;
        let until = micros(now) + i64::try_from(lease.as_micros()).unwrap_or(i64::MAX / 2);
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let n = notification(row)?;
            let done = sqlx::query(
                "UPDATE notifications SET lease_owner = $1, lease_until = $2 WHERE id = $3 \
                     AND status = 'pending' AND (lease_until IS NULL OR lease_until < $4)",
            )
            .bind(owner)
            .bind(until)
            .bind(n.id.to_string())
            .bind(micros(now))
            .execute(self.pool())
            .await?;
            if done.rows_affected() == 1 {
                claimed.push(n);
            }
        }
        Ok(claimed)
    }

    /// Claims one pending notification by id (due or not), like
    /// [`Store::claim_notifications`]; `None` when it is not pending or
    /// another process holds it.
    pub async fn claim_notification(
        &self,
        id: Uuid,
        owner: &str,
        now: DateTime<Utc>,
        lease: Duration,
    ) -> Result<Option<Notification>, StoreError> {
        let until = micros(now) + i64::try_from(lease.as_micros()).unwrap_or(i64::MAX / 2);
        let done = sqlx::query(
            "UPDATE notifications SET lease_owner = $1, lease_until = $2 WHERE id = $3 \
                 AND status = 'pending' AND (lease_until IS NULL OR lease_until < $4)",
        )
        .bind(owner)
        .bind(until)
        .bind(id.to_string())
        .bind(micros(now))
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.get_notification(id).await
    }

    /// Records one attempt of a notification that `owner` holds, and its
    /// consequence, in one transaction. Returns `false` (and records
    /// nothing) when the lease was lost to another process meanwhile.
    pub async fn record_attempt(
        &self,
        id: Uuid,
        owner: &str,
        attempt: &DeliveryAttempt,
        outcome: &AttemptOutcome,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let (status, next_at, delivered_at, in_inbox) = match outcome {
            AttemptOutcome::Delivered => ("delivered", None, Some(micros(attempt.at)), None),
            AttemptOutcome::Retry { next_at } => ("pending", Some(micros(*next_at)), None, None),
            AttemptOutcome::GiveUp => ("failed", None, None, Some(1i64)),
        };
        let last_error = (!attempt.delivered).then(|| attempt.detail.clone());
        let done = sqlx::query(
            "UPDATE notifications SET status = $1, attempts = $2, next_attempt_at = $3, \
                 delivered_at = $4, last_error = COALESCE($5, last_error), \
                 in_inbox = COALESCE($6, in_inbox), lease_owner = NULL, lease_until = NULL \
                 WHERE id = $7 AND lease_owner = $8 AND status = 'pending'",
        )
        .bind(status)
        .bind(i64::from(attempt.attempt))
        .bind(next_at)
        .bind(delivered_at)
        .bind(last_error)
        .bind(in_inbox)
        .bind(id.to_string())
        .bind(owner)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO notification_attempts (notification_id, attempt, at, delivered, detail) \
                 VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id.to_string())
        .bind(i64::from(attempt.attempt))
        .bind(micros(attempt.at))
        .bind(i64::from(attempt.delivered))
        .bind(&attempt.detail)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Puts a pending notification straight into the inbox as failed, with
    /// the reason (its channel does not exist, say). No attempt is recorded.
    pub async fn fail_to_inbox(&self, id: Uuid, reason: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE notifications SET status = 'failed', in_inbox = 1, last_error = $1, \
                 next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL \
                 WHERE id = $2 AND status = 'pending'",
        )
        .bind(reason)
        .bind(id.to_string())
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// When the earliest pending notification can next be attempted: its
    /// due time, or when the lease another process holds on it lapses (a
    /// dispatcher sleeps until then).
    pub async fn next_notification_due(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let row = sqlx::query(
            "SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until > next_attempt_at \
                 THEN lease_until ELSE next_attempt_at END) AS due \
                 FROM notifications WHERE status = 'pending'",
        )
        .fetch_one(self.pool())
        .await?;
        Cols(&row).time_opt("due")
    }

    /// One notification by id.
    pub async fn get_notification(&self, id: Uuid) -> Result<Option<Notification>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM notifications WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id.to_string())
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(notification).transpose()
    }

    /// The ids of notifications whose id starts with `prefix` (what people type).
    pub async fn notification_ids_like(&self, prefix: &str) -> Result<Vec<Uuid>, StoreError> {
        let prefix: String = prefix
            .chars()
            .filter(|c| c.is_ascii_hexdigit() || *c == '-')
            .collect::<String>()
            .to_ascii_lowercase();
        let rows =
            sqlx::query("SELECT id FROM notifications WHERE id LIKE $1 ORDER BY id LIMIT 10")
                .bind(format!("{prefix}%"))
                .fetch_all(self.pool())
                .await?;
        rows.iter().map(|r| Cols(r).uuid("id")).collect()
    }

    /// A notification's attempts, first first.
    pub async fn notification_attempts(
        &self,
        id: Uuid,
    ) -> Result<Vec<DeliveryAttempt>, StoreError> {
        let rows = sqlx::query(
            "SELECT attempt, at, delivered, detail FROM notification_attempts \
                 WHERE notification_id = $1 ORDER BY attempt",
        )
        .bind(id.to_string())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|row| {
                let c = Cols(row);
                Ok(DeliveryAttempt {
                    attempt: u32::try_from(c.uint("attempt")?).unwrap_or(u32::MAX),
                    at: c.time("at")?,
                    delivered: c.boolean("delivered")?,
                    detail: c.text("detail")?,
                })
            })
            .collect()
    }

    /// Notifications, newest first.
    pub async fn list_notifications(
        &self,
        filter: &NotificationFilter,
    ) -> Result<Vec<Notification>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM notifications WHERE ($1 = '' OR status = $1) \
                 ORDER BY created_at DESC, id DESC LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(filter.status.map_or("", DeliveryStatus::as_str))
            .bind(i64::from(filter.limit.unwrap_or(50)))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(notification).collect()
    }

    /// A user's inbox: unread first, then newest first; read ones only with `all`.
    pub async fn inbox(
        &self,
        user_id: &str,
        all: bool,
        limit: u32,
    ) -> Result<Vec<Notification>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM notifications WHERE user_id = $1 AND in_inbox = 1 \
                 AND ($2 = 1 OR read_at IS NULL) \
                 ORDER BY CASE WHEN read_at IS NULL THEN 0 ELSE 1 END, created_at DESC, id DESC LIMIT $3"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(user_id)
            .bind(i64::from(all))
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(notification).collect()
    }

    /// Marks inbox notifications read: one (`Some(id)`) or all of the user's.
    /// Returns how many changed.
    pub async fn mark_read(
        &self,
        user_id: &str,
        id: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE notifications SET read_at = $1 WHERE user_id = $2 AND in_inbox = 1 \
                 AND read_at IS NULL AND ($3 = '' OR id = $3)",
        )
        .bind(micros(now))
        .bind(user_id)
        .bind(id.map(|i| i.to_string()).unwrap_or_default())
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Whether unread notifications wait for the conversation of session
    /// `session_id` (channel `conversation:<id>`): one cheap read, for polling.
    pub async fn has_conversation_notices(&self, session_id: &str) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT id FROM notifications WHERE channel = $1 AND read_at IS NULL LIMIT 1",
        )
        .bind(cairn_core::notification::conversation_channel(session_id))
        .fetch_optional(self.pool())
        .await?;
        Ok(row.is_some())
    }

    /// Takes the unread notifications of session `session_id`'s conversation
    /// and marks them read at `now` in the same statement, so that two
    /// readers never both get one; oldest first.
    pub async fn take_conversation_notices(
        &self,
        session_id: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<Notification>, StoreError> {
        let mut tx = self.begin_write().await?;
        let sql = format!(
            "UPDATE notifications SET read_at = $2 WHERE channel = $1 AND read_at IS NULL \
                 RETURNING {COLUMNS}"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(cairn_core::notification::conversation_channel(session_id))
            .bind(micros(now))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut all = rows
            .iter()
            .map(notification)
            .collect::<Result<Vec<_>, _>>()?;
        all.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        Ok(all)
    }

    /// How notifications to each channel have fared, by channel name.
    pub async fn channel_deliveries(&self) -> Result<Vec<ChannelDeliveries>, StoreError> {
        let mut by_channel = std::collections::BTreeMap::<String, ChannelDeliveries>::new();
        let rows = sqlx::query(
            "SELECT channel, status, COUNT(*) AS n FROM notifications GROUP BY channel, status",
        )
        .fetch_all(self.pool())
        .await?;
        for row in &rows {
            let c = Cols(row);
            let channel = c.text("channel")?;
            let entry = by_channel.entry(channel.clone()).or_default();
            entry.channel = channel;
            let n = c.uint("n")?;
            match DeliveryStatus::parse(&c.text("status")?) {
                Some(DeliveryStatus::Delivered) => entry.delivered += n,
                Some(DeliveryStatus::Failed) => entry.failed += n,
                Some(DeliveryStatus::Pending) | None => entry.pending += n,
            }
        }
        let rows = sqlx::query(
            "SELECT n.channel,
                    MAX(CASE WHEN a.delivered = 1 THEN a.at END) AS last_ok,
                    MAX(CASE WHEN a.delivered = 0 THEN a.at END) AS last_failed
                 FROM notification_attempts a JOIN notifications n ON n.id = a.notification_id
                 GROUP BY n.channel",
        )
        .fetch_all(self.pool())
        .await?;
        for row in &rows {
            let c = Cols(row);
            let Some(entry) = by_channel.get_mut(&c.text("channel")?) else {
                continue;
            };
            entry.last_delivered_at = c.time_opt("last_ok")?;
            entry.last_failed_at = c.time_opt("last_failed")?;
        }
        for entry in by_channel.values_mut() {
            let Some(at) = entry.last_failed_at else {
                continue;
            };
            let row = sqlx::query(
                "SELECT a.detail FROM notification_attempts a
                     JOIN notifications n ON n.id = a.notification_id
                     WHERE n.channel = $1 AND a.delivered = 0 AND a.at = $2 LIMIT 1",
            )
            .bind(&entry.channel)
            .bind(micros(at))
            .fetch_optional(self.pool())
            .await?;
            entry.last_error = row.map(|r| Cols(&r).text("detail")).transpose()?;
        }
        Ok(by_channel.into_values().collect())
    }

    /// How many notifications are in each status (for `doctor` and status pages).
    pub async fn notification_counts(&self) -> Result<Vec<(DeliveryStatus, u64)>, StoreError> {
        let rows = sqlx::query("SELECT status, COUNT(*) AS n FROM notifications GROUP BY status")
            .fetch_all(self.pool())
            .await?;
        let mut out = Vec::new();
        for row in &rows {
            let status: String = row.try_get("status")?;
            if let Some(s) = DeliveryStatus::parse(&status) {
                out.push((s, Cols(row).uint("n")?));
            }
        }
        Ok(out)
    }
}
