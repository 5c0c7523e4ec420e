//! A small key-value table for runtime state that outlives the process
//! (cost counters, cursors, preferences). Values are JSON.

use chrono::Utc;
use sqlx::Row;

use crate::codec::{json, micros};
use crate::signal::Topic;
use crate::{Store, StoreError};

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// The value stored under `key`, if any.
    pub async fn get_setting(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let row = sqlx::query("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| {
            let text: String = r.try_get("value")?;
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                what: format!("setting {key}"),
                message: e.to_string(),
            })
        })
        .transpose()
    }

    /// Stores `value` under `key`, replacing any previous value.
    pub async fn set_setting(
        &self,
        key: &str,
        value: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO settings (key, value, updated_at) VALUES ($1, $2, $3)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(key)
        .bind(json(value, "setting")?)
        .bind(micros(Utc::now()))
        .execute(&mut *tx)
        .await?;
        tx.publish(Topic::Settings).await?;
        Ok(tx.commit().await?)
    }

    /// Removes `key`; returns whether it existed. Test support (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    pub async fn delete_setting(&self, key: &str) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query("DELETE FROM settings WHERE key = $1")
            .bind(key)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() > 0 {
            tx.publish(Topic::Settings).await?;
        }
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Every key starting with `prefix`, in key order, with its value.
    /// Test support (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    pub async fn list_settings(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, serde_json::Value)>, StoreError> {
        // substr instead of LIKE so '%' and '_' in keys mean themselves.
        let rows =
            sqlx::query("SELECT key, value FROM settings WHERE substr(key, 1, length($1)) = $1")
                .bind(prefix)
                .fetch_all(self.pool())
                .await?;
        let mut pairs = rows
            .iter()
            .map(|r| {
                let key: String = r.try_get("key")?;
                let text: String = r.try_get("value")?;
                let value = serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
                    what: format!("setting {key}"),
                    message: e.to_string(),
                })?;
                Ok((key, value))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // Sorted here: PostgreSQL's ORDER BY follows the database's collation.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(pairs)
    }
}
