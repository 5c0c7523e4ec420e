//! The vault's key and the secrets config.toml refers to.
//!
//! The key is derived from `$CAIRN_HOME/install.key` (the default, which
//! works on a headless machine), or kept in the OS keyring when
//! `secrets.keyring = true` ([`KeySource`], [`keyring`]). The values sit encrypted in
//! the store (`cairn_store::vault`); [`load_secrets`] reads those that
//! config.toml's `${secret:NAME}` references name, before the configuration
//! is resolved, so no command needs an environment variable for them.

pub mod keyring;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::Context;
use cairn_core::config::Config;
use cairn_store::install_key::{INSTALL_KEY_FILE, InstallKey};
use cairn_store::{Store, VaultKey};
use secrecy::{ExposeSecret, SecretString};

/// Where the vault's master key is kept.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// `install.key` in the home (also the pairing codes' key).
    File(PathBuf),
    /// The OS keyring, in the home's entry (`secrets.keyring = true`).
    Keyring(PathBuf),
}

impl KeySource {
    /// The source `config` names.
    pub fn of(config: &Config) -> KeySource {
        let keyring = matches!(
            config
                .settings
                .get("secrets.keyring")
                .and_then(|r| r.value.as_ref()),
            Some(cairn_core::config::Value::Bool(true))
        );
        let home = config.home().to_path_buf();
        if keyring {
            KeySource::Keyring(home)
        } else {
            KeySource::File(home)
        }
    }

    /// The other source of the same home (where a vault sealed before
    /// `secrets.keyring` changed keeps its key).
    pub fn other(&self) -> KeySource {
        match self {
            KeySource::File(home) => KeySource::Keyring(home.clone()),
            KeySource::Keyring(home) => KeySource::File(home.clone()),
        }
    }

    /// The `secrets.keyring` value that selects this source.
    pub fn setting(&self) -> &'static str {
        match self {
            KeySource::File(_) => "secrets.keyring = false",
            KeySource::Keyring(_) => "secrets.keyring = true",
        }
    }

    /// Where the key is, for messages.
    pub fn describe(&self) -> String {
        match self {
            KeySource::File(home) => home.join(INSTALL_KEY_FILE).display().to_string(),
            KeySource::Keyring(home) => format!(
                "the OS keyring (service {}, user {})",
                keyring::SERVICE,
                keyring::current_user(home)
            ),
        }
    }

    /// The master key, made when `create` and there is none.
    pub async fn current(&self, create: bool) -> anyhow::Result<Option<[u8; 32]>> {
        match self {
            KeySource::File(home) if create => Ok(Some(InstallKey::load_or_create(home).await?)),
            KeySource::File(home) => Ok(InstallKey::read_key(&home.join(INSTALL_KEY_FILE)).await?),
            KeySource::Keyring(home) => keyring::current(home, create).await,
        }
    }

    /// The key a rotation left, not yet promoted.
    async fn next(&self) -> anyhow::Result<Option<[u8; 32]>> {
        match self {
            KeySource::File(home) => Ok(InstallKey::read_next(home).await?),
            KeySource::Keyring(home) => keyring::next(home).await,
        }
    }

    /// Keeps `key` as the next one (step one of a rotation).
    pub async fn write_next(&self, key: &[u8; 32]) -> anyhow::Result<()> {
        match self {
            KeySource::File(home) => Ok(InstallKey::write_next(home, key).await?),
            KeySource::Keyring(home) => keyring::write_next(home, key).await,
        }
    }

    /// Makes the next key the current one (the last step of a rotation).
    pub async fn promote_next(&self) -> anyhow::Result<()> {
        match self {
            KeySource::File(home) => Ok(InstallKey::promote_next(home).await?),
            KeySource::Keyring(home) => keyring::promote_next(home).await,
        }
    }

    /// Forgets a next key the vault never moved to.
    async fn drop_next(&self) -> anyhow::Result<()> {
        match self {
            KeySource::File(home) => Ok(InstallKey::drop_next(home).await?),
            KeySource::Keyring(home) => keyring::drop_next(home).await,
        }
    }
}

