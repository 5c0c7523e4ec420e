//! Pairing and its limits, token expiry and revocation, the per-client
//! limit on failed authentications, and forwarded client addresses.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use cairn_core::clock::{Clock, SystemClock};
use cairn_gateway::{auth, pairing};
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

/// A well-formed code that is not `code` (codes are random, so a fixed
/// wrong one could collide).
fn wrong(code: &str) -> String {
    let first = if code.starts_with('A') { 'B' } else { 'A' };
    format!("{first}{}", &code[1..])
}

#[tokio::test]
async fn a_pairing_code_buys_one_token_once() {
    let gw = TestGateway::start().await;
    let code = gw.pairing_code().await;
    // As printed (with the dash) and in lower case: still the code.
    let typed = pairing::display(&code).to_lowercase();
    let response = pair(&gw, Some(&typed)).await;
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
    let code = gw.pairing_code().await;
    let body: Value = pair(&gw, Some(&code)).await.json().await.unwrap();
    assert!(body["expires_in"].is_null(), "{body}");
    assert!(body["token"].is_string());
    gw.stop().await;
}

#[tokio::test]
async fn only_codes_made_with_the_gateways_key_pair() {
    let gw = TestGateway::start().await;
    // A code hashed with another home's install key is a wrong code here.
    let other = pairing::PairingKey::ephemeral();
    let code = pairing::issue_code(&gw.store, &other, SystemClock.now())
        .await
        .unwrap();
    assert_eq!(pair(&gw, Some(&code)).await.status(), 401);
    // The store keeps only the keyed hash, never the code.
    assert_eq!(gw.store.pairing_state().await.unwrap().wrong_codes, 1);
    gw.stop().await;
}

#[tokio::test]
async fn malformed_codes_are_400_and_do_not_count() {
    let gw = TestGateway::start().await;
    let code = gw.pairing_code().await;
    for bad in ["123456", "ABCDE-FGHIO", "ABCDE-FGHJKM"] {
        let (status, _) = error_code(pair(&gw, Some(bad)).await).await;
        assert_eq!(status, 400, "{bad}");
    }
    assert_eq!(gw.store.pairing_state().await.unwrap().wrong_codes, 0);
    assert_eq!(pair(&gw, Some(&code)).await.status(), 200);
    gw.stop().await;
}

#[tokio::test]
async fn ten_wrong_codes_from_anywhere_void_every_code() {
    let gw = TestGateway::start().await;
    let code = gw.pairing_code().await;
    let second = gw.pairing_code().await;
    let again = gw.pairing_code().await;
    // Codes made earlier stay valid until used, expired or voided.
    for _ in 0..pairing::WRONG_CODES_LIMIT {
        let (status, _) = error_code(pair(&gw, Some(&wrong(&again))).await).await;
        assert_eq!(status, 401);
    }
    // Every outstanding code is void, the right ones included, whoever asks.
    let elsewhere = cairn_llm::tls::client_builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 3]))
        .build()
        .unwrap();
    for right in [&code, &second, &again] {
        let response = elsewhere
            .post(gw.url("/pair"))
            .header("X-Pairing-Code", right)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 401, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("cairn pair"),
            "{body}"
        );
    }
    // A new code from the machine pairs again.
    let fresh = gw.pairing_code().await;
    let response = elsewhere
        .post(gw.url("/pair"))
        .header("X-Pairing-Code", &fresh)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
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
    // Failures stay refused until the minute is over…
    let tokenless = gw.http.get(gw.url("/metrics")).send().await.unwrap();
    assert_eq!(tokenless.status(), 429);
    // …but a valid token is never refused by the failure limit.
    assert_eq!(metrics_status(&gw, &gw.token).await, 200);
    gw.stop().await;
}

#[tokio::test]
async fn thirty_tokenless_requests_do_not_lock_out_a_valid_token() {
    let gw = TestGateway::start().await;
    for _ in 0..30 {
        let response = gw.http.get(gw.url("/api/routines")).send().await.unwrap();
        assert!(matches!(response.status().as_u16(), 401 | 429));
    }
    assert_eq!(gw.get("/api/routines").send().await.unwrap().status(), 200);
    assert_eq!(metrics_status(&gw, &gw.token).await, 200);
    gw.stop().await;
}

#[tokio::test]
async fn forwarded_addresses_name_the_right_most_untrusted_client() {
    let mut s = settings();
    s.trust_forwarded_for = true;
    let gw = TestGateway::start_with(s, |g| g).await;
    // The client forges a fresh left-most address on every request; the
    // proxy (loopback, trusted) appends the address it really saw.
    for n in 0..cairn_gateway::limits::AUTH_FAILURES_PER_MINUTE {
        let response = gw
            .http
            .get(gw.url("/metrics"))
            .bearer_auth("cairn_wrong")
            .header(
                "X-Forwarded-For",
                format!("10.0.{}.{}, 203.0.113.7", n / 250, n % 250),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401);
    }
    let response = gw
        .http
        .get(gw.url("/metrics"))
        .bearer_auth("cairn_wrong")
        .header("X-Forwarded-For", "198.18.0.1, 203.0.113.7")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        429,
        "the forged entries did not hide the client"
    );
    // Another client behind the same proxy is not affected.
    let response = gw
        .http
        .get(gw.url("/metrics"))
        .bearer_auth("cairn_wrong")
        .header("X-Forwarded-For", "203.0.113.8")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    gw.stop().await;
}
