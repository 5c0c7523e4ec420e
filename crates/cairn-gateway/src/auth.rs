//! Bearer tokens: made from the CSPRNG, shown once, kept only as SHA-256
//! hashes, and checked by looking the hash up (an index lookup on a hash is
//! not a timing oracle on the token; the constant-time comparison below
//! guards the one place two secrets are compared directly).

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use cairn_store::ApiToken;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::client::ClientIp;
use crate::dashboard::session;
use crate::error::ApiError;
use crate::state::{AppState, Gateway};

/// Prefix of every token, so a leaked one is recognisable in logs and scanners.
pub const TOKEN_PREFIX: &str = "cairn_";

/// A fresh token: the prefix and 32 random bytes in hex.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{TOKEN_PREFIX}{}", hex(&bytes))
}

/// Hex SHA-256 of a secret, as the store keeps it.
pub fn hash_secret(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// Whether two secrets are equal, in time independent of where they differ.
pub fn secrets_equal(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The token of an `Authorization: Bearer …` header, if there is one.
pub fn bearer_of(parts: &Parts) -> Option<&str> {
    bearer_in(&parts.headers)
}

/// The token of an `Authorization: Bearer …` header among `headers`.
pub fn bearer_in(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Checks `token` against the store: the live token it is, or 401.
pub async fn authenticate(gateway: &Gateway, token: &str) -> Result<ApiToken, ApiError> {
    let now = gateway.clock().now();
    match gateway
        .store()
        .authenticate_api_token(&hash_secret(token), now)
        .await?
    {
        Some(found) => Ok(found),
        None => Err(ApiError::unauthorized(
            "the bearer token is unknown, revoked or expired",
        )),
    }
}

/// A request authenticated by a bearer token (or the dashboard's session
/// cookie, see [`crate::dashboard::session`]).
#[derive(Debug, Clone)]
pub struct Authed(pub ApiToken);

impl FromRequestParts<AppState> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        // Served without connect info (a router driven in-process), there is
        // no client to limit; the check itself still applies.
        let known = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .is_some();
        let ip = if known {
            ClientIp::from_request_parts(parts, state)
                .await
                .ok()
                .map(|ClientIp(ip)| ip)
        } else {
            None
        };
        // A valid token always passes: only failures count, and only a
        // client past the limit of failures is refused (before counting).
        // The bearer token first; the dashboard's cookie only without one,
        // under its CSRF and Origin checks (a 403 there is not counted).
        let found = match (bearer_of(parts), session::session_token(&parts.headers)) {
            (Some(token), _) => authenticate(state, token).await,
            (None, Some(token)) => {
                session::authenticate(state, &parts.headers, &parts.method, token, false).await
            }
            (None, None) => Err(ApiError::unauthorized(
                "missing bearer token: send Authorization: Bearer <token> (from POST /pair or `cairn token create`)",
            )),
        };
        if let (Err(e), Some(ip)) = (&found, ip)
            && e.status == axum::http::StatusCode::UNAUTHORIZED
        {
            state.limits().auth_allowed(ip)?;
            state.limits().auth_failed(ip);
        }
        found.map(Authed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_prefixed_random_and_hash_to_hex() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 64);
        let h = hash_secret("abc");
        assert_eq!(
            h,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(secrets_equal(b"x", b"x") && !secrets_equal(b"x", b"y"));
    }
}
