//! The vault: secrets a person stores with `cairn secret set`, kept as
//! XChaCha20-Poly1305 ciphertext (random 24-byte nonce per value, the
//! secret's name as associated data, so a value cannot be moved to another
//! name). The database never holds a value in clear; the key lives outside
//! it: derived from the install key ([`crate::install_key`]) or taken from
//! the OS keyring by the binary. Each row names the key it was sealed with
//! by a short fingerprint ([`VaultKey::id`]), so a wrong key is reported as
//! such before anything is decrypted, and a rotation can resume.

mod store;

pub use store::VaultEntry;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use rand::RngCore;
use secrecy::SecretString;
use sha2::{Digest, Sha256};

use crate::StoreError;

/// Longest secret name accepted.
pub const MAX_NAME_LEN: usize = 64;

/// Whether `name` may name a secret: letters, digits and `_`, not starting
/// with a digit (what a `${secret:NAME}` reference and a shell variable
/// can both spell), at most [`MAX_NAME_LEN`] characters.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The key values are sealed with. Its `Debug` shows only the fingerprint.
#[derive(Clone)]
pub struct VaultKey {
    cipher: XChaCha20Poly1305,
    id: String,
}

impl std::fmt::Debug for VaultKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VaultKey({})", self.id)
    }
}

impl VaultKey {
    /// The vault key of a 32-byte master key (the install key, or one kept
    /// in the OS keyring): HMAC-SHA256 of a fixed label, so the pairing
    /// codes hashed with the same install key never use the same bytes.
    pub fn derive(master: &[u8; 32]) -> Self {
        let derived: [u8; 32] = match Hmac::<Sha256>::new_from_slice(master) {
            Ok(mut mac) => {
                mac.update(b"cairn vault key v1");
                mac.finalize().into_bytes().into()
            }
            // HMAC takes keys of any length; this cannot happen.
            Err(_) => *master,
        };
        let mut hash = Sha256::new();
        hash.update(b"cairn vault key id v1");
        hash.update(derived);
        let id = hex(&hash.finalize()[..8]);
        Self {
            cipher: XChaCha20Poly1305::new(&derived.into()),
            id,
        }
    }

    /// A short fingerprint naming the key (never enough to find it).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `(nonce, ciphertext)`, both base64, of `value` stored as `name`.
    pub(crate) fn seal(&self, name: &str, value: &str) -> Result<(String, String), StoreError> {
        let mut nonce = [0u8; 24];
        rand::rng().fill_bytes(&mut nonce);
        let sealed = self
            .cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: value.as_bytes(),
                    aad: &aad(name),
                },
            )
            .map_err(|_| StoreError::Vault(format!("cannot encrypt secret {name}")))?;
        Ok((STANDARD.encode(nonce), STANDARD.encode(sealed)))
    }

    /// The value of `name` sealed as `(nonce, ciphertext)` under `key_id`.
    pub(crate) fn open(
        &self,
        name: &str,
        key_id: &str,
        nonce: &str,
        sealed: &str,
    ) -> Result<SecretString, StoreError> {
        if key_id != self.id {
            return Err(StoreError::Vault(format!(
                "secret {name} is encrypted with key {key_id}, and the key given is {}: \
                 use the install.key (or keyring entry) the vault was written with",
                self.id
            )));
        }
        let corrupt = |why: &str| StoreError::Corrupt {
            what: format!("vault secret {name}"),
            message: why.to_string(),
        };
        let nonce: [u8; 24] = STANDARD
            .decode(nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(|| corrupt("bad nonce"))?;
        let sealed = STANDARD
            .decode(sealed)
            .map_err(|_| corrupt("bad ciphertext"))?;
        let plain = self
            .cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &sealed,
                    aad: &aad(name),
                },
            )
            .map_err(|_| {
                StoreError::Vault(format!(
                    "secret {name} does not decrypt with key {}: the row was altered or the key is not the one it was written with",
                    self.id
                ))
            })?;
        String::from_utf8(plain)
            .map(SecretString::from)
            .map_err(|_| corrupt("not UTF-8"))
    }
}

/// The associated data binding a ciphertext to its name.
fn aad(name: &str) -> Vec<u8> {
    let mut out = b"cairn vault v1\0".to_vec();
    out.extend_from_slice(name.as_bytes());
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    #[test]
    fn values_open_only_under_their_key_and_name() {
        let key = VaultKey::derive(&[7; 32]);
        let (nonce, sealed) = key.seal("GH", "s3cr3t").unwrap();
        assert!(!sealed.contains("s3cr3t"));
        let opened = key.open("GH", key.id(), &nonce, &sealed).unwrap();
        assert_eq!(opened.expose_secret(), "s3cr3t");
        // Moved to another name: refused.
        let err = key.open("OTHER", key.id(), &nonce, &sealed).unwrap_err();
        assert!(err.to_string().contains("does not decrypt"), "{err}");
        // Another key: named, not tried.
        let other = VaultKey::derive(&[8; 32]);
        assert_ne!(other.id(), key.id());
        let err = other.open("GH", key.id(), &nonce, &sealed).unwrap_err();
        assert!(err.to_string().contains(key.id()), "{err}");
        // Two seals of one value differ (fresh nonces).
        assert_ne!(key.seal("GH", "s3cr3t").unwrap().1, sealed);
        assert_eq!(format!("{key:?}"), format!("VaultKey({})", key.id()));
        assert_eq!(key.id().len(), 16);
    }

    #[test]
    fn names() {
        for good in ["GH", "gh_token", "_X", "A1"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in ["", "1A", "a-b", "a b", "x:y", &"A".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
