//! `cairn doctor`'s vault check: where the vault's key is kept (install.key
//! or the OS keyring), whether that is reachable, and whether its key is the
//! one the vault's secrets are sealed with. Fingerprints only, never a key.

use cairn_core::config::Config;
use cairn_store::{Store, VaultKey};
use secrecy::ExposeSecret;

use super::{Check, Status, check};
use crate::vault::{KeySource, key_in_other};

/// The vault's key source and its state.
pub async fn check_vault(config: &Config) -> Check {
    let source = KeySource::of(config);
    let ids = match Store::open(config.database_url.expose_secret()).await {
        Ok((store, _)) => {
            let ids = store.vault_key_ids().await;
            store.close().await;
            match ids {
                Ok(ids) => ids,
                Err(e) => return check("vault", Status::Fail, e.to_string()),
            }
        }
        Err(_) => return check("vault", Status::Warn, "not checked: no database"),
    };
    let held = match source.current(false).await {
        Ok(held) => held.map(|k| VaultKey::derive(&k)),
        Err(e) => return check("vault", Status::Fail, format!("{e:#}")),
    };
    let place = format!("key kept in {} ({})", source.describe(), source.setting());
    match held {
        Some(key) if ids.iter().all(|id| id == key.id()) => check(
            "vault",
            Status::Ok,
            format!(
                "{place}: reachable, key {}; {}",
                key.id(),
                if ids.is_empty() {
                    "no secrets stored"
                } else {
                    "the vault's secrets are sealed with it"
                }
            ),
        ),
        None if ids.is_empty() => check(
            "vault",
            Status::Ok,
            format!("{place}: reachable, no key yet (`cairn secret set` makes one)"),
        ),
        held => {
            let found = held.map_or("no key".to_string(), |k| format!("key {}", k.id()));
            let hint = match key_in_other(&source, &ids).await {
                Some(_) => format!(
                    "; it is in {}: run `cairn secret rotate-key` to move it, or set {}",
                    source.other().describe(),
                    source.other().setting()
                ),
                None => String::new(),
            };
            check(
                "vault",
                Status::Fail,
                format!(
                    "{place}: {found} there, but the vault's secrets are sealed with key {}{hint}",
                    ids.join(", ")
                ),
            )
        }
    }
}
