//! The dashboard's sign-in: a pairing code (the one scheme, through
//! [`crate::routes::pair::redeem`]) buys a token of origin `dashboard`,
//! which the browser holds only as an HttpOnly, SameSite=Strict cookie. The
//! store keeps its hash like every token's, so `cairn token list` shows the
//! session and `cairn token revoke` ends it.
//!
//! CSRF: a cookie-authenticated request that changes state must carry
//! `X-CSRF-Token` (the SHA-256 of the session token under a label, which the
//! page reads from `GET /ui/session`; another site can neither read it nor
//! compute it) and an `Origin` equal to the gateway's own; any
//! cookie-authenticated request with another `Origin` is refused, which
//! also covers WebSocket handshakes. Bearer tokens are untouched by this.

use axum::Json;
use axum::extract::State;
use axum::http::header::{COOKIE, HOST, ORIGIN, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use cairn_store::ApiToken;
use serde::{Deserialize, Serialize};

use crate::auth;
use crate::client::ClientIp;
use crate::error::ApiError;
use crate::state::{AppState, Gateway};

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "cairn_session";

/// The header a state-changing cookie request carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// The token's origin in the store, as `cairn token list` shows it.
pub const SESSION_ORIGIN: &str = "dashboard";

/// The CSRF token bound to the session token `token`.
pub fn csrf_for(token: &str) -> String {
    auth::hash_secret(&format!("cairn-dashboard-csrf:{token}"))
}

/// The session token of the request's `Cookie` header(s), if any.
pub fn session_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim())
        .filter(|v| !v.is_empty())
}

/// Whether `method` can change state (everything but GET, HEAD, OPTIONS).
fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Checks `Origin` against the `Host` the request was sent to: absent is
/// accepted only when `required` is false.
pub fn check_origin(headers: &HeaderMap, required: bool) -> Result<(), ApiError> {
    let refused = |why: &str| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_origin",
            format!("{why}: the dashboard's session is only used from the dashboard's own origin"),
        )
    };
    let Some(origin) = headers.get(ORIGIN) else {
        return if required {
            Err(refused("missing Origin header"))
        } else {
            Ok(())
        };
    };
    let host = headers.get(HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|o| {
            o.strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"))
        })
        .map(|h| h.trim_end_matches('/'));
    match (origin_host, host) {
        (Some(o), Some(h)) if o.eq_ignore_ascii_case(h) => Ok(()),
        _ => Err(refused("the request's Origin is not this gateway")),
    }
}

/// Authenticates a request by its session cookie `token`: the token must be
/// live, the origin this gateway's, and a state-changing request must carry
/// the session's CSRF token. WebSocket handshakes pass `origin_required`.
pub async fn authenticate(
    gateway: &Gateway,
    headers: &HeaderMap,
    method: &Method,
    token: &str,
    origin_required: bool,
) -> Result<ApiToken, ApiError> {
    let unsafe_method = changes_state(method);
    check_origin(headers, origin_required || unsafe_method)?;
    if unsafe_method {
        let sent = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !auth::secrets_equal(sent.as_bytes(), csrf_for(token).as_bytes()) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "csrf",
                "missing or wrong X-CSRF-Token: a request that changes something needs the session's CSRF token (GET /ui/session)",
            ));
        }
    }
    auth::authenticate(gateway, token).await.map_err(|_| {
        ApiError::unauthorized(
            "the session is unknown, revoked or expired: sign in again with a pairing code",
        )
    })
}

/// The cookie that holds `token` (or, with `None`, clears it); `Secure`
/// when the page was reached over HTTPS (a TLS-terminating proxy), since a
/// browser drops a `Secure` cookie set over plain HTTP on 127.0.0.1.
fn cookie(token: Option<&str>, max_age: Option<u64>, https: bool) -> HeaderValue {
    let secure = if https { "; Secure" } else { "" };
    let text = match token {
        Some(t) => format!(
            "{SESSION_COOKIE}={t}; Path=/; HttpOnly; SameSite=Strict{secure}{}",
            max_age
                .map(|s| format!("; Max-Age={s}"))
                .unwrap_or_default()
        ),
        None => format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict{secure}; Max-Age=0"),
    };
    // Only hex, ASCII punctuation and digits: always a valid header value.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Whether the page that sent this was loaded over HTTPS (its `Origin`).
fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get(ORIGIN)
        .and_then(|o| o.to_str().ok())
        .is_some_and(|o| o.starts_with("https://"))
}

