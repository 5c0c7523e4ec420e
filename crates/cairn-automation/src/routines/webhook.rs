//! Verifying a signed routine webhook: `X-Signature-256: sha256=<hex>`, the
//! HMAC-SHA256 of the raw body under the routine's secret, compared in
//! constant time.

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header that carries the signature.
pub const SIGNATURE_HEADER: &str = "X-Signature-256";

/// Why a webhook was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// No routine answers to this path or id.
    #[error("no webhook routine at \"{0}\"")]
    Unknown(String),
    /// The routine exists but is disabled.
    #[error("routine \"{0}\" is disabled")]
    Disabled(String),
    /// The request had no signature header.
    #[error("missing {SIGNATURE_HEADER} header")]
    MissingSignature,
    /// The header is not `sha256=<64 hex digits>`.
    #[error("malformed {SIGNATURE_HEADER} header: expected sha256=<hex>")]
    MalformedSignature,
    /// The signature does not match the body.
    #[error("signature does not match the body")]
    BadSignature,
    /// The routine's secret names an environment variable that is not set.
    #[error("routine \"{routine}\": its webhook secret refers to {var}, which is not set")]
    SecretUnavailable {
        /// The routine.
        routine: String,
        /// The variable.
        var: String,
    },
}

/// The secret as written (`${VAR}` is read from `env`).
pub fn resolve_secret(
    routine: &str,
    written: &str,
    env: &BTreeMap<String, String>,
) -> Result<String, WebhookError> {
    match cairn_core::routine::env_reference(written) {
        Some(var) => env
            .get(var)
            .cloned()
            .ok_or_else(|| WebhookError::SecretUnavailable {
                routine: routine.to_string(),
                var: var.to_string(),
            }),
        None => Ok(written.to_string()),
    }
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Checks `header` (the value of [`SIGNATURE_HEADER`]) against `body`.
pub fn verify(secret: &str, body: &[u8], header: Option<&str>) -> Result<(), WebhookError> {
    let header = header.ok_or(WebhookError::MissingSignature)?.trim();
    let hex = header
        .strip_prefix("sha256=")
        .ok_or(WebhookError::MalformedSignature)?;
    if hex.len() != 64 {
        return Err(WebhookError::MalformedSignature);
    }
    let mut given = [0u8; 32];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        let (Some(hi), Some(lo)) = (hex_digit(pair[0]), hex_digit(pair[1])) else {
            return Err(WebhookError::MalformedSignature);
        };
        given[i] = hi << 4 | lo;
    }
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return Err(WebhookError::BadSignature);
    };
    mac.update(body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&given)
        .map_err(|_| WebhookError::BadSignature)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::channels::webhook::signature;

    #[test]
    fn a_correct_signature_passes_and_any_change_fails() {
        let body = br#"{"ref":"main"}"#;
        let good = signature("s3cret", body);
        assert_eq!(verify("s3cret", body, Some(&good)), Ok(()));
        assert_eq!(
            verify(
                "s3cret",
                body,
                Some(&good.to_uppercase().replace("SHA256=", "sha256="))
            ),
            Ok(())
        );
        assert_eq!(
            verify("other", body, Some(&good)),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify("s3cret", b"{}", Some(&good)),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify("s3cret", body, None),
            Err(WebhookError::MissingSignature)
        );
        assert_eq!(
            verify("s3cret", body, Some("sha1=abc")),
            Err(WebhookError::MalformedSignature)
        );
        let short = &good[..good.len() - 2];
        assert_eq!(
            verify("s3cret", body, Some(short)),
            Err(WebhookError::MalformedSignature)
        );
        let bad_hex = format!("sha256={}", "zz".repeat(32));
        assert_eq!(
            verify("s3cret", body, Some(&bad_hex)),
            Err(WebhookError::MalformedSignature)
        );
    }

    #[test]
    fn a_secret_can_come_from_the_environment() {
        let env = BTreeMap::from([("HOOK_SECRET".to_string(), "abc".to_string())]);
        assert_eq!(
            resolve_secret("r", "${HOOK_SECRET}", &env),
            Ok("abc".into())
        );
        assert_eq!(resolve_secret("r", "plain", &env), Ok("plain".into()));
        assert!(matches!(
            resolve_secret("r", "${NOPE}", &env),
            Err(WebhookError::SecretUnavailable { .. })
        ));
    }
}
