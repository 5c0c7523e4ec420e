//! The key a restore needs: the archive's vault names the fingerprints of
//! the keys its secrets are sealed with, and the key found (`--key-file`,
//! the home's install.key, or the OS keyring: this home's entry or the one
//! the backup was taken with) must be that one, before anything is written.

use std::path::Path;

use anyhow::Context;
use cairn_store::VaultKey;

use super::RestoreArgs;
use super::archive::Manifest;
use crate::exit::BadInput;
use crate::vault::{KeySource, keyring};

/// The key to put where `source` keeps it (from `--key-file`, or a backup's
/// keyring entry copied to this home's), after checking that it (or the
/// one already there, or none) opens the archive's vault: a wrong key is
/// refused here, before anything is written.
pub async fn vault_key(
    args: &RestoreArgs,
    source: &KeySource,
    manifest: &Manifest,
) -> anyhow::Result<Option<[u8; 32]>> {
    if let Some(path) = &args.key_file {
        let given = read_key(path)?;
        check(args, manifest, &given, &path.display().to_string())?;
        if let KeySource::Keyring(_) = source {
            // Unreachable: said now, while nothing is written.
            source.current(false).await?;
        }
        return Ok(Some(given));
    }
    if manifest.vault_keys.is_empty() {
        return Ok(None);
    }
    match source {
        KeySource::File(home) => {
            let path = home.join(cairn_store::install_key::INSTALL_KEY_FILE);
            let Ok(key) = read_key(&path) else {
                return Err(missing(args, manifest, &path.display().to_string()));
            };
            check(args, manifest, &key, &path.display().to_string())?;
            Ok(None)
        }
        KeySource::Keyring(_) => {
            if let Some(key) = source.current(false).await? {
                check(args, manifest, &key, &source.describe())?;
                return Ok(None);
            }
            let Some(entry) = &manifest.vault_keyring_entry else {
                return Err(missing(args, manifest, &source.describe()));
            };
            let from = format!(
                "the OS keyring (service {}, user {entry})",
                keyring::SERVICE
            );
            let Some(key) = keyring::get_user(entry).await? else {
                return Err(missing(
                    args,
                    manifest,
                    &format!("{} nor {from}", source.describe()),
                ));
            };
            check(args, manifest, &key, &from)?;
            Ok(Some(key))
        }
    }
}

/// Refused unless `key` (read from `from`) is the one the vault is sealed with.
fn check(
    args: &RestoreArgs,
    manifest: &Manifest,
    key: &[u8; 32],
    from: &str,
) -> anyhow::Result<()> {
    let id = VaultKey::derive(key).id().to_string();
    match manifest.vault_keys.iter().find(|k| **k != id) {
        Some(other) => Err(BadInput(format!(
            "{}: its vault's secrets are encrypted with key {other}, and {from} is key {id}: give \
             the key of the home the backup was taken from with --key-file FILE (nothing was \
             restored)",
            args.file.display(),
        ))
        .into()),
        None => Ok(()),
    }
}

/// No key where it was looked for.
fn missing(args: &RestoreArgs, manifest: &Manifest, looked: &str) -> anyhow::Error {
    BadInput(format!(
        "{}: its vault holds secrets encrypted with key {}, and there is no key at {looked}; \
         give the install.key of the home it was taken from with --key-file FILE (nothing was \
         restored)",
        args.file.display(),
        manifest.vault_keys.join(", ")
    ))
    .into()
}

/// A 32-byte key file.
#[expect(
    clippy::disallowed_methods,
    reason = "one small read before the restore starts; no other task is running"
)]
fn read_key(path: &Path) -> anyhow::Result<[u8; 32]> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
        BadInput(format!(
            "{}: expected a 32-byte install.key, found {} bytes",
            path.display(),
            bytes.len()
        ))
        .into()
    })
}
