//! The vault's rows: `vault_secrets` (migration 0027).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret, SecretString};

use super::VaultKey;
use crate::codec::{Cols, micros};
use crate::{Store, StoreError, Topic};

/// A secret as listed: never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaultEntry {
    /// Its name.
    pub name: String,
    /// When it was first stored.
    pub created_at: DateTime<Utc>,
    /// When its value was last set.
    pub updated_at: DateTime<Utc>,
    /// When a process last resolved it (`${secret:NAME}`), if ever.
    pub last_used_at: Option<DateTime<Utc>>,
    /// The fingerprint of the key it is sealed with.
    pub key_id: String,
}

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Stores `value` as `name`, sealed with `key` (replacing its value,
    /// keeping when it was made); whether the name is new.
    pub async fn vault_set(
        &self,
        key: &VaultKey,
        name: &str,
        value: &SecretString,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let (nonce, sealed) = key.seal(name, value.expose_secret())?;
        let mut tx = self.begin_write().await?;
        let existed = sqlx::query("SELECT 1 FROM vault_secrets WHERE name = $1")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        sqlx::query(
            "INSERT INTO vault_secrets (name, nonce, ciphertext, key_id, created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $5)
             ON CONFLICT (name) DO UPDATE SET nonce = excluded.nonce,
               ciphertext = excluded.ciphertext, key_id = excluded.key_id,
               updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(nonce)
        .bind(sealed)
        .bind(key.id())
        .bind(micros(now))
        .execute(&mut *tx)
        .await?;
        tx.publish(Topic::Vault).await?;
        tx.commit().await?;
        Ok(!existed)
    }

    /// Every secret, by name; no value is decrypted.
    pub async fn vault_list(&self) -> Result<Vec<VaultEntry>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, key_id, created_at, updated_at, last_used_at FROM vault_secrets",
        )
        .fetch_all(self.pool())
        .await?;
        let mut out = rows
            .iter()
            .map(|r| {
                let c = Cols(r);
                Ok(VaultEntry {
                    name: c.text("name")?,
                    created_at: c.time("created_at")?,
                    updated_at: c.time("updated_at")?,
                    last_used_at: c.time_opt("last_used_at")?,
                    key_id: c.text("key_id")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // Sorted here: PostgreSQL's ORDER BY follows the database's collation.
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Removes `name`; whether it existed.
    pub async fn vault_remove(&self, name: &str) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let done = sqlx::query("DELETE FROM vault_secrets WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() > 0 {
            tx.publish(Topic::Vault).await?;
        }
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// The values of those of `names` the vault holds, decrypted, each
    /// marked used at `now`; a name it does not hold is left out (the
    /// caller names what is missing, and where it was asked for).
    pub async fn vault_resolve(
        &self,
        key: &VaultKey,
        names: &[String],
        now: DateTime<Utc>,
    ) -> Result<BTreeMap<String, SecretString>, StoreError> {
        let mut out = BTreeMap::new();
        if names.is_empty() {
            return Ok(out);
        }
        for (name, value) in self.vault_values(key).await? {
            if names.contains(&name) {
                out.insert(name, value);
            }
        }
        if !out.is_empty() {
            let mut tx = self.begin_write().await?;
            for name in out.keys() {
                sqlx::query("UPDATE vault_secrets SET last_used_at = $1 WHERE name = $2")
                    .bind(micros(now))
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
        }
        Ok(out)
    }

    /// Every `(name, value)` of the vault, decrypted, by name, without
    /// marking them used: for the leak scanner, which looks for every
    /// value in what leaves.
    pub async fn vault_values(
        &self,
        key: &VaultKey,
    ) -> Result<Vec<(String, SecretString)>, StoreError> {
        let rows = sqlx::query("SELECT name, key_id, nonce, ciphertext FROM vault_secrets")
            .fetch_all(self.pool())
            .await?;
        let mut out = rows
            .iter()
            .map(|r| {
                let c = Cols(r);
                let name = c.text("name")?;
                let value = key.open(
                    &name,
                    &c.text("key_id")?,
                    &c.text("nonce")?,
                    &c.text("ciphertext")?,
                )?;
                Ok((name, value))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The fingerprints of the keys the vault's rows are sealed with.
    pub async fn vault_key_ids(&self) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query("SELECT DISTINCT key_id FROM vault_secrets")
            .fetch_all(self.pool())
            .await?;
        let mut ids = rows
            .iter()
            .map(|r| Cols(r).text("key_id"))
            .collect::<Result<Vec<_>, StoreError>>()?;
        ids.sort();
        Ok(ids)
    }

    /// Re-seals every value sealed with `old` under `new`, in one
    /// transaction: every row is under one key or the other, never lost.
    /// Rows already under `new` are left alone (a rotation resumed); a row
    /// under neither fails the whole and changes nothing. How many moved.
    pub async fn vault_rekey(&self, old: &VaultKey, new: &VaultKey) -> Result<usize, StoreError> {
        let mut tx = self.begin_write().await?;
        let rows = sqlx::query("SELECT name, key_id, nonce, ciphertext FROM vault_secrets")
            .fetch_all(&mut *tx)
            .await?;
        let mut moved = 0;
        for r in &rows {
            let c = Cols(r);
            let name = c.text("name")?;
            let key_id = c.text("key_id")?;
            if key_id == new.id() {
                continue;
            }
            let value = old.open(&name, &key_id, &c.text("nonce")?, &c.text("ciphertext")?)?;
            let (nonce, sealed) = new.seal(&name, value.expose_secret())?;
            sqlx::query(
                "UPDATE vault_secrets SET nonce = $1, ciphertext = $2, key_id = $3 WHERE name = $4",
            )
            .bind(nonce)
            .bind(sealed)
            .bind(new.id())
            .bind(&name)
            .execute(&mut *tx)
            .await?;
            moved += 1;
        }
        tx.commit().await?;
        Ok(moved)
    }

    /// Every stored column of the vault as text, for tests that check no
    /// value is kept in clear. Test support (feature `testing`).
    #[cfg(any(test, feature = "testing"))]
    pub async fn vault_raw_for_tests(&self) -> Result<String, StoreError> {
        let rows = sqlx::query("SELECT name, nonce, ciphertext, key_id FROM vault_secrets")
            .fetch_all(self.pool())
            .await?;
        let mut out = String::new();
        for r in &rows {
            let c = Cols(r);
            for col in ["name", "nonce", "ciphertext", "key_id"] {
                out.push_str(&c.text(col)?);
                out.push('\n');
            }
        }
        Ok(out)
    }
}