/// What the page knows of its session.
#[derive(Debug, Serialize)]
pub struct SessionView {
    /// The token's name (`cairn token revoke NAME` ends the session).
    pub name: String,
    /// The CSRF token to send in `X-CSRF-Token`.
    pub csrf: String,
    /// When the session ends, if ever.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub struct SignIn {
    /// The pairing code `cairn pair` printed.
    pub code: String,
}

fn session_name(now: chrono::DateTime<chrono::Utc>) -> String {
    crate::pairing::paired_token_name(now).replacen("paired-", "dashboard-", 1)
}

/// `POST /ui/session`: trades a pairing code for the session cookie.
pub async fn sign_in(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    body: crate::extract::ApiJson<SignIn>,
) -> Result<Response, ApiError> {
    // A sign-in from another site would plant its session (login CSRF).
    check_origin(&headers, true)?;
    let crate::extract::ApiJson(form) = body;
    let (token, record) =
        crate::routes::pair::redeem(&state, ip, Some(&form.code), SESSION_ORIGIN, session_name)
            .await?;
    let max_age = state.settings().token_ttl.map(|d| d.as_secs());
    let view = SessionView {
        name: record.name,
        csrf: csrf_for(&token),
        expires_at: record.expires_at,
    };
    let mut response = Json(view).into_response();
    response.headers_mut().insert(
        SET_COOKIE,
        cookie(Some(&token), max_age, over_https(&headers)),
    );
    Ok(response)
}

/// `GET /ui/session`: the signed-in session, or 401.
pub async fn current(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<SessionView>, ApiError> {
    let token = session_token(&headers).ok_or_else(|| ApiError::unauthorized("not signed in"))?;
    let record = authenticate(&state, &headers, &Method::GET, token, false).await?;
    Ok(Json(SessionView {
        name: record.name,
        csrf: csrf_for(token),
        expires_at: record.expires_at,
    }))
}

/// `DELETE /ui/session`: signs out, revoking the session's token.
pub async fn sign_out(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let token = session_token(&headers).ok_or_else(|| ApiError::unauthorized("not signed in"))?;
    let record = authenticate(&state, &headers, &Method::DELETE, token, true).await?;
    state
        .store()
        .revoke_api_token(&record.name, state.clock().now())
        .await?;
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .insert(SET_COOKIE, cookie(None, None, over_https(&headers)));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others_and_secure_over_https() {
        let mut headers = HeaderMap::new();
        headers.insert(
            COOKIE,
            HeaderValue::from_static("a=1; cairn_session=cairn_x ; b=2"),
        );
        assert_eq!(session_token(&headers), Some("cairn_x"));
        headers.insert(COOKIE, HeaderValue::from_static("cairn_session_old=y"));
        assert_eq!(session_token(&headers), None);

        let plain = cookie(Some("cairn_x"), Some(60), false);
        assert_eq!(
            plain.to_str().unwrap(),
            "cairn_session=cairn_x; Path=/; HttpOnly; SameSite=Strict; Max-Age=60"
        );
        let tls = cookie(None, None, true);
        assert_eq!(
            tls.to_str().unwrap(),
            "cairn_session=; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age=0"
        );
        headers.insert(ORIGIN, HeaderValue::from_static("https://cairn.example"));
        assert!(over_https(&headers));
    }

    #[test]
    fn the_origin_must_be_the_host_it_was_sent_to() {
        let mut headers = HeaderMap::new();
        assert!(check_origin(&headers, false).is_ok());
        assert!(check_origin(&headers, true).is_err());
        headers.insert(HOST, HeaderValue::from_static("127.0.0.1:42700"));
        headers.insert(ORIGIN, HeaderValue::from_static("http://127.0.0.1:42700"));
        assert!(check_origin(&headers, true).is_ok());
        for other in [
            "http://127.0.0.1:42701",
            "http://evil.example",
            "null",
            "127.0.0.1:42700",
        ] {
            headers.insert(ORIGIN, HeaderValue::from_static(other));
            assert!(check_origin(&headers, false).is_err(), "{other}");
        }
        assert_ne!(csrf_for("a"), csrf_for("b"));
        assert_ne!(csrf_for("a"), auth::hash_secret("a"));
    }
}
