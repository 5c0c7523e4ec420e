//! Verifying a signed routine webhook: `X-Signature-256: sha256=<hex>`, the
//! HMAC-SHA256 under the routine's secret of the raw body or, when the
//! sender adds `X-Cairn-Timestamp: <unix seconds>`, of `<timestamp>.<body>`,
//! compared in constant time. A timestamped delivery is accepted only
//! within [`TIMESTAMP_WINDOW`] of now, and only once: its replay key lets
//! the engine refuse a captured delivery sent again.

use chrono::{DateTime, Utc};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header that carries the signature.
pub const SIGNATURE_HEADER: &str = "X-Signature-256";

/// The header that carries the signed timestamp (Unix seconds).
pub const TIMESTAMP_HEADER: &str = "X-Cairn-Timestamp";

/// How far a signed timestamp may be from now, either way.
pub const TIMESTAMP_WINDOW: std::time::Duration = std::time::Duration::from_secs(300);

/// What a webhook request brought.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The raw body.
    pub body: &'a [u8],
    /// The [`SIGNATURE_HEADER`] value.
    pub signature: Option<&'a str>,
    /// The [`TIMESTAMP_HEADER`] value.
    pub timestamp: Option<&'a str>,
    /// Whether the caller checked a valid bearer token (a routine without
    /// a secret needs one).
    pub bearer_ok: bool,
}

/// A delivery whose signature holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// For a timestamped delivery, what identifies it (timestamp and
    /// signature): the same key again is a replay.
    pub replay_key: Option<String>,
}

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
    /// The timestamp header is not Unix seconds.
    #[error("malformed {TIMESTAMP_HEADER} header: expected Unix seconds")]
    MalformedTimestamp,
    /// The timestamp is too far from now.
    #[error(
        "{TIMESTAMP_HEADER} is {0} s away from the daemon's clock; at most 300 s is accepted (resend with a fresh timestamp)"
    )]
    StaleTimestamp(i64),
    /// The routine's secret names an environment variable that is not set
    /// (or a secret the vault does not hold).
    #[error(
        "routine \"{routine}\": its webhook secret refers to {var}: {}",
        cairn_core::text::missing_reference(.var)
    )]
    SecretUnavailable {
        /// The routine.
        routine: String,
        /// The variable.
        var: String,
    },
}