/// The vault's key for `store`, after finishing a rotation a crash
/// interrupted: the vault's rows say whether it reached them (then the next
/// key is promoted) or not (then it is dropped). `None` when there is no
/// key and `create` is false. No key is made for a vault that already
/// holds secrets. A key that is not the one the rows are sealed with is an
/// error naming the vault, where the key was read, and, when the other
/// source (install.key or the keyring) holds the rows' key, how to move.
pub async fn open_key(
    source: &KeySource,
    store: &Store,
    create: bool,
) -> anyhow::Result<Option<VaultKey>> {
    let ids = store.vault_key_ids().await?;
    if let Some(next) = source.next().await? {
        let next_id = VaultKey::derive(&next).id().to_string();
        if !ids.is_empty() && ids.iter().all(|id| *id == next_id) {
            source.promote_next().await?;
        } else {
            source.drop_next().await?;
        }
    }
    let Some(master) = source.current(create && ids.is_empty()).await? else {
        if ids.is_empty() {
            return Ok(None);
        }
        if let Some(moved) = sealed_elsewhere(source, &ids).await {
            anyhow::bail!(moved);
        }
        anyhow::bail!(
            "the vault holds secrets (key {}) but there is no key at {}: put back the key the \
             vault was written with (`cairn restore --key-file` takes one)",
            ids.join(", "),
            source.describe()
        );
    };
    let key = VaultKey::derive(&master);
    if let Some(other) = ids.iter().find(|id| *id != key.id()) {
        if let Some(moved) = sealed_elsewhere(source, &ids).await {
            anyhow::bail!(moved);
        }
        anyhow::bail!(
            "the vault's secrets are encrypted with key {other}, and the key at {} is {}: \
             use the key the vault was written with",
            source.describe(),
            key.id()
        );
    }
    Ok(Some(key))
}

/// The vault's key when `source` lacks it but the home's other source holds
/// it (`secrets.keyring` changed since the vault was sealed).
pub async fn key_in_other(source: &KeySource, ids: &[String]) -> Option<VaultKey> {
    let master = source.other().current(false).await.ok()??;
    let key = VaultKey::derive(&master);
    (!ids.is_empty() && ids.iter().all(|id| id == key.id())).then_some(key)
}

/// What to do when the vault's key is in the other source, if it is.
async fn sealed_elsewhere(source: &KeySource, ids: &[String]) -> Option<String> {
    let key = key_in_other(source, ids).await?;
    let other = source.other();
    Some(format!(
        "the vault's secrets are sealed with key {}, kept in {} ({}), but this configuration \
         says {}: run `cairn secret rotate-key` to move the vault to a new key in {}, or set {} \
         again",
        key.id(),
        other.describe(),
        other.setting(),
        source.setting(),
        source.describe(),
        other.setting()
    ))
}

/// Reads from the open `store` every value of the vault when `all`, else
/// the `referenced` ones, which are marked used.
pub async fn read_secrets(
    source: &KeySource,
    store: &Store,
    referenced: BTreeSet<String>,
    all: bool,
) -> anyhow::Result<BTreeMap<String, SecretString>> {
    let Some(key) = open_key(source, store, false).await? else {
        return Ok(BTreeMap::new());
    };
    let wanted: Vec<String> = referenced.into_iter().collect();
    let mut values = store
        .vault_resolve(&key, &wanted, chrono::Utc::now())
        .await?;
    if all {
        values.extend(store.vault_values(&key).await?);
    }
    Ok(values)
}

/// Reads the vault for `config`: every value when `all` (the daemon, whose
/// routines' webhook secrets may name any), else the `referenced` ones
/// (those config.toml names), which are marked used. Nothing is opened when
/// neither applies.
pub fn load_secrets(
    config: &Config,
    referenced: BTreeSet<String>,
    all: bool,
) -> anyhow::Result<BTreeMap<String, SecretString>> {
    if referenced.is_empty() && !all {
        return Ok(BTreeMap::new());
    }
    let url = config.database_url.expose_secret().to_string();
    let source = KeySource::of(config);
    // Its own thread and runtime: configuration is loaded from sync code
    // and from the daemon's async reload alike.
    let read = async move {
        let (store, _) = Store::open(&url)
            .await
            .context("cannot open the database")?;
        let result = read_secrets(&source, &store, referenced, all).await;
        store.close().await;
        result
    };
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(read)
            })
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("reading the vault panicked")))
    })
    .context("cannot read the vault for config.toml's ${secret:NAME} references")
}
