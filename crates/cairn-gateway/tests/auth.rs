//! Pairing, its limits and lockout, token expiry and revocation, and the
//! per-client limit on failed authentications.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use cairn_core::clock::{Clock, SystemClock};
use cairn_gateway::auth;
use cairn_store::NewApiToken;
use serde_json::Value;
use support::{TestGateway, error_code, settings};

async fn pair(gw: &TestGateway, code: Option<&str>) -> reqwest::Response {
    let mut request = gw.http.post(gw.url("/pair"));
    if let Some(code) = code {
        request = request.header("X-Pairing-Code", code);
    }
    request.send().await.unwrap()
}

async fn metrics_status(gw: &TestGateway, token: &str) -> u16 {
    gw.http
        .get(gw.url("/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A code that is not `code` (codes are random, so a fixed wrong one could collide).
fn wrong(code: &str) -> String {
    format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000)
}

#[tokio::test]
async fn a_pairing_code_buys_one_token_once() {
    let gw = TestGateway::start().await;
    let code = auth::issue_pairing_code(&gw.store, SystemClock.now())
        .await
        .unwrap();
    let response = pair(&gw, Some(&code)).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["expires_in"], 30 * 24 * 3600);
    let token = body["token"].as_str().unwrap();
    assert!(token.starts_with(auth::TOKEN_PREFIX));
    assert_eq!(metrics_status(&gw, token).await, 200);

    let tokens = gw.store.list_api_tokens().await.unwrap();
    let paired = tokens.iter().find(|t| t.origin == "pairing").unwrap();
    assert!(paired.name.starts_with("paired-"), "{}", paired.name);
    assert!(paired.expires_at.is_some());

    // One-time: the same code again is refused.
    let (status, code_name) = error_code(pair(&gw, Some(&code)).await).await;
    assert_eq!((status, code_name.as_str()), (401, "unauthorized"));
    gw.stop().await;
}

#[tokio::test]
async fn tokens_never_expire_when_the_ttl_is_zero_and_a_missing_code_is_400() {
    let mut s = settings();
    s.token_ttl = None;
    let gw = TestGateway::start_with(s, |g| g).await;
    let (status, _) = error_code(pair(&gw, None).await).await;
    assert_eq!(status, 400);
    let code = auth::issue_pairing_code(&gw.store, SystemClock.now())
        .await
        .unwrap();
    let body: Value = pair(&gw, Some(&code)).await.json().await.unwrap();
    assert!(body["expires_in"].is_null(), "{body}");
    assert!(body["token"].is_string());
    gw.stop().await;
}

#[tokio::test]
async fn five_wrong_codes_lock_the_client_out() {
    let gw = TestGateway::start().await;
    let code = auth::issue_pairing_code(&gw.store, SystemClock.now())
        .await
        .unwrap();
    for _ in 0..5 {
        let (status, _) = error_code(pair(&gw, Some(&wrong(&code))).await).await;
        assert_eq!(status, 401);
    }
    // Locked out: even the right code is refused, with Retry-After.
    let response = pair(&gw, Some(&code)).await;
    assert_eq!(response.status(), 429);
    let retry: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((290..=300).contains(&retry), "{retry}");
    let (_, code_name) = error_code(response).await;
    assert_eq!(code_name, "rate_limited");
    gw.stop().await;
}

#[tokio::test]
async fn pairing_is_limited_to_ten_attempts_a_minute() {
    let gw = TestGateway::start().await;
    for _ in 0..10 {
        assert_eq!(pair(&gw, None).await.status(), 400);
    }
    let response = pair(&gw, None).await;
    assert_eq!(response.status(), 429);
    assert!(response.headers().contains_key("retry-after"));
    gw.stop().await;
}

#[tokio::test]
async fn expired_and_revoked_tokens_are_refused() {
    let gw = TestGateway::start().await;
    let now = SystemClock.now();
    let mut tokens = Vec::new();
    for (name, expires_at) in [
        ("past", Some(now - chrono::Duration::seconds(1))),
        ("future", Some(now + chrono::Duration::hours(1))),
    ] {
        let token = auth::new_token();
        gw.store
            .create_api_token(
                &NewApiToken {
                    name: name.into(),
                    token_hash: auth::hash_secret(&token),
                    origin: "cli".into(),
                    expires_at,
                },
                now,
            )
            .await
            .unwrap();
        tokens.push(token);
    }
    assert_eq!(metrics_status(&gw, &tokens[0]).await, 401);
    assert_eq!(metrics_status(&gw, &tokens[1]).await, 200);
    assert_eq!(metrics_status(&gw, &gw.token).await, 200);
    assert!(gw.store.revoke_api_token("test", now).await.unwrap());
    assert_eq!(metrics_status(&gw, &gw.token).await, 401);
    gw.stop().await;
}

#[tokio::test]
async fn repeated_auth_failures_are_rate_limited_per_client() {
    let gw = TestGateway::start().await;
    for _ in 0..cairn_gateway::limits::AUTH_FAILURES_PER_MINUTE {
        assert_eq!(metrics_status(&gw, "cairn_wrong").await, 401);
    }
    assert_eq!(metrics_status(&gw, "cairn_wrong").await, 429);
    // The client is refused whatever it sends until the minute is over.
    assert_eq!(metrics_status(&gw, &gw.token).await, 429);
    gw.stop().await;
}
