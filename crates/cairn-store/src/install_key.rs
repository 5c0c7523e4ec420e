//! The install key: 32 random bytes in `$CAIRN_HOME/install.key` (mode
//! 0600), made on first use. The gateway hashes pairing codes with it and
//! the vault derives its encryption key from it (`crate::vault`). It lives
//! here, below both, so there is one loader.
//!
//! `cairn secret rotate-key` replaces it in two steps that survive a crash
//! at any point: the new key is written to `install.key.next` first, the
//! vault is re-encrypted in one transaction, then the new file is renamed
//! over the old one ([`InstallKey::promote_next`]). Whoever finds a `.next` file left
//! behind asks the vault which key its rows use and promotes or drops it.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use rand::RngCore;

/// Name of the install key's file in `$CAIRN_HOME`.
pub const INSTALL_KEY_FILE: &str = "install.key";

/// Name of the key a rotation is moving to, until it is promoted.
pub const NEXT_KEY_FILE: &str = "install.key.next";

/// Why the install key could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not 32 bytes.
    #[error(
        "{path}: expected 32 bytes, found {len}; remove it to make a new key (pairing codes and vault values made with the old one stop working)"
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: usize,
    },
}

/// 32 fresh bytes from the CSPRNG (`rand`'s thread generator is
/// ChaCha-based and seeded from the OS).
pub fn random_key() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// The install key's files. Not store methods: plain file I/O on the
/// caller's runtime, never the database (named in the store's hop check).
#[derive(Debug, Clone, Copy)]
pub struct InstallKey;

impl InstallKey {
    /// The key in `home`'s `install.key`, made (32 random bytes, mode 0600)
    /// when there is none. Two processes starting together agree on one: the
    /// key is written to a private temporary file and linked into place, so a
    /// reader never sees a partial key.
    pub async fn load_or_create(home: &Path) -> Result<[u8; 32], KeyError> {
        let path = home.join(INSTALL_KEY_FILE);
        if let Some(key) = Self::read_key(&path).await? {
            return Ok(key);
        }
        let key = random_key();
        match write_new(home, &path, &key).await {
            Ok(()) => {
                tracing::info!(path = %path.display(), "made the install key");
                Ok(key)
            }
            // Another process linked its key first: use that one.
            Err(KeyError::Io { source, .. }) if source.kind() == ErrorKind::AlreadyExists => {
                Self::read_key(&path).await?.ok_or_else(|| KeyError::Io {
                    path: path.clone(),
                    source,
                })
            }
            Err(e) => Err(e),
        }
    }