/// The secret as written (`${VAR}` is read from `env`, `${secret:NAME}`
/// from the vault's values it holds).
pub fn resolve_secret(
    routine: &str,
    written: &str,
    env: &(impl cairn_core::text::Vars + ?Sized),
) -> Result<String, WebhookError> {
    match cairn_core::routine::env_reference(written) {
        Some(var) => {
            env.var(var)
                .map(str::to_string)
                .ok_or_else(|| WebhookError::SecretUnavailable {
                    routine: routine.to_string(),
                    var: var.to_string(),
                })
        }
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

/// Checks the delivery's signature under `secret`: over the body, or over
/// `<timestamp>.<body>` when a timestamp came, which must then be within
/// [`TIMESTAMP_WINDOW`] of `now`.
pub fn verify(
    secret: &str,
    delivery: &Delivery<'_>,
    now: DateTime<Utc>,
) -> Result<Verified, WebhookError> {
    let header = delivery
        .signature
        .ok_or(WebhookError::MissingSignature)?
        .trim();
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
    let timestamp = match delivery.timestamp.map(str::trim) {
        None => None,
        Some(text) => {
            let secs: i64 = text.parse().map_err(|_| WebhookError::MalformedTimestamp)?;
            let skew = now.timestamp().saturating_sub(secs);
            let window = i64::try_from(TIMESTAMP_WINDOW.as_secs()).unwrap_or(i64::MAX);
            if skew.saturating_abs() > window {
                return Err(WebhookError::StaleTimestamp(skew));
            }
            Some(text)
        }
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return Err(WebhookError::BadSignature);
    };
    if let Some(ts) = timestamp {
        mac.update(ts.as_bytes());
        mac.update(b".");
    }
    mac.update(delivery.body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&given)
        .map_err(|_| WebhookError::BadSignature)?;
    Ok(Verified {
        replay_key: timestamp.map(|ts| format!("{ts}.{}", hex.to_ascii_lowercase())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::channels::webhook::signature;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    fn check(secret: &str, body: &[u8], sig: Option<&str>) -> Result<Verified, WebhookError> {
        let delivery = Delivery {
            body,
            signature: sig,
            timestamp: None,
            bearer_ok: false,
        };
        verify(secret, &delivery, now())
    }

    #[test]
    fn a_correct_signature_passes_and_any_change_fails() {
        let body = br#"{"ref":"main"}"#;
        let good = signature("s3cret", body);
        let plain = Verified { replay_key: None };
        assert_eq!(check("s3cret", body, Some(&good)), Ok(plain.clone()));
        assert_eq!(
            check(
                "s3cret",
                body,
                Some(&good.to_uppercase().replace("SHA256=", "sha256="))
            ),
            Ok(plain)
        );
        assert_eq!(
            check("other", body, Some(&good)),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            check("s3cret", b"{}", Some(&good)),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            check("s3cret", body, None),
            Err(WebhookError::MissingSignature)
        );
        assert_eq!(
            check("s3cret", body, Some("sha1=abc")),
            Err(WebhookError::MalformedSignature)
        );
        let short = &good[..good.len() - 2];
        assert_eq!(
            check("s3cret", body, Some(short)),
            Err(WebhookError::MalformedSignature)
        );
        let bad_hex = format!("sha256={}", "zz".repeat(32));
        assert_eq!(
            check("s3cret", body, Some(&bad_hex)),
            Err(WebhookError::MalformedSignature)
        );
    }

    fn stamped(ts: &str, sig: &str, at: DateTime<Utc>) -> Result<Verified, WebhookError> {
        let delivery = Delivery {
            body: BODY,
            signature: Some(sig),
            timestamp: Some(ts),
            bearer_ok: false,
        };
        verify("s3cret", &delivery, at)
    }

    const BODY: &[u8] = br#"{"ref":"main"}"#;

    #[test]
    fn a_timestamp_is_signed_with_the_body_and_must_be_recent() {
        let ts = now().timestamp().to_string();
        let mut signed = format!("{ts}.").into_bytes();
        signed.extend_from_slice(BODY);
        let good = signature("s3cret", &signed);
        let key = stamped(&ts, &good, now()).unwrap().replay_key.unwrap();
        assert!(key.starts_with(&format!("{ts}.")), "{key}");
        // The signature of the body alone does not do once a timestamp came,
        // nor does this signature with another timestamp.
        assert_eq!(
            stamped(&ts, &signature("s3cret", BODY), now()),
            Err(WebhookError::BadSignature)
        );
        let next = (now().timestamp() + 1).to_string();
        assert_eq!(
            stamped(&next, &good, now()),
            Err(WebhookError::BadSignature)
        );
        // Five minutes either way, and no more.
        for (skew, ok) in [(300, true), (-300, true), (301, false), (-301, false)] {
            let result = stamped(&ts, &good, now() + chrono::Duration::seconds(skew));
            assert_eq!(result.is_ok(), ok, "{skew}: {result:?}");
            if !ok {
                assert_eq!(result, Err(WebhookError::StaleTimestamp(skew)));
            }
        }
        assert_eq!(
            stamped("soon", &good, now()),
            Err(WebhookError::MalformedTimestamp)
        );
    }

    #[test]
    fn a_secret_can_come_from_the_environment() {
        let env = cairn_core::config::Environment::new(
            [("HOOK_SECRET".to_string(), "abc".to_string())].into(),
        )
        .with_secrets([("HOOK".to_string(), "from-vault".into())].into());
        assert_eq!(
            resolve_secret("r", "${HOOK_SECRET}", &env),
            Ok("abc".into())
        );
        assert_eq!(
            resolve_secret("r", "${secret:HOOK}", &env),
            Ok("from-vault".into())
        );
        assert_eq!(resolve_secret("r", "plain", &env), Ok("plain".into()));
        assert!(matches!(
            resolve_secret("r", "${NOPE}", &env),
            Err(WebhookError::SecretUnavailable { .. })
        ));
        let err = resolve_secret("r", "${secret:NOPE}", &env).unwrap_err();
        assert!(
            err.to_string().contains("secret NOPE is not in the vault"),
            "{err}"
        );
    }
}
