//! Pairing codes: what a person types on a new device to get a token.
//!
//! A code is ten characters from a 30-symbol alphabet without look-alikes
//! (no 0/O, 1/I/L, nor U), about 49 bits, shown as `ABCDE-FGHJK` and read
//! in any case, with or without the dash. The store keeps only the code's
//! HMAC-SHA256 under the install key (`$CAIRN_HOME/install.key`, 32 random
//! bytes, mode 0600, read or made by `cairn_store::install_key`), so a copy of the database alone does not let anyone
//! search the codes offline. Daemons pair with a code only when they hold
//! the key it was made with: those of one home (and `cairn pair` there)
//! do; daemons of other homes on the same PostgreSQL database do not,
//! unless their homes hold a copy of the same key.
//!
//! Wrong codes are counted in the store for every client and daemon
//! together: at [`WRONG_CODES_LIMIT`] every outstanding code is void until
//! a new one is made on the machine.

use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use rand::{Rng, RngCore};
use sha2::Sha256;

/// How long a pairing code stays valid: long enough to walk to the other
/// device and type it in; short enough that a code read off a screen or a
/// log is soon useless.
pub const PAIRING_CODE_TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Wrong codes, from all clients and daemons together, that void every
/// outstanding code.
pub const WRONG_CODES_LIMIT: u32 = 10;

/// The symbols of a code: digits and capitals without 0, 1, I, L, O, U.
const ALPHABET: &[u8; 30] = b"23456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Characters in a code (30^10 ≈ 2^49).
pub const CODE_LEN: usize = 10;

pub use cairn_store::install_key::{INSTALL_KEY_FILE, KeyError};

/// A fresh code from the CSPRNG (`rand`'s thread generator is ChaCha-based
/// and seeded from the OS), as it is stored and compared: no dash.
pub fn new_code() -> String {
    let mut rng = rand::rng();
    (0..CODE_LEN)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// A code as people read it: `ABCDE-FGHJK`.
pub fn display(code: &str) -> String {
    let (a, b) = code.split_at(code.len().min(CODE_LEN / 2));
    format!("{a}-{b}")
}

/// The code someone typed, in the stored form (upper case, without dashes
/// or spaces), or `None` when it cannot be a code at all (wrong length or
/// a character outside the alphabet).
pub fn normalize(typed: &str) -> Option<String> {
    let code: String = typed
        .chars()
        .filter(|c| *c != '-' && !c.is_whitespace())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    (code.len() == CODE_LEN && code.bytes().all(|b| ALPHABET.contains(&b))).then_some(code)
}

/// The per-install secret codes are hashed with.
#[derive(Clone)]
pub struct PairingKey([u8; 32]);

impl std::fmt::Debug for PairingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PairingKey(..)")
    }
}

impl PairingKey {
    /// A key that lives only in this process (a gateway given no install
    /// key accepts only codes made with this one).
    pub fn ephemeral() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// The key in `home`'s `install.key`, made (32 random bytes, mode 0600)
    /// when there is none ([`cairn_store::install_key::InstallKey::load_or_create`]).
    pub async fn load_or_create(home: &Path) -> Result<Self, KeyError> {
        cairn_store::install_key::InstallKey::load_or_create(home)
            .await
            .map(Self)
    }

    /// The hex HMAC-SHA256 of a normalized code, as the store keeps it.
    pub fn hash(&self, code: &str) -> String {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.0) else {
            // HMAC takes keys of any length; this cannot happen.
            return String::new();
        };
        mac.update(code.as_bytes());
        crate::auth::hex(&mac.finalize().into_bytes())
    }
}

/// Makes a code, records its keyed hash (valid for [`PAIRING_CODE_TTL`];
/// the count of wrong codes starts over) and returns the code to show.
pub async fn issue_code(
    store: &cairn_store::Store,
    key: &PairingKey,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<String, cairn_store::StoreError> {
    let code = new_code();
    let ttl = chrono::Duration::from_std(PAIRING_CODE_TTL).unwrap_or(chrono::Duration::minutes(15));
    store
        .create_pairing_code(&key.hash(&code), now, now + ttl)
        .await?;
    Ok(code)
}

/// The name of a token bought by pairing: `paired-YYYYMMDD-HHMMSS-xxxx`.
pub fn paired_token_name(now: chrono::DateTime<chrono::Utc>) -> String {
    let mut suffix = [0u8; 2];
    rand::rng().fill_bytes(&mut suffix);
    format!(
        "paired-{}-{}",
        now.format("%Y%m%d-%H%M%S"),
        crate::auth::hex(&suffix)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_at_least_40_bits_from_an_unambiguous_alphabet() {
        let bits = (ALPHABET.len() as f64).log2() * CODE_LEN as f64;
        assert!(bits >= 40.0, "{bits}");
        for look_alike in b"01ILOU" {
            assert!(!ALPHABET.contains(look_alike));
        }
        let (a, b) = (new_code(), new_code());
        assert_ne!(a, b);
        assert_eq!(normalize(&a), Some(a.clone()));
        let shown = display(&a);
        assert_eq!(shown.len(), CODE_LEN + 1);
        assert_eq!(&shown[5..6], "-");
    }

    #[test]
    fn typed_codes_are_read_in_any_case_with_or_without_the_dash() {
        let code = "ABCDE23456";
        for typed in [
            "ABCDE-23456",
            "abcde23456",
            " abCde - 23456 ",
            "ABCDE 23456",
        ] {
            assert_eq!(normalize(typed).as_deref(), Some(code), "{typed}");
        }
        for bad in [
            "ABCDE-2345",
            "ABCDE-234567",
            "ABCDO-23456",
            "ABCDE-10000",
            "",
        ] {
            assert_eq!(normalize(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_hash_is_keyed() {
        let (k1, k2) = (PairingKey::ephemeral(), PairingKey::ephemeral());
        assert_eq!(k1.hash("ABCDE23456"), k1.hash("ABCDE23456"));
        assert_ne!(k1.hash("ABCDE23456"), k2.hash("ABCDE23456"));
        assert_eq!(k1.hash("x").len(), 64);
        assert_eq!(format!("{k1:?}"), "PairingKey(..)");
    }
}