    /// The key in `path`, `None` when there is no such file.
    pub async fn read_key(path: &Path) -> Result<Option<[u8; 32]>, KeyError> {
        match tokio::fs::read(path).await {
            Ok(bytes) => <[u8; 32]>::try_from(bytes.as_slice())
                .map(Some)
                .map_err(|_| KeyError::Malformed {
                    path: path.to_path_buf(),
                    len: bytes.len(),
                }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(source) => Err(KeyError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The key a rotation left in `install.key.next`, if any.
    pub async fn read_next(home: &Path) -> Result<Option<[u8; 32]>, KeyError> {
        Self::read_key(&home.join(NEXT_KEY_FILE)).await
    }

    /// Writes `key` as `install.key.next` (replacing a stale one), synced.
    pub async fn write_next(home: &Path, key: &[u8; 32]) -> Result<(), KeyError> {
        let path = home.join(NEXT_KEY_FILE);
        Self::drop_next(home).await?;
        write_new(home, &path, key).await
    }

    /// Renames `install.key.next` over `install.key` (atomic on one file system).
    pub async fn promote_next(home: &Path) -> Result<(), KeyError> {
        let from = home.join(NEXT_KEY_FILE);
        let to = home.join(INSTALL_KEY_FILE);
        tokio::fs::rename(&from, &to)
            .await
            .map_err(|source| KeyError::Io { path: to, source })?;
        sync_dir(home).await
    }

    /// Removes `install.key.next` (a rotation that did not reach the vault).
    pub async fn drop_next(home: &Path) -> Result<(), KeyError> {
        let path = home.join(NEXT_KEY_FILE);
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(source) => Err(KeyError::Io { path, source }),
        }
    }
}

/// Writes `key` to `path` (which must not exist) through a private
/// temporary file linked into place, so no reader sees a partial key.
async fn write_new(home: &Path, path: &Path, key: &[u8; 32]) -> Result<(), KeyError> {
    let tmp = home.join(format!(
        ".{INSTALL_KEY_FILE}.{}.{:08x}",
        std::process::id(),
        rand::rng().next_u32()
    ));
    let write = async {
        use tokio::io::AsyncWriteExt;
        let mut file = private_file(&tmp).await?;
        file.write_all(key).await?;
        file.sync_all().await?;
        tokio::fs::hard_link(&tmp, path).await
    };
    let linked = write.await;
    let _ = tokio::fs::remove_file(&tmp).await;
    linked.map_err(|source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    sync_dir(home).await
}

/// Makes a rename or link in `dir` durable.
async fn sync_dir(dir: &Path) -> Result<(), KeyError> {
    let io = |source| KeyError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let handle = tokio::fs::File::open(dir).await.map_err(io)?;
    handle.sync_all().await.map_err(io)
}

/// A new file only its owner can read and write.
async fn private_file(path: &Path) -> std::io::Result<tokio::fs::File> {
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    options.open(path).await
}

#[cfg(test)]
mod tests {
    #![expect(
        clippy::disallowed_methods,
        reason = "test fixtures may use blocking std::fs"
    )]
    use super::*;

    #[tokio::test]
    async fn the_install_key_is_made_once_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let made = InstallKey::load_or_create(home.path()).await.unwrap();
        let path = home.path().join(INSTALL_KEY_FILE);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), 32);
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(InstallKey::load_or_create(home.path()).await.unwrap(), made);
        // Only the key is left in the home: no temporary file.
        assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 1);
        std::fs::write(&path, b"short").unwrap();
        let err = InstallKey::load_or_create(home.path()).await.unwrap_err();
        assert!(err.to_string().contains("install.key"), "{err}");
    }

    #[tokio::test]
    async fn processes_starting_together_agree_on_one_key() {
        let home = tempfile::tempdir().unwrap();
        let keys = futures_join(home.path()).await;
        let distinct: std::collections::BTreeSet<[u8; 32]> = keys.into_iter().collect();
        assert_eq!(distinct.len(), 1);
    }

    async fn futures_join(home: &Path) -> Vec<[u8; 32]> {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let home = home.to_path_buf();
            tasks.spawn(async move { InstallKey::load_or_create(&home).await.unwrap() });
        }
        tasks.join_all().await
    }

    #[tokio::test]
    async fn a_next_key_is_promoted_or_dropped() {
        let home = tempfile::tempdir().unwrap();
        let old = InstallKey::load_or_create(home.path()).await.unwrap();
        let new = random_key();
        InstallKey::write_next(home.path(), &new).await.unwrap();
        assert_eq!(InstallKey::read_next(home.path()).await.unwrap(), Some(new));
        // A second rotation replaces a stale next key.
        InstallKey::write_next(home.path(), &new).await.unwrap();
        InstallKey::drop_next(home.path()).await.unwrap();
        assert_eq!(InstallKey::load_or_create(home.path()).await.unwrap(), old);
        InstallKey::write_next(home.path(), &new).await.unwrap();
        InstallKey::promote_next(home.path()).await.unwrap();
        assert_eq!(InstallKey::load_or_create(home.path()).await.unwrap(), new);
        assert_eq!(InstallKey::read_next(home.path()).await.unwrap(), None);
    }
}
