//! The vault's key in the OS keyring (`secrets.keyring = true`): the
//! `keyring` crate's default store, the Secret Service over D-Bus (zbus,
//! pure Rust) on Linux and the BSDs, the Keychain on macOS, the Credential
//! Manager on Windows. Never the kernel's keyutils, which forgets at reboot.
//!
//! Each home has two entries, service `cairn`: user `vault-key:HOME` (the
//! key in force) and `vault-key-next:HOME` (a rotation's new key until it
//! is promoted), so `rotate-key` keeps install.key's crash-safe protocol:
//! the next entry is written, the vault re-encrypted in one transaction,
//! then the next key is copied over the current one and its entry removed
//! (a crash between the two leaves both equal: promoting again is harmless).
//!
//! The calls block (D-Bus round trips, maybe an unlock prompt on a
//! desktop), so each runs on a thread of its own, waited for at most
//! [`WAIT`]. Built without the `keyring` feature, every call is refused.

use std::path::Path;

/// The keyring service name of cairn's entries.
pub const SERVICE: &str = "cairn";

/// The entry holding `home`'s key in force.
pub fn current_user(home: &Path) -> String {
    format!("vault-key:{}", absolute(home))
}

/// The entry holding a rotation's new key for `home`.
fn next_user(home: &Path) -> String {
    format!("vault-key-next:{}", absolute(home))
}

/// The home as an absolute path: the entry's name must not depend on the
/// directory a command was started from.
fn absolute(home: &Path) -> String {
    std::path::absolute(home)
        .unwrap_or_else(|_| home.to_path_buf())
        .display()
        .to_string()
}

/// How long a keyring call may take (a desktop may be asking for the
/// keyring's password meanwhile).
#[cfg(feature = "keyring")]
const WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// The key in force for `home`, made when `create` and there is none.
pub async fn current(home: &Path, create: bool) -> anyhow::Result<Option<[u8; 32]>> {
    let user = current_user(home);
    if let Some(key) = imp::get(&user).await? {
        return Ok(Some(key));
    }
    if !create {
        return Ok(None);
    }
    imp::set(&user, cairn_store::install_key::random_key()).await?;
    // Read back: what is stored is the key, whoever wrote it last.
    imp::get(&user).await
}

/// The key a rotation left, not yet promoted.
pub async fn next(home: &Path) -> anyhow::Result<Option<[u8; 32]>> {
    imp::get(&next_user(home)).await
}

/// Keeps `key` as the next one (replacing a stale one).
pub async fn write_next(home: &Path, key: &[u8; 32]) -> anyhow::Result<()> {
    imp::set(&next_user(home), *key).await
}

/// Makes the next key the current one: copied over it, then its entry
/// removed. Without a next key there is nothing to do.
pub async fn promote_next(home: &Path) -> anyhow::Result<()> {
    let Some(key) = next(home).await? else {
        return Ok(());
    };
    imp::set(&current_user(home), key).await?;
    imp::delete(&next_user(home)).await
}

/// Forgets a next key the vault never moved to.
pub async fn drop_next(home: &Path) -> anyhow::Result<()> {
    imp::delete(&next_user(home)).await
}

/// Puts `key` in force for `home` (a restore, copying a backup's key in).
pub async fn put(home: &Path, key: &[u8; 32]) -> anyhow::Result<()> {
    imp::set(&current_user(home), *key).await
}

/// The key in force of the entry named `user` (a backup records whose).
pub async fn get_user(user: &str) -> anyhow::Result<Option<[u8; 32]>> {
    imp::get(user).await
}

/// Why the keyring cannot be used, for the error naming the setting.
fn unreachable(reason: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!(
        "secrets.keyring = true, but the OS keyring cannot be used: {reason}. Start and unlock a \
         Secret Service (gnome-keyring, KeePassXC) in this D-Bus session, or set \
         secrets.keyring = false to keep the vault's key in install.key (see docs/secrets.md)"
    )
}

#[cfg(feature = "keyring")]
mod imp {
    use keyring::{Entry, Error};

    use super::{SERVICE, WAIT, unreachable};

    /// The 32-byte key in entry `user`, `None` when there is none.
    pub async fn get(user: &str) -> anyhow::Result<Option<[u8; 32]>> {
        let name = user.to_string();
        let bytes = call(user, move |entry| match entry.get_secret() {
            Ok(bytes) => Ok(Some(bytes)),
            Err(Error::NoEntry) => Ok(None),
            Err(e) => Err(e),
        })
        .await?;
        bytes
            .map(|b| {
                <[u8; 32]>::try_from(b.as_slice()).map_err(|_| {
                    anyhow::anyhow!(
                        "the OS keyring entry (service {SERVICE}, user {name}) holds {} bytes, not \
                         a 32-byte key: remove it with the keyring's own tool if nothing is \
                         sealed with it",
                        b.len()
                    )
                })
            })
            .transpose()
    }

    /// Stores `key` in entry `user` (replacing what was there).
    pub async fn set(user: &str, key: [u8; 32]) -> anyhow::Result<()> {
        call(user, move |entry| entry.set_secret(&key)).await
    }

    /// Removes entry `user`; none is not an error.
    pub async fn delete(user: &str) -> anyhow::Result<()> {
        call(user, |entry| match entry.delete_credential() {
            Ok(()) | Err(Error::NoEntry) => Ok(()),
            Err(e) => Err(e),
        })
        .await
    }

    /// Runs `op` on entry `user` on a thread of its own: the store's calls
    /// block, and one that never answers is left behind after [`WAIT`]
    /// rather than holding up the runtime's shutdown.
    async fn call<T: Send + 'static>(
        user: &str,
        op: impl FnOnce(&Entry) -> keyring::Result<T> + Send + 'static,
    ) -> anyhow::Result<T> {
        let user = user.to_string();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("keyring".to_string())
            .spawn(move || {
                let result = Entry::new(SERVICE, &user).and_then(|entry| op(&entry));
                let _ = tx.send(result);
            })?;
        match tokio::time::timeout(WAIT, rx).await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(e))) => Err(unreachable(describe(&e))),
            Ok(Err(_)) => Err(unreachable("the keyring call panicked")),
            Err(_) => Err(unreachable(format!(
                "no answer within {} s (locked, and waiting for its password?)",
                WAIT.as_secs()
            ))),
        }
    }

    /// The error, with the store's own first error when the store itself
    /// could not be set up (no D-Bus session, no Secret Service on it).
    fn describe(e: &Error) -> String {
        let e = match (e, Entry::store_status()) {
            (Error::NoDefaultStore, Err(setup)) => setup,
            _ => e,
        };
        let mut text = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            let more = s.to_string();
            if !text.contains(&more) {
                text = format!("{text}: {more}");
            }
            source = s.source();
        }
        text
    }
}

#[cfg(not(feature = "keyring"))]
mod imp {
    use super::unreachable;

    fn unsupported() -> anyhow::Error {
        unreachable("this cairn was built without the `keyring` feature")
    }

    pub async fn get(_user: &str) -> anyhow::Result<Option<[u8; 32]>> {
        Err(unsupported())
    }
    pub async fn set(_user: &str, _key: [u8; 32]) -> anyhow::Result<()> {
        Err(unsupported())
    }
    pub async fn delete(_user: &str) -> anyhow::Result<()> {
        Err(unsupported())
    }
}
